"""S8, live conversations (``make bench``): conversations the target takes part in.

- 1,000 live cases of 5 turns each on the loopback fake OpenAI server answering after
  100 ms, 50 workers. A conversation's turns are sequential, so an ideal runner needs
  ``cases / workers * turns * delay`` (10 s) for the requests; the request window (first
  request to last answer, by the server's clock) is measured against it. Peak memory is
  compared with an S1-shaped run (instant ``mock`` target) of as many single-turn cases as
  the live run sends requests (5,000).
- One conversation of 200 turns on the same server answering at once: the time from one
  request to the next (agentv's own work per turn, plus the server's answer) must not grow
  with the turn number beyond what the longer request costs. Quadratic work per turn would
  show as a last-turns time many times the first turns'. Run ``--reps`` times; the run
  with the median growth is reported (its reference wanders from run to run).

Every run is checked first: exit code 0, one record per case with every turn graded 1.0,
and the server got exactly one request per turn, each carrying the conversation so far with
the earlier answers as ``assistant`` messages, byte-exact.

It exits 1 when a run failed its checks; goals that are not met are reported as ``FAIL``
(as ``run.py`` does). Figures go to ``benchmarks/results/s8.json``.

Usage::

    python benchmarks/s8_live.py [--reps 3] [--quick]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gen_suite import ANSWER, HTTP_TARGET, MOCK_TARGET, NEEDLE, generate_suite, targets_yaml
from measure import Measurement, load_fake_server_module, log_tail, measure, median, summarize

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_WORK = BENCH_DIR / ".work"
DEFAULT_OUTPUT = BENCH_DIR / "results" / "s8.json"
SYSTEM = "You are a patient tutor. Keep answers short and state numbers with digits."


class RunCheckError(Exception):
    """A run that did not do what it should; its figures must not be used."""


def write_live_suite(folder: Path, cases: int, turns: int, server_url: str) -> Path:
    """A suite of ``cases`` live conversations of ``turns`` user turns, each turn graded by
    one ``contains`` check of the server's answer; returns the eval file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".git").mkdir(exist_ok=True)  # the repository root: the targets search stops
    (folder / ".agentv").mkdir(exist_ok=True)
    (folder / ".agentv" / "targets.yaml").write_text(targets_yaml(server_url), encoding="utf-8")
    path = folder / f"live-{cases}x{turns}.yaml"
    with path.open("w", encoding="utf-8", newline="\n") as out:
        out.write(f"$schema: agentv-eval-v2\ntarget: {HTTP_TARGET}\nevalcases:\n")
        for i in range(cases):
            out.write(
                f"  - id: live-{i:05d}\n"
                f"    outcome: Keeps count across the turns.\n"
                f"    input_messages:\n"
                f"      - role: system\n"
                f"        content: {json.dumps(SYSTEM)}\n"
                f"    turns:\n"
            )
            for t in range(turns):
                out.write(
                    f"      - content: {json.dumps(f'Case {i}, question {t + 1}: what is 6 x 7?')}\n"
                    f"        evaluators: [{{type: contains, value: {json.dumps(NEEDLE)}}}]\n"
                )
    return path


def check_live_results(out: Path, cases: int, turns: int) -> None:
    """Raise ``RunCheckError`` unless ``out`` holds one passing conversation per case."""
    seen: set[str] = set()
    for number, line in enumerate(out.read_text(encoding="utf-8").splitlines(), 1):
        rec = json.loads(line)
        where = f"{out}:{number}"
        if rec.get("status") != "ok" or rec.get("score") != 1.0:
            raise RunCheckError(f"{where}: {rec.get('status')} {rec.get('error') or ''}")
        got = rec.get("turns") or []
        if len(got) != turns or any(t.get("score") != 1.0 for t in got):
            raise RunCheckError(f"{where}: expected {turns} passing turns, got {got!r:.300}")
        seen.add(rec["eval_id"])
    if len(seen) != cases:
        raise RunCheckError(f"{out}: {len(seen)} conversations recorded for {cases} cases")


