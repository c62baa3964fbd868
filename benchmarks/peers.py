"""``make bench-peers``: the same workloads on agentv, AgentV 4.42.4 (TypeScript) and Inspect AI.

Installs the peers into ``benchmarks/.peers/`` (needs npm and PyPI; once), generates each
tool's equivalent of the synthetic suite, and runs, alternating the tools within every
repetition so that machine noise hits them alike:

- start-up: ``--version``;
- S1 overhead: N cases on an instant mock (agentv: the ``mock`` target; AgentV: ``--dry-run``;
  Inspect: ``mockllm/model`` with preset usage);
- S2 concurrency: N cases against the loopback fake OpenAI server with 100 ms per call;
- S5 rate-limited goodput, ``make bench``'s sweep: 300 and 1,000 cases against the fake
  server answering after 0 ms, 100 ms and 2 s, limited to 20 requests/s with a burst of
  20, to 20 requests/s with no burst and to 600 requests a minute (429 with
  ``Retry-After`` beyond the limit), three runs per tool and cell (``--s5-reps``; the
  1,000-case cells take a minute each at best);
- S6 faults: 2,000 cases against the fake server answering every 5th request 500 and
  leaving every 50th hanging, each tool's request timeout set to 2 s (agentv's target
  ``timeout_seconds``, AgentV's ``--agent-timeout``, Inspect's ``--attempt-timeout``) and its
  retries left at its defaults but agentv's, which are ``make bench``'s S6 settings.

Every S1/S2 run is checked (exit code 0, N passing results, and for S2 exactly N requests at
the server). S5 and S6 count the failed cases instead: a tool that gives up on 429s, or
on 500s and hangs, has that as its result. It prints medians and the peer/agentv ratios of
the wall time, and writes them to ``benchmarks/results/peers.json``.

The peers' suites are the ones their published figures were measured on: 4-message
conversations and one substring check, without the attached file and guideline file that
agentv's suite carries, so agentv does slightly more work per case than they do.

Usage::

    python benchmarks/peers.py [--s1-sizes 200,2000] [--s2-sizes 200,2000] [--reps 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gen_suite import ANSWER, HTTP_TARGET, MOCK_TARGET, generate_suite
from measure import Measurement, load_fake_server_module, log_tail, measure, median, summarize

from run import (
    BENCH_DIR,
    S6_FAIL_EVERY,
    S6_HANG_EVERY,
    S6_TARGET_SETTINGS,
    Bench,
    RunCheckError,
    add_s5_sweep_arguments,
    child_env,
    find_agentv,
    limit_label,
    parse_limit,
    run_checked_eval,
    run_counted_eval,
    server_figures,
)

PEERS_DIR = BENCH_DIR / ".peers"
AGENTV_TS_VERSION = "4.42.4"
INSPECT_VERSION = "0.3.285"
INSPECT_TASK = BENCH_DIR / "peers" / "inspect_task.py"
TOOLS = ("agentv", "agentv-ts", "inspect")
#: S5 only, on request (``--tools``): Inspect with its adaptive connections (the default when
#: no ``--max-connections`` is given; min 10, start 20, max 100), 50 samples at once
OPTIONAL_TOOLS = ("inspect-adaptive",)
TOOL_NAMES = {
    "agentv": "agentv (this project)",
    "agentv-ts": f"AgentV {AGENTV_TS_VERSION} (TypeScript)",
    "inspect": f"Inspect AI {INSPECT_VERSION}",
    "inspect-adaptive": f"Inspect AI {INSPECT_VERSION}, adaptive connections",
}
AGENTV_TS_DRY_RUN_NEEDLE = "dry-run mock"  # AgentV's --dry-run answer contains it
INSPECT_MOCK_NEEDLE = "Default output"  # inspect_task.MOCK_ANSWER
HTTP_NEEDLE = "42"  # gen_suite.ANSWER, the fake server's reply


# --- installing the peers ------------------------------------------------------------------


def agentv_ts_bin() -> Path:
    """The AgentV CLI installed by npm."""
    return PEERS_DIR / "agentv" / "node_modules" / ".bin" / "agentv"


def inspect_venv() -> Path:
    """The virtual environment holding Inspect AI."""
    return PEERS_DIR / "inspect-venv"


def _installed_version(argv: list[str]) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def install_peers(log: Callable[[str], None]) -> None:
    """Install AgentV from npm and Inspect AI from PyPI, unless the right versions are there."""
    PEERS_DIR.mkdir(parents=True, exist_ok=True)
    if _installed_version([str(agentv_ts_bin()), "--version"]) != AGENTV_TS_VERSION:
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit("npm is needed to install AgentV (TypeScript); install Node.js 20+")
        log(f"installing agentv@{AGENTV_TS_VERSION} from npm")
        subprocess.run(
            [npm, "install", "--prefix", str(PEERS_DIR / "agentv"), f"agentv@{AGENTV_TS_VERSION}"],
            check=True,
        )
    inspect_bin = inspect_venv() / "bin" / "inspect"
    if _installed_version([str(inspect_bin), "--version"]) != INSPECT_VERSION:
        log(f"installing inspect-ai=={INSPECT_VERSION} into {inspect_venv()}")
        subprocess.run([sys.executable, "-m", "venv", str(inspect_venv())], check=True)
        subprocess.run(
            [
                str(inspect_venv() / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                f"inspect-ai=={INSPECT_VERSION}",
                "openai",
                "aiohttp",
            ],
            check=True,
        )


# --- the peers' suites ---------------------------------------------------------------------


def conversation(i: int) -> list[dict[str, str]]:
    """The 4-message conversation of case ``i`` (the same turns as agentv's suite)."""
    number = i % 97
    return [
        {"role": "system", "content": "You are a concise assistant. Answer with a short sentence."},
        {"role": "user", "content": f"Case {i}: remember the number {number}."},
        {"role": "assistant", "content": f"Noted, the number is {number}."},
        {"role": "user", "content": f"Case {i}: what is 6 times 7? Also restate the number."},
    ]


def peer_case_id(i: int) -> str:
    """Case ids of the peers' suites."""
    return f"case-{i:06d}"


def write_agentv_ts_suite(path: Path, n: int, needle: str) -> None:
    """AgentV 4.x eval YAML: ``tests:`` with ``input`` and one ``contains`` assertion."""
    q = json.dumps  # a JSON string is a valid YAML double-quoted scalar
    with path.open("w", encoding="utf-8") as out:
        out.write("description: synthetic benchmark suite\ntests:\n")
        for i in range(n):
            lines = [f"  - id: {peer_case_id(i)}", f"    criteria: {q('Answers 42')}", "    input:"]
            for m in conversation(i):
                lines += [f"      - role: {m['role']}", f"        content: {q(m['content'])}"]
            lines += [
                f"    expected_output: {q(ANSWER)}",
                "    assertions:",
                "      - type: contains",
                f"        value: {q(needle)}",
            ]
            out.write("\n".join(lines) + "\n")


def write_agentv_ts_targets(folder: Path, server_url: str | None) -> None:
    """AgentV 4.x refuses literal keys and models, so they come from the environment."""
    url = (server_url or "http://127.0.0.1:9").rstrip("/") + "/v1"
    (folder / ".agentv").mkdir(parents=True, exist_ok=True)
    (folder / ".agentv" / "targets.yaml").write_text(
        "targets:\n"
        "  - name: default\n"
        "    provider: openai\n"
        f"    base_url: {url}\n"
        "    api_key: ${{ OPENAI_API_KEY }}\n"
        "    model: ${{ FAKE_MODEL }}\n",
        encoding="utf-8",
    )


def write_inspect_dataset(path: Path, n: int, needle: str) -> None:
    """JSON lines read by ``inspect_task.py``."""
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            record = {"id": peer_case_id(i), "input": conversation(i), "target": needle}
            out.write(json.dumps(record) + "\n")


def _ensure(path: Path, writer: Callable[[Path], None]) -> Path:
    if not path.exists():
        tmp = path.with_suffix(path.suffix + ".tmp")
        writer(tmp)
        tmp.replace(path)
    return path


# --- the checks ----------------------------------------------------------------------------


def check_agentv_ts(out_dir: Path, n: int) -> None:
    """N lines in ``index.jsonl``, every case ``ok`` with score 1."""
    index = out_dir / "index.jsonl"
    if not index.exists():
        raise RunCheckError(f"AgentV wrote no {index}")
    ids = set()
    with index.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            rec = json.loads(line)
            if rec.get("execution_status") != "ok" or rec.get("score") != 1:
                raise RunCheckError(
                    f"AgentV case {rec.get('test_id')}: status {rec.get('execution_status')}, "
                    f"score {rec.get('score')}, error {rec.get('error')!r}"
                )
            ids.add(rec.get("test_id"))
    if len(ids) != n:
        raise RunCheckError(f"AgentV wrote {len(ids)} distinct results for {n} cases")


_INSPECT_CHECK = """
import json, pathlib, sys
from inspect_ai.log import read_eval_log
logs = sorted(pathlib.Path(sys.argv[1]).glob("*.eval"))
log = read_eval_log(str(logs[-1]), header_only=True)
r = log.results
print(json.dumps({"status": log.status, "total": r.total_samples if r else 0,
    "completed": r.completed_samples if r else 0,
    "accuracy": r.scores[0].metrics["accuracy"].value if r and r.scores else None}))
"""


def check_inspect(log_dir: Path, n: int) -> None:
    """The run's ``.eval`` log says: success, N samples completed, accuracy 1."""
    if not list(log_dir.glob("*.eval")):
        raise RunCheckError(f"Inspect wrote no .eval log into {log_dir}")
    out = subprocess.run(
        [str(inspect_venv() / "bin" / "python"), "-c", _INSPECT_CHECK, str(log_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if out.returncode != 0:
        raise RunCheckError(f"could not read the Inspect log: {out.stderr.strip()[-500:]}")
    info = json.loads(out.stdout)
    if info != {"status": "success", "total": n, "completed": n, "accuracy": 1.0}:
        raise RunCheckError(f"Inspect run: {info} (expected {n} samples, all correct)")


# --- running -------------------------------------------------------------------------------


@dataclass
class PeerBench:
    """Everything the peer runs share."""

    bench: Bench  # agentv's own settings (work folder, workers, environment)
    work: Path
    server: Any = None  # the fake OpenAI server (S2)
    limited_server: Any = None  # the same, rate-limited (S5)
    faulty_server: Any = None  # the same, answering 500 and hanging (S6)
    log: Callable[[str], None] = print

    def server_for(self, scenario: str) -> Any:
        """The running fake server of ``scenario`` (S2, S5 or S6)."""
        server = {"S5": self.limited_server, "S6": self.faulty_server}.get(scenario, self.server)
        if server is None:
            raise RuntimeError(f"the fake server of {scenario} is not running")
        return server

    def server_url(self, scenario: str = "S2") -> str:
        """The running fake server's base URL."""
        return str(self.server_for(scenario).url)


HTTP_SCENARIOS = ("S2", "S5", "S6")
#: S6: every tool's request timeout (agentv's is in ``S6_TARGET_SETTINGS``)
S6_TIMEOUT_S = int(S6_TARGET_SETTINGS["timeout_seconds"])


def _fresh(path: Path) -> Path:
    shutil.rmtree(path, ignore_errors=True)
    return path


def _agentv_ts_once(
    pb: PeerBench, scenario: str, n: int, rep: int, timeout_s: float
) -> tuple[Measurement, Path, Path]:
    """One AgentV (TypeScript) run: the measurement, its output folder and its log."""
    folder = pb.work / "agentv-ts"
    folder.mkdir(parents=True, exist_ok=True)
    http = scenario in HTTP_SCENARIOS
    write_agentv_ts_targets(folder, pb.server_url(scenario) if http else None)
    needle = HTTP_NEEDLE if http else AGENTV_TS_DRY_RUN_NEEDLE
    suite = _ensure(
        folder / f"{'http' if http else 'dry'}{n}.yaml",
        lambda p: write_agentv_ts_suite(p, n, needle),
    )
    out = _fresh(folder / "out")
    argv = [str(agentv_ts_bin()), "eval", "run", suite.name, "--workers", str(pb.bench.workers)]
    argv += ["--output", str(out)]
    if not http:
        argv.append("--dry-run")
    if scenario == "S6":  # each provider call aborted after the timeout, then retried
        argv += ["--agent-timeout", str(S6_TIMEOUT_S)]
    env = {**pb.bench.env, "OPENAI_API_KEY": "dummy", "FAKE_MODEL": "fake"}
    log = pb.work / "logs" / f"agentv-ts-{scenario}-{n}-{rep}.log"
    m = measure(argv, cwd=folder, log_path=log, env=env, timeout_s=timeout_s)
    return m, out, log


def run_agentv_ts(pb: PeerBench, scenario: str, n: int, rep: int) -> Measurement:
    """One AgentV (TypeScript) run, checked."""
    m, out, log = _agentv_ts_once(pb, scenario, n, rep, 120 + n * 0.2)
    if m.returncode != 0 or m.timed_out:
        raise RunCheckError(f"AgentV exit code {m.returncode}; log {log}:\n{log_tail(log)}")
    check_agentv_ts(out, n)
    shutil.rmtree(out, ignore_errors=True)
    return m


def _inspect_once(
    pb: PeerBench, scenario: str, n: int, rep: int, timeout_s: float, adaptive: bool = False
) -> tuple[Measurement, Path, Path]:
    """One Inspect AI run: the measurement, its log folder and its console log."""
    folder = pb.work / "inspect"
    folder.mkdir(parents=True, exist_ok=True)
    http = scenario in HTTP_SCENARIOS
    needle = HTTP_NEEDLE if http else INSPECT_MOCK_NEEDLE
    data = _ensure(
        folder / f"{'http' if http else 'mock'}{n}.jsonl",
        lambda p: write_inspect_dataset(p, n, needle),
    )
    shutil.copyfile(INSPECT_TASK, folder / INSPECT_TASK.name)
    out = _fresh(folder / "logs")
    argv = [str(inspect_venv() / "bin" / "inspect"), "eval", INSPECT_TASK.name]
    argv += ["-T", f"data={data.name}", "--log-dir", str(out), "--display", "none"]
    conc = str(pb.bench.workers)
    # an explicit --max-connections turns Inspect's adaptive connections off
    argv += (
        ["--max-samples", conc] if adaptive else ["--max-connections", conc, "--max-samples", conc]
    )
    env = dict(pb.bench.env)
    if http:
        argv += ["--model", "openai/fake", "--model-base-url", pb.server_url(scenario) + "/v1"]
        argv += ["-M", "responses_api=false"]
        env["OPENAI_API_KEY"] = "dummy"
        if scenario == "S6":  # per attempt (Inspect's --timeout bounds all the retries)
            argv += ["--attempt-timeout", str(S6_TIMEOUT_S)]
    else:
        argv += ["-T", "mock=true", "--model", "mockllm/model"]
    log = pb.work / "logs" / f"inspect-{scenario}-{n}-{rep}.log"
    m = measure(argv, cwd=folder, log_path=log, env=env, timeout_s=timeout_s)
    return m, out, log


def run_inspect(pb: PeerBench, scenario: str, n: int, rep: int) -> Measurement:
    """One Inspect AI run, checked."""
    m, out, log = _inspect_once(pb, scenario, n, rep, 120 + n * 0.3)
    if m.returncode != 0 or m.timed_out:
        raise RunCheckError(f"Inspect exit code {m.returncode}; log {log}:\n{log_tail(log)}")
    check_inspect(out, n)
    return m


def run_ours(pb: PeerBench, scenario: str, n: int, rep: int) -> Measurement:
    """One agentv run, checked exactly as in ``make bench``."""
    http = scenario in HTTP_SCENARIOS
    folder = pb.bench.work / "suites" / f"n{n}"
    suite = generate_suite(folder, n, server_url=pb.server_url(scenario) if http else None)
    return run_checked_eval(
        pb.bench, suite, HTTP_TARGET if http else MOCK_TARGET, f"peers-{scenario}-{n}-{rep}"
    )


RUNNERS: dict[str, Callable[[PeerBench, str, int, int], Measurement]] = {
    "agentv": run_ours,
    "agentv-ts": run_agentv_ts,
    "inspect": run_inspect,
}


# --- S5: the rate-limited server -----------------------------------------------------------


def count_agentv_ts(out_dir: Path, n: int) -> tuple[int, list[str]]:
    """Failed cases of an AgentV run (not ``ok`` with score 1, or no result at all)."""
    index = out_dir / "index.jsonl"
    if not index.exists():
        return n, [f"AgentV wrote no {index.name}"]
    passed: set[str] = set()
    errors: list[str] = []
    with index.open(encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            rec = json.loads(line)
            if rec.get("execution_status") == "ok" and rec.get("score") == 1:
                passed.add(rec.get("test_id"))
            elif len(errors) < 3:
                errors.append(
                    f"{rec.get('test_id')}: {rec.get('execution_status')}: {rec.get('error')!r}"[
                        :300
                    ]
                )
    return n - len(passed), errors


_INSPECT_COUNT = """
import json, pathlib, sys
from inspect_ai.log import read_eval_log
logs = sorted(pathlib.Path(sys.argv[1]).glob("*.eval"))
if not logs:
    print(json.dumps({"status": "no log", "passed": 0, "errors": []}))
    raise SystemExit
log = read_eval_log(str(logs[-1]))
passed, errors = 0, []
for s in log.samples or []:
    if s.error is None and s.scores and all(v.value == "C" for v in s.scores.values()):
        passed += 1
    elif s.error is not None and len(errors) < 3:
        errors.append(str(s.error.message)[:300])
if log.error is not None:
    errors.append(str(log.error.message)[:300])
print(json.dumps({"status": log.status, "passed": passed, "errors": errors}))
"""


def count_inspect(log_dir: Path, n: int) -> tuple[int, list[str]]:
    """Failed samples of an Inspect run (errors, wrong answers, or never run)."""
    out = subprocess.run(
        [str(inspect_venv() / "bin" / "python"), "-c", _INSPECT_COUNT, str(log_dir)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if out.returncode != 0:
        return n, [f"could not read the Inspect log: {out.stderr.strip()[-300:]}"]
    info = json.loads(out.stdout)
    errors = list(info["errors"])
    if info["status"] != "success":
        errors.insert(0, f"run status {info['status']}")
    return n - int(info["passed"]), errors


def run_faulty(
    pb: PeerBench,
    scenario: str,
    tool: str,
    n: int,
    rep: int,
    timeout_s: float,
    delay_s: float | None = None,
) -> dict[str, Any]:
    """One S5 or S6 run of ``tool`` against that scenario's server (answering after
    ``delay_s``, default ``--delay-ms``): wall time, what the server saw, the failed cases.
    A run that does not finish is a result too (``finished``). Goodput as in ``make
    bench``: passed cases over the window from the first request to the arrival of the
    last accepted one, plus 1 / rate, over the rate."""
    server = pb.server_for(scenario)
    server.reset()  # its rate limit starts afresh too
    if delay_s is None:
        delay_s = pb.bench.delay_ms / 1000
    if tool == "agentv":
        folder = pb.bench.work / "suites" / f"n{n}"
        settings = S6_TARGET_SETTINGS if scenario == "S6" else None
        suite = generate_suite(
            folder, n, server_url=pb.server_url(scenario), http_settings=settings
        )
        bench = Bench(**{**pb.bench.__dict__, "timeout_s": timeout_s})
        try:
            m, failed, errors, _ = run_counted_eval(
                bench, suite, HTTP_TARGET, f"peers-{scenario}-{n}-{rep}"
            )
            finished = True
        except RunCheckError as exc:
            raise RunCheckError(f"agentv: {exc}") from None
    else:
        if tool == "agentv-ts":
            m, out, log = _agentv_ts_once(pb, scenario, n, rep, timeout_s)
        else:
            m, out, log = _inspect_once(
                pb, scenario, n, rep, timeout_s, adaptive=tool == "inspect-adaptive"
            )
        finished = not m.timed_out
        counter = count_agentv_ts if tool == "agentv-ts" else count_inspect
        failed, errors = counter(out, n)
        if m.timed_out:
            errors.insert(0, f"did not finish within {timeout_s:g} s")
        elif m.returncode != 0 and not errors:
            errors.append(f"exit code {m.returncode}; log {log}:\n{log_tail(log, 5)}")
    passed = n - failed
    requests = list(server.requests)
    figures = server_figures(requests, delay_s, m, passed, strict=False)
    limit = server.limit.per_second if server.limit is not None else None
    window = figures["ok_span_s"] + 1 / limit if limit and passed else 0.0
    return {
        **m.to_dict(),
        **figures,
        "finished": finished,
        "failed_cases": failed,
        "errors": errors,
        "limited_share": figures["limited"] / figures["requests"] if figures["requests"] else 0,
        "goodput": passed / window / limit if window and limit else 0.0,
    }


def _faulty_table(
    rows: Sequence[dict[str, Any]], middle: dict[str, Callable[[dict[str, Any]], str]]
) -> str:
    """An S5 or S6 table: tool, N, runs, wall time, the ``middle`` columns (heading ->
    cell), failed cases and the result."""
    head = ["tool", "N", "runs", "wall s", *middle, "failed cases", "result"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        cells = [TOOL_NAMES[row["tool"]], f"{row['n']:,}"]
        if "error" in row and "wall_s" not in row:
            cells += ["–", f"FAILED: {row['error']}"] + [""] * (len(head) - 4)
        else:
            result = "ok" if row["failed_cases"] == 0 and row["finished"] else row["result"]
            cells += [str(len(row["runs"])), f"{row['wall_s']:.2f}"]
            cells += [cell(row) for cell in middle.values()]
            cells += [f"{row['failed_cases']:,}", result]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_s5(rows: Sequence[dict[str, Any]]) -> str:
    """The S5 table of ``main``: every tool in every cell, medians (min–max) of its runs,
    the most 429s and failed cases of any run."""
    head = "| limit | latency | N | tool | runs | wall s (min–max) | goodput (min–max) "
    head += "| requests | 429s (share, the most in a run) | failed cases | result |"
    lines = [head, "|" + "---|" * 11]
    for row in rows:
        cell = f"| {limit_label(row['limit'])} | {row['latency_ms']:g} ms | {row['n']:,} "
        cell += f"| {TOOL_NAMES[row['tool']]} "
        if "error" in row and "wall_s" not in row:
            lines.append(cell + f"| – | FAILED: {row['error']} | | | | | |")
            continue
        result = "ok" if row["failed_cases"] == 0 and row["finished"] else row["result"]
        wall = f"{row['wall_s']:.2f} ({row['wall_min_s']:.2f}–{row['wall_max_s']:.2f})"
        goodput = f"{row['goodput']:.2f} ({row['goodput_min']:.2f}–{row['goodput_max']:.2f})"
        share = f"{row['limited']:,} ({100 * row['limited_share_max']:.1f} %)"
        lines.append(
            cell + f"| {len(row['runs'])} | {wall} | {goodput} | {row['requests']:,} | {share} "
            f"| {row['failed_cases']:,} | {result} |"
        )
    return "\n".join(lines)


def format_s5_side_by_side(rows: Sequence[dict[str, Any]]) -> str:
    """S5 per cell, the tools side by side: goodput, 429 share and failed cases (the worst
    run's), and each peer's wall time over agentv's."""
    tools = list(dict.fromkeys(row["tool"] for row in rows))
    peers = [t for t in tools if t != "agentv"]
    head = "| limit | latency | N | " + " | ".join(
        f"{TOOL_NAMES[t]}: goodput, 429s, failed" for t in tools
    )
    head += "".join(f" | {TOOL_NAMES[t]} / agentv, wall" for t in peers) + " |"
    lines = [head, "|" + "---|" * (3 + len(tools) + len(peers))]
    cells: dict[tuple[str, float, int], dict[str, dict[str, Any]]] = {}
    for row in rows:
        cells.setdefault((row["limit"], row["latency_ms"], row["n"]), {})[row["tool"]] = row
    for (limit, latency, n), by_tool in cells.items():
        line = f"| {limit_label(limit)} | {latency:g} ms | {n:,} "
        for tool in tools:
            row = by_tool.get(tool)
            if row is None or "wall_s" not in row:
                line += "| – "
                continue
            line += (
                f"| {row['goodput_min']:.2f}, {100 * row['limited_share_max']:.1f} %, "
                f"{row['failed_cases']:,} "
            )
        ours = by_tool.get("agentv")
        for tool in peers:
            theirs = by_tool.get(tool)
            if ours is None or theirs is None or "wall_s" not in ours or "wall_s" not in theirs:
                line += "| – "
                continue
            line += f"| {theirs['wall_s'] / ours['wall_s']:.2f}x "
        lines.append(line + "|")
    return "\n".join(lines)


def format_s6(rows: Sequence[dict[str, Any]]) -> str:
    """The S6 table of ``main``: wall / S2 is against the same tool's S2 of this run."""
    return _faulty_table(
        rows,
        {
            "wall / S2": lambda row: f"{row['wall_vs_s2']:.2f}" if row.get("wall_vs_s2") else "–",
            "requests": lambda row: f"{row['requests']:,}",
            "500s": lambda row: f"{row['server_errors']:,}",
            "hangs": lambda row: f"{row['hangs']:,}",
        },
    )


def summarize_faulty(
    tool: str, scenario: str, n: int, runs: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """Medians of the S5 or S6 runs of one tool (failed cases: the worst run)."""
    row: dict[str, Any] = {"tool": tool, "scenario": scenario, "n": n}
    for name in ("wall_s", "window_s", "goodput", "limited_share", "cpu_s", "max_rss_mb"):
        row[name] = round(median([r[name] for r in runs]), 3)
    row["wall_min_s"] = min(r["wall_s"] for r in runs)
    row["wall_max_s"] = max(r["wall_s"] for r in runs)
    row["goodput_min"] = round(min(r["goodput"] for r in runs), 3)
    row["goodput_max"] = round(max(r["goodput"] for r in runs), 3)
    row["limited_share_max"] = round(max(r["limited_share"] for r in runs), 4)
    for name in ("requests", "limited", "server_errors", "hangs"):
        row[name] = int(median([r[name] for r in runs]))
    row["failed_cases"] = max(r["failed_cases"] for r in runs)
    row["finished"] = all(r["finished"] for r in runs)
    worst = max(runs, key=lambda r: r["failed_cases"])
    row["result"] = "; ".join(worst["errors"][:2]).replace("\n", " ").replace("|", "/")[:400]
    row["runs"] = list(runs)
    return row


def version_argv(tool: str, ours: Path) -> list[str]:
    """The ``--version`` command of each tool."""
    return {
        "agentv": [str(ours), "--version"],
        "agentv-ts": [str(agentv_ts_bin()), "--version"],
        "inspect": [str(inspect_venv() / "bin" / "inspect"), "--version"],
    }[tool]


def run_cell(pb: PeerBench, tool: str, scenario: str, n: int, rep: int) -> Measurement:
    """One checked run of ``tool``; S2 also checks the request count at the server."""
    if scenario == "version":
        log = pb.work / "logs" / f"{tool}-version.log"
        m = measure(
            version_argv(tool, pb.bench.agentv), cwd=pb.work, log_path=log, env=pb.bench.env
        )
        if m.returncode != 0:
            raise RunCheckError(f"{tool} --version failed:\n{log_tail(log)}")
        return m
    if scenario == "S2":
        pb.server.reset()
    m = RUNNERS[tool](pb, scenario, n, rep)
    if scenario == "S2":
        count = len(pb.server.requests)
        if count != n:
            raise RunCheckError(f"{tool}: the fake server got {count} requests for {n} cases")
    return m


def _fmt_row(tool: str, scenario: str, n: int, s: dict[str, Any], ideal: float | None) -> str:
    wall = f"{s['wall_s']:.2f} ({s['wall_min_s']:.2f}–{s['wall_max_s']:.2f})"
    rate = f"{n / s['wall_s']:,.0f}" if n > 1 else "–"
    eff = f"{ideal / s['wall_s']:.2f}" if ideal else "–"
    return (
        f"| {TOOL_NAMES[tool]} | {scenario} | {n:,} | {wall} | {rate} | {s['cpu_s']:.2f} "
        f"| {s['max_rss_mb']:.0f} | {eff} |"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Install the peers, run the matrix, print medians and ratios, write ``peers.json``."""
    p = argparse.ArgumentParser(description="agentv against AgentV (TypeScript) and Inspect AI.")
    p.add_argument("--s1-sizes", default="2000", help="S1 case counts (default 2000)")
    p.add_argument("--s2-sizes", default="2000", help="S2 case counts (default 2000)")
    p.add_argument(
        "--s5-sizes", default="300,1000", help="S5 case counts (default 300,1000; '' skips)"
    )
    p.add_argument("--reps", type=int, default=3, help="runs per cell; medians are shown")
    p.add_argument("--s5-reps", type=int, default=3, help="runs per tool and S5 cell (default 3)")
    p.add_argument("--s5-timeout", type=float, default=600, help="S5: seconds before giving up")
    p.add_argument("--s6-sizes", default="2000", help="S6 case counts (default 2000; '' skips)")
    p.add_argument("--s6-reps", type=int, default=1, help="runs per tool in S6 (default 1)")
    p.add_argument("--s6-timeout", type=float, default=600, help="S6: seconds before giving up")
    add_s5_sweep_arguments(p)
    p.add_argument("--tools", default=",".join(TOOLS), help=f"subset of {', '.join(TOOLS)}")
    p.add_argument("--skip-install", action="store_true", help="use the installed peers as is")
    p.add_argument("--workers", type=int, default=50)
    p.add_argument("--delay-ms", type=float, default=100.0)
    p.add_argument("--output", type=Path, default=BENCH_DIR / "results" / "peers.json")
    p.add_argument("--agentv", type=Path, help="this project's agentv (default: the venv's)")
    args = p.parse_args(argv)
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    if unknown := [t for t in tools if t not in TOOLS + OPTIONAL_TOOLS]:
        valid = ", ".join(TOOLS + OPTIONAL_TOOLS)
        p.error(f"unknown tool {unknown[0]!r}; valid choices: {valid}")
    s1 = [int(x) for x in args.s1_sizes.split(",") if x.strip()]
    s2 = [int(x) for x in args.s2_sizes.split(",") if x.strip()]
    s5 = [int(x) for x in args.s5_sizes.split(",") if x.strip()]
    s5_limits = [x.strip() for x in args.s5_limits.split(",") if x.strip()]
    s5_latencies = [float(x) for x in args.s5_latency_ms.split(",") if x.strip()]
    s6 = [int(x) for x in args.s6_sizes.split(",") if x.strip()]
    cell_tools = [t for t in tools if t not in OPTIONAL_TOOLS]  # S5 only for the others

    if not args.skip_install and any(t != "agentv" for t in tools):
        install_peers(print)
    work = PEERS_DIR / "work"
    bench = Bench(
        agentv=args.agentv or find_agentv(),
        work=(BENCH_DIR / ".work").resolve(),
        reps=args.reps,
        workers=args.workers,
        delay_ms=args.delay_ms,
        timeout_s=None,
        keep=False,
        env=child_env(),
    )
    (bench.work / "runs").mkdir(parents=True, exist_ok=True)
    pb = PeerBench(bench=bench, work=work)
    (work / "logs").mkdir(parents=True, exist_ok=True)
    delay_s = args.delay_ms / 1000
    cells = [("version", 0)] + [("S1", n) for n in s1] + [("S2", n) for n in s2]

    module = load_fake_server_module()
    pb.server = module.FakeLLMServer(delay_ms=args.delay_ms, reply=ANSWER, record=True)
    pb.server.start()
    pb.faulty_server = module.FakeLLMServer(
        delay_ms=args.delay_ms,
        reply=ANSWER,
        record=True,
        standing=(
            module.Every(S6_FAIL_EVERY, module.Fault.server_error()),
            module.Every(S6_HANG_EVERY, module.Fault.hanging(), at=1),
        ),
    )
    pb.faulty_server.start()
    results: dict[tuple[str, str, int], list[Measurement]] = {}
    failures: dict[tuple[str, str, int], str] = {}
    faulty_runs: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    s5_failures: dict[tuple[str, float, int, str], str] = {}
    started = datetime.now(UTC)
    t0 = time.perf_counter()
    try:
        for scenario, n in cells:
            reps = max(args.reps, 5) if scenario == "version" else args.reps
            for rep in range(reps):
                for tool in cell_tools:  # alternate the tools inside every repetition
                    key = (tool, scenario, n)
                    if key in failures:
                        continue
                    try:
                        m = run_cell(pb, tool, scenario, n, rep)
                    except RunCheckError as exc:
                        failures[key] = str(exc)
                        print(f"  {tool} {scenario} {n}: FAILED: {exc}")
                        continue
                    results.setdefault(key, []).append(m)
                    print(f"  {tool} {scenario} N={n} run {rep + 1}: {m.wall_s:.2f} s")
        s5_runs: dict[tuple[str, float, int, str], list[dict[str, Any]]] = {}
        for limit in s5_limits:  # one server per limit and latency, every size and tool on it
            for latency in s5_latencies:
                if not s5:
                    continue
                pb.limited_server = module.FakeLLMServer(
                    delay_ms=latency,
                    reply=ANSWER,
                    record=True,
                    limit=parse_limit(limit, module),
                )
                pb.limited_server.start()
                try:
                    for n in s5:
                        for rep in range(args.s5_reps):
                            for tool in tools:
                                key = (limit, latency, n, tool)
                                if key in s5_failures:
                                    continue
                                try:
                                    r = run_faulty(
                                        pb, "S5", tool, n, rep, args.s5_timeout, latency / 1000
                                    )
                                except RunCheckError as exc:
                                    s5_failures[key] = str(exc)
                                    print(f"  {tool} S5 {limit} {latency:g} ms {n}: FAILED: {exc}")
                                    continue
                                s5_runs.setdefault(key, []).append(r)
                                print(
                                    f"  {tool} S5 {limit} {latency:g} ms N={n} run {rep + 1}: "
                                    f"{r['wall_s']:.2f} s, goodput {r['goodput']:.2f}, "
                                    f"{r['requests']} requests ({r['limited']} 429s), "
                                    f"{r['failed_cases']} failed"
                                )
                finally:
                    pb.limited_server.stop()
                    pb.limited_server = None
        faulty = [("S6", n, args.s6_reps, args.s6_timeout, cell_tools) for n in s6]
        for scenario, n, reps, limit_s, scenario_tools in faulty:
            for rep in range(reps):
                for tool in scenario_tools:
                    key = (tool, scenario, n)
                    if key in failures:
                        continue
                    try:
                        r = run_faulty(pb, scenario, tool, n, rep, limit_s)
                    except RunCheckError as exc:
                        failures[key] = str(exc)
                        print(f"  {tool} {scenario} {n}: FAILED: {exc}")
                        continue
                    faulty_runs.setdefault(key, []).append(r)
                    print(
                        f"  {tool} {scenario} N={n} run {rep + 1}: {r['wall_s']:.2f} s, "
                        f"{r['requests']} requests ({r['limited']} 429s, {r['server_errors']} "
                        f"500s, {r['hangs']} hangs), {r['failed_cases']} failed"
                    )
    finally:
        pb.server.stop()
        pb.faulty_server.stop()  # releases the hanging requests
        for n in {*s1, *s2, *s5, *s6}:  # leave agentv's suites pointing at no server
            generate_suite(bench.work / "suites" / f"n{n}", n)

    rows: list[dict[str, Any]] = []
    lines = [
        "| tool | scenario | N | wall s (min–max) | cases/s | CPU s | peak RSS MB | efficiency |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for scenario, n in cells:
        for tool in cell_tools:
            key = (tool, scenario, n)
            if key in failures:
                lines.append(f"| {TOOL_NAMES[tool]} | {scenario} | {n:,} | FAILED | | | | |")
                rows.append({"tool": tool, "scenario": scenario, "n": n, "error": failures[key]})
                continue
            s = summarize(results[key])
            ideal = n * delay_s / args.workers if scenario == "S2" else None
            lines.append(_fmt_row(tool, scenario, n, s, ideal))
            row = {"tool": tool, "scenario": scenario, "n": n, **s}
            if ideal:
                row["efficiency"] = round(ideal / s["wall_s"], 3)
            row["runs"] = [r.to_dict() for r in results[key]]
            rows.append(row)
    others = [t for t in cell_tools if t != "agentv"]
    ratio_lines = [
        "| scenario | N | " + " | ".join(f"{TOOL_NAMES[t]} / agentv" for t in others) + " |"
    ]
    ratio_lines.append("|---|---|" + "---|" * len(others))
    ratios: list[dict[str, Any]] = []
    if "agentv" in tools:
        for scenario, n in cells:
            ours = results.get(("agentv", scenario, n))
            cells_text = []
            for tool in others:
                theirs = results.get((tool, scenario, n))
                if not ours or not theirs:
                    cells_text.append("–")
                    continue
                ratio = summarize(theirs)["wall_s"] / summarize(ours)["wall_s"]
                ratios.append({"tool": tool, "scenario": scenario, "n": n, "ratio": ratio})
                cells_text.append(f"{ratio:.1f}x")
            ratio_lines.append(f"| {scenario} | {n:,} | " + " | ".join(cells_text) + " |")

    s5_rows: list[dict[str, Any]] = []
    for limit in s5_limits:
        for latency in s5_latencies:
            for n in s5:
                for tool in tools:
                    key = (limit, latency, n, tool)
                    if key in s5_failures:
                        row = {"tool": tool, "scenario": "S5", "n": n, "error": s5_failures[key]}
                    elif key in s5_runs:
                        row = summarize_faulty(tool, "S5", n, s5_runs[key])
                    else:
                        continue
                    row.update(limit=limit, latency_ms=latency)
                    s5_rows.append(row)
    s6_rows: list[dict[str, Any]] = []
    for scenario, n, _, _, scenario_tools in faulty:
        for tool in scenario_tools:
            key = (tool, scenario, n)
            if key in failures:
                row = {"tool": tool, "scenario": scenario, "n": n, "error": failures[key]}
            elif key in faulty_runs:
                row = summarize_faulty(tool, scenario, n, faulty_runs[key])
                s2 = results.get((tool, "S2", n))
                if s2:  # against the same tool's fault-free run
                    row["wall_vs_s2"] = round(row["wall_s"] / summarize(s2)["wall_s"], 2)
            else:
                continue
            s6_rows.append(row)
    rows.extend(s5_rows + s6_rows)

    print()
    print("\n".join(lines))
    if "agentv" in tools and others:
        print("\nWall-time ratios (peer / agentv; above 1 means agentv is faster):\n")
        print("\n".join(ratio_lines))
    if s5_rows:
        print(
            f"\nS5 (medians of {args.s5_reps} runs, min–max; 429s and failed cases: the worst "
            "run):\n"
        )
        print(format_s5(s5_rows))
        print("\nS5 side by side (goodput: the worst run):\n")
        print(format_s5_side_by_side([r for r in s5_rows if "wall_s" in r]))
    if s6_rows:
        print(
            f"\nS6: every {S6_FAIL_EVERY}th request 500, every {S6_HANG_EVERY}th hanging, "
            f"request timeouts {S6_TIMEOUT_S} s, {args.delay_ms:g} ms/call (medians of "
            f"{args.s6_reps} runs; failed cases: the worst):\n"
        )
        print(format_s6(s6_rows))
    meta = {
        "started": started.isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - t0, 1),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "reps": args.reps,
        "workers": args.workers,
        "delay_ms": args.delay_ms,
        "s5_reps": args.s5_reps,
        "s6_reps": args.s6_reps,
        "s6_timeout_s": S6_TIMEOUT_S,
        "s5_limits": s5_limits,
        "s5_latency_ms": s5_latencies,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    payload = {"meta": meta, "rows": rows, "ratios": ratios}
    args.output.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    print(f"\nfigures written to {args.output}")
    return 1 if failures or s5_failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