def check_requests(requests: Sequence[Any], cases: int, turns: int) -> None:
    """Each request carries the conversation so far: the system message, then for each
    earlier turn its question and the server's answer (byte-exact), then the new question."""
    if len(requests) != cases * turns:
        raise RunCheckError(f"the server got {len(requests)} requests for {cases * turns} turns")
    for r in requests:
        messages = (r.body or {}).get("messages") or []
        answers = [m for m in messages if m["role"] == "assistant"]
        users = [m for m in messages if m["role"] == "user"]
        if messages[0] != {"role": "system", "content": SYSTEM} or len(users) != len(answers) + 1:
            raise RunCheckError(f"a request out of shape: {messages!r:.300}")
        if any(m["content"] != ANSWER for m in answers):
            raise RunCheckError(f"an earlier answer not carried byte-exact: {answers!r:.300}")


def run_eval(
    agentv: Path, eval_file: Path, target: str, workers: int, name: str, work: Path, n: int
) -> tuple[Measurement, Path]:
    """One measured ``agentv eval`` run into ``runs/NAME.jsonl``."""
    out = work / "runs" / f"{name}.jsonl"
    log = work / "runs" / f"{name}.log"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.unlink(missing_ok=True)
    argv = [str(agentv), "eval", str(eval_file), "--target", target]
    argv += ["--workers", str(workers), "--out", str(out), "--quiet"]
    m = measure(argv, cwd=eval_file.parent, log_path=log, env=child_env(), timeout_s=120 + n)
    if m.timed_out or m.returncode != 0:
        why = "timed out" if m.timed_out else f"exit code {m.returncode}"
        raise RunCheckError(f"{name}: {why}; log {log}:\n{log_tail(log)}")
    return m, out


def child_env() -> dict[str, str]:
    """The measured processes' environment: no proxy for loopback, no colour."""
    import os

    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    env.update(NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost", NO_COLOR="1")
    return env


def scenario_many(args: argparse.Namespace, agentv: Path) -> dict[str, Any]:
    """1,000 live cases of 5 turns at 100 ms per answer, and the S1-shaped memory reference."""
    cases, turns, delay_s = args.cases, args.turns, args.delay_ms / 1000
    module = load_fake_server_module()
    server = module.FakeLLMServer(delay_ms=args.delay_ms, reply=ANSWER, record=True)
    server.start()
    windows: list[float] = []
    runs: list[Measurement] = []
    try:
        eval_file = write_live_suite(args.work / "s8-live", cases, turns, server.url)
        for rep in range(args.reps):
            server.reset()
            m, out = run_eval(
                agentv, eval_file, HTTP_TARGET, args.workers, f"S8-{rep}", args.work, cases
            )
            check_live_results(out, cases, turns)
            requests = list(server.requests)
            check_requests(requests, cases, turns)
            arrivals = [r.received_at for r in requests]
            windows.append(max(arrivals) + delay_s - min(arrivals))
            runs.append(m)
            print(f"  S8 run {rep + 1}/{args.reps}: {m.wall_s:.2f} s, {m.max_rss_mb:.0f} MB")
        # the same requests as single-turn cases on the same server (S2's shape): what
        # the conversations cost beyond the SDK and the HTTP work
        requests_n = cases * turns
        single = generate_suite(args.work / "s8-single", requests_n, server_url=server.url)
        s2_windows: list[float] = []
        s2_runs = _reference_runs(
            args, agentv, single.eval_file, HTTP_TARGET, "S2", server, s2_windows
        )
        # and programs that do nothing but those calls: through the SDK's `post` as its
        # users would make them, and through agentv's own provider behind its gate (its
        # request path without the eval work): what each reaches on this machine now
        body_file = args.work / "s8-body.json"
        body_file.write_text(json.dumps(requests[len(requests) // 2].body), encoding="utf-8")
        sdk_windows, sdk_runs = _bare_runs(args, server, body_file, "sdk-post")
        provider_windows, provider_runs = _bare_runs(args, server, body_file, "agentv-provider")
    finally:
        server.stop()
    reference = generate_suite(args.work / "suites" / f"n{requests_n}", requests_n)
    s1_runs = _reference_runs(args, agentv, reference.eval_file, MOCK_TARGET, "S1")
    ideal = cases / args.workers * turns * delay_s
    row: dict[str, Any] = {"key": f"S8/{cases}x{turns}", "cases": cases, "turns": turns}
    row.update(summarize(runs))
    row["ideal_s"] = round(ideal, 3)
    row["server_window_s"] = round(median(windows), 3)
    row["efficiency_window"] = round(ideal / row["server_window_s"], 3)
    row["efficiency_window_runs"] = [round(ideal / w, 3) for w in windows]
    row["efficiency"] = round(ideal / row["wall_s"], 3)
    row["s1_same_requests_rss_mb"] = summarize(s1_runs)["max_rss_mb"]
    row["rss_vs_s1"] = round(row["max_rss_mb"] / row["s1_same_requests_rss_mb"], 3)
    row["s2_same_requests_rss_mb"] = summarize(s2_runs)["max_rss_mb"]
    row["s2_same_requests_wall_s"] = summarize(s2_runs)["wall_s"]
    # S2's request window at as many requests: what the same calls reach without turns
    row["s2_same_requests_efficiency_window"] = round(
        cases * turns * delay_s / args.workers / median(s2_windows), 3
    )
    row["sdk_alone_efficiency_window"] = round(
        cases * turns * delay_s / args.workers / median(sdk_windows), 3
    )
    row["sdk_alone_efficiency_window_runs"] = [round(ideal / w, 3) for w in sdk_windows]
    row["provider_alone_efficiency_window"] = round(
        cases * turns * delay_s / args.workers / median(provider_windows), 3
    )
    # CPU per request (milliseconds, the whole process: start-up included)
    for name, measured in (
        ("", runs),
        ("s2_same_requests_", s2_runs),
        ("sdk_alone_", sdk_runs),
        ("provider_alone_", provider_runs),
    ):
        cpu = summarize(measured)["cpu_s"]
        row[f"{name}cpu_ms_per_request"] = round(cpu / requests_n * 1000, 3)
    row["runs"] = [r.to_dict() for r in runs]
    return row


def _bare_runs(
    args: argparse.Namespace, server: Any, body_file: Path, mode: str
) -> tuple[list[float], list[Measurement]]:
    """``--reps`` runs of ``bare_client.py --mode MODE``: S8's number of requests, one
    recorded body each, ``--workers`` at once on ``server``; each run's request window and
    measurement."""
    n = args.cases * args.turns
    windows = []
    runs = []
    for rep in range(args.reps):
        server.reset()
        argv = [
            sys.executable,
            str(BENCH_DIR / "bare_client.py"),
            *("--mode", mode, "--url", f"{server.url}/v1", "--body", str(body_file)),
            *("--n", str(n), "--workers", str(args.workers), "--needle", NEEDLE),
        ]
        log = args.work / "runs" / f"S8-{mode}-{rep}.log"
        m = measure(argv, cwd=args.work, log_path=log, env=child_env(), timeout_s=120 + n)
        if m.timed_out or m.returncode != 0 or len(server.requests) != n:
            raise RunCheckError(
                f"the {mode} reference failed (exit {m.returncode}, "
                f"{len(server.requests)} requests); log {log}:\n{log_tail(log)}"
            )
        arrivals = [r.received_at for r in server.requests]
        windows.append(max(arrivals) + args.delay_ms / 1000 - min(arrivals))
        runs.append(m)
        print(f"  {mode} alone, {n:,} requests, run {rep + 1}/{args.reps}")
    return windows, runs


def _reference_runs(
    args: argparse.Namespace,
    agentv: Path,
    eval_file: Path,
    target: str,
    name: str,
    server: Any = None,
    windows: list[float] | None = None,
) -> list[Measurement]:
    """``--reps`` runs of a single-turn suite with as many cases as S8 sends requests (on
    ``server``: each run's request window added to ``windows``)."""
    n = args.cases * args.turns
    runs = []
    for rep in range(args.reps):
        if server is not None:
            server.reset()
        m, _ = run_eval(agentv, eval_file, target, args.workers, f"S8-{name}-{rep}", args.work, n)
        runs.append(m)
        if server is not None and windows is not None:
            arrivals = [r.received_at for r in server.requests]
            windows.append(max(arrivals) + args.delay_ms / 1000 - min(arrivals))
        print(f"  {name} at {n:,} cases run {rep + 1}/{args.reps}: {m.max_rss_mb:.0f} MB")
    return runs


def scenario_long(args: argparse.Namespace, agentv: Path) -> dict[str, Any]:
    """``--reps`` runs of ``long_run``; the run with the median growth of agentv's own work
    per turn, with every run's growth beside it (one run says little: the reference, the
    same request sent alone, wanders by more than what is measured against it)."""
    rows = []
    for rep in range(args.reps):
        rows.append(long_run(args, agentv, f"S8-long-{rep}"))
        print(f"  S8 {args.long_turns} turns run {rep + 1}/{args.reps}: {rows[-1]['own_growth']}")
    middle = sorted(rows, key=lambda r: r["own_growth"])[len(rows) // 2]
    return {**middle, "own_growth_runs": [r["own_growth"] for r in rows]}


def long_run(args: argparse.Namespace, agentv: Path, name: str) -> dict[str, Any]:
    """One conversation of ``--long-turns`` turns on a server that answers at once; then
    the same requests sent alone by the SDK (``replay_client.py``): a turn's time less its
    request's is agentv's own work for that turn."""
    turns = args.long_turns
    module = load_fake_server_module()
    server = module.FakeLLMServer(delay_ms=0, reply=ANSWER, record=True)
    server.start()
    try:
        eval_file = write_live_suite(args.work / "s8-long", 1, turns, server.url)
        m, out = run_eval(agentv, eval_file, HTTP_TARGET, 1, name, args.work, turns)
        check_live_results(out, 1, turns)
        requests = sorted(server.requests, key=lambda r: r.received_at)
        check_requests(requests, 1, turns)
        bodies = args.work / "runs" / f"{name}-bodies.json"
        bodies.write_text(json.dumps([r.body for r in requests]), encoding="utf-8")
        replay = [sys.executable, str(BENCH_DIR / "replay_client.py")]
        replayed = subprocess.run(
            [*replay, "--url", server.url + "/v1", "--bodies", str(bodies)],
            capture_output=True,
            text=True,
            timeout=300,
            env=child_env(),
            check=True,
        )
    finally:
        server.stop()
    alone = json.loads(replayed.stdout)  # each request's round trip, sent by the SDK alone
    gaps = [(b.received_at - a.received_at) * 1000 for a, b in itertools.pairwise(requests)]
    # from request k reaching the server to request k + 1 reaching it: answering k, agentv's
    # work, sending k + 1; the SDK alone takes about alone[k + 1] for the requests' part
    own = [gap - cost for gap, cost in zip(gaps, alone[1:], strict=True)]
    sizes = [len(json.dumps(r.body)) for r in requests]
    k = max(5, turns // 10)
    first, last = statistics.median(gaps[:k]), statistics.median(gaps[-k:])
    own_first, own_last = statistics.median(own[:k]), statistics.median(own[-k:])
    return {
        "key": f"S8/long{turns}",
        "turns": turns,
        "wall_s": round(m.wall_s, 3),
        "max_rss_mb": round(m.max_rss_mb, 1),
        "first_turns_ms": round(first, 3),  # median time per turn, first tenth
        "last_turns_ms": round(last, 3),  # and last tenth
        "request_first_ms": round(statistics.median(alone[1 : k + 1]), 3),  # SDK alone
        "request_last_ms": round(statistics.median(alone[-k:]), 3),
        "own_first_ms": round(own_first, 3),  # agentv's own work per turn
        "own_last_ms": round(own_last, 3),
        # how much agentv's own work per turn grew (beyond its first tenth's, at least
        # 0.5 ms: below that the clock's noise decides)
        "own_growth": round(own_last / max(own_first, 0.5), 3),
        "first_request_bytes": sizes[0],
        "last_request_bytes": sizes[-1],
    }


#: Each goal: its text, the row, the figure, ``>=`` (a floor) or ``<=`` (a ceiling), and the
#: bound: a number, or (a figure of the same row, what is added to it). The window is judged
#: against the SDK alone on the same server in the same minutes: agentv adds at most 3
#: points to what a bare SDK client loses (the machine's hour decides the figures themselves).
GOALS: tuple[tuple[str, str, str, str, float | tuple[str, float]], ...] = (
    (
        "S8 live: efficiency within the request window >= the SDK alone's - 0.03",
        "many",
        "efficiency_window",
        ">=",
        ("sdk_alone_efficiency_window", -0.03),
    ),
    ("S8 live: peak RSS <= 1.5 x S1 at as many requests", "many", "rss_vs_s1", "<=", 1.5),
    (
        "S8 200 turns: agentv's own time per turn (beyond the request's), last tenth <= 2 x "
        "first tenth",
        "long",
        "own_growth",
        "<=",
        2.0,
    ),
)
#: the sizes the goals are set for; other sizes (``--quick``, tests) are not judged
FULL = {"many": (1000, 5, 50, 100.0), "long": (200,)}


def judge(rows: dict[str, dict[str, Any]], sizes: dict[str, tuple]) -> list[dict[str, Any]]:
    """Each goal with its value, its bound and ``PASS``, ``FAIL`` or ``n/a`` (not at the
    goal's sizes)."""
    out = []
    for text, which, fig, op, given in GOALS:
        value = rows[which].get(fig)
        if isinstance(given, tuple):
            reference = rows[which].get(given[0])
            bound = None if reference is None else round(reference + given[1], 3)
        else:
            bound = given
        if sizes[which] != FULL[which]:
            status = "n/a"
        elif (
            value is not None
            and bound is not None
            and (value >= bound if op == ">=" else value <= bound)
        ):
            status = "PASS"
        else:
            status = "FAIL"
        out.append({"goal": text, "value": value, "bound": bound, "status": status})
    return out


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="smaller sizes, one run each")
    p.add_argument("--cases", type=int, default=1000)
    p.add_argument("--turns", type=int, default=5)
    p.add_argument("--long-turns", type=int, default=200)
    p.add_argument("--workers", type=int, default=50)
    p.add_argument("--delay-ms", type=float, default=100.0)
    p.add_argument("--work", type=Path, default=DEFAULT_WORK)
    p.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = p.parse_args(argv)
    if args.quick:
        args.reps, args.cases, args.long_turns = 1, 200, 60
    agentv = Path(sys.executable).with_name("agentv")
    try:
        rows = {"many": scenario_many(args, agentv), "long": scenario_long(args, agentv)}
    except RunCheckError as exc:  # a run that did not do its work: no figures at all
        print(f"S8 FAILED: {exc}")
        return 1
    sizes = {
        "many": (args.cases, args.turns, args.workers, args.delay_ms),
        "long": (args.long_turns,),
    }
    goals = judge(rows, sizes)
    many, long = rows["many"], rows["long"]
    print(
        f"\nS8 {many['cases']:,} live cases x {many['turns']} turns: wall {many['wall_s']:.2f} s, "
        f"request window {many['server_window_s']:.2f} s vs ideal {many['ideal_s']:.2f} s "
        f"(efficiency {many['efficiency_window']:.2f}), peak RSS {many['max_rss_mb']:.0f} MB "
        f"vs {many['s1_same_requests_rss_mb']:.0f} MB for S1 and "
        f"{many['s2_same_requests_rss_mb']:.0f} MB for S2 at as many requests (S2's "
        f"efficiency within its window: {many['s2_same_requests_efficiency_window']:.2f}; "
        f"the SDK's calls alone: {many['sdk_alone_efficiency_window']:.2f}; agentv's provider "
        f"alone: {many['provider_alone_efficiency_window']:.2f})"
    )
    print(
        f"S8 efficiency within the window, each run: {many['efficiency_window_runs']}; the SDK "
        f"alone's: {many['sdk_alone_efficiency_window_runs']}. CPU per request (ms, whole "
        f"process): S8 {many['cpu_ms_per_request']:.3f}, S2's shape "
        f"{many['s2_same_requests_cpu_ms_per_request']:.3f}, the SDK alone "
        f"{many['sdk_alone_cpu_ms_per_request']:.3f}, agentv's provider alone "
        f"{many['provider_alone_cpu_ms_per_request']:.3f}"
    )
    print(
        f"S8 {long['turns']} turns: {long['first_turns_ms']:.2f} ms per turn at first, "
        f"{long['last_turns_ms']:.2f} ms at the end (requests of {long['first_request_bytes']:,}"
        f" then {long['last_request_bytes']:,} bytes, {long['request_first_ms']:.2f} then "
        f"{long['request_last_ms']:.2f} ms sent alone); agentv's own work per turn "
        f"{long['own_first_ms']:.2f} then {long['own_last_ms']:.2f} ms (the median of "
        f"{len(long['own_growth_runs'])} runs; growth in each: {long['own_growth_runs']})"
    )
    for goal in goals:
        print(f"  [{goal['status']}] {goal['goal']}: {goal['value']} (bound {goal['bound']})")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"rows": rows, "goals": goals}, indent=2) + "\n")
    return 0  # as run.py: goals not met say FAIL, only a broken run changes the exit code


if __name__ == "__main__":
    sys.exit(main())
