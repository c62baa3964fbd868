"""``--executor ray`` on a real local Ray (2 CPUs): the same records as the local executor,
agents running in Ray workers, a worker killed mid-run, and secrets kept out of Ray.

These tests need Ray (``agentv[ray]``, part of the dev install) and run in CI.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import ray

import agentv
from agentv.errors import ConfigError
from agentv.run.executors import make_executor
from agentv.run.executors.ray_cluster import TASK_NAME
from support.agents import FAKE_CODEX, install_script
from support.cli import agentv_cli, start_agentv
from support.fakes.llm_server import FakeLLMServer, Fault
from support.files import write
from support.paths import EXAMPLES
from support.suites import (
    DEBUG_SECRET,
    agent_reply,
    customer_reply,
    debug_reply,
    debug_targets,
    env_project,
    support_parties,
    write_debug_suite,
    write_support_suite,
)
from support.targets import openai_target, write_targets

#: every test here starts a local Ray: left out of `make test-fast`
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def local_ray() -> Any:
    """One local Ray with 2 CPUs for the module; runs attach to it (and leave it running)."""
    # "local": a new Ray of its own, even if another one runs on this machine
    ray.init(address="local", num_cpus=2, logging_level=logging.WARNING, log_to_driver=False)
    yield ray.get_runtime_context().gcs_address
    ray.shutdown()


@pytest.fixture
def server():
    with FakeLLMServer(reply=debug_reply) as srv:
        yield srv


def _comparable(record: dict[str, Any]) -> dict[str, Any]:
    """A record without what differs from run to run (times, the cli target's temporary
    folder, whose name is random in every run)."""
    volatile = ("timestamp", "duration_ms", "latency_ms", "queued_ms")
    out = {k: v for k, v in record.items() if k not in volatile}
    for entry in out.get("evaluator_results") or []:
        entry.pop("latency_ms", None)
        (entry.get("evaluator_raw_request") or {}).pop("duration_ms", None)
    for turn in out.get("turns") or []:  # a live conversation's turns: their times
        turn.pop("latency_ms", None)
        (turn.get("user") or {}).pop("latency_ms", None)
        for part in [*turn.get("requests", []), *turn.get("evaluator_results", [])]:
            part.pop("latency_ms", None)
    return json.loads(re.sub(r"agentv-cli-[A-Za-z0-9_]+", "agentv-cli-TMP", json.dumps(out)))


def _by_key(run: agentv.EvalRun) -> dict[tuple[Any, ...], dict[str, Any]]:
    records = [_comparable(r.model_dump(mode="json")) for r in run.results]
    keyed = {(r.get("eval_file"), r.get("eval_id"), r["target"], r["repeat"]): r for r in records}
    assert len(keyed) == len(records)  # every case exactly once
    return keyed


def _examples(tmp_path: Path, url: str) -> Path:
    """The examples as their own repository, with a `fake` target on the loopback server."""
    root = tmp_path / "project"
    shutil.copytree(EXAMPLES, root / "examples")
    (root / ".git").mkdir()
    targets = root / "examples" / ".agentv" / "targets.yaml"
    targets.write_text(
        targets.read_text(encoding="utf-8")
        + f"""
  - name: fake
    provider: openai
    base_url: {url}/v1
    api_key: ${{{{ E2E_API_KEY }}}}
    model: fake-model
""",
        encoding="utf-8",
    )
    return root


def test_examples_give_the_same_records_on_ray_as_locally(
    local_ray: str, server: FakeLLMServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("E2E_API_KEY", DEBUG_SECRET)
    root = _examples(tmp_path, server.url)
    for target in ("default", "fake"):  # the offline cli agent, and an LM API on the wire
        local = agentv.run_eval("examples/", target=target, cwd=root)
        sent_locally = len(server.requests)
        remote = agentv.run_eval("examples/", target=target, cwd=root, executor="ray")
        assert _by_key(remote) == _by_key(local)
        assert len(local.results) == 5
        assert remote.summary.total == local.summary.total
        assert remote.summary.mean == local.summary.mean
        if target == "fake":  # the same requests reached the server, judges included
            assert sent_locally > 0
            assert len(server.requests) == 2 * sent_locally
            assert remote.requests == local.requests
            assert remote.load["fake"].requests == local.load["fake"].requests
        server.reset()


def test_multi_turn_suite_gives_the_same_records_on_ray(
    local_ray: str, server: FakeLLMServer, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("E2E_API_KEY", DEBUG_SECRET)
    write_targets(repo, *debug_targets(server.url))
    write_debug_suite(repo)
    local = agentv.run_eval("evals/debug.yaml", cwd=repo)
    local_bodies = sorted(json.dumps(r.body, sort_keys=True) for r in server.requests)
    server.reset()
    remote = agentv.run_eval("evals/debug.yaml", cwd=repo, executor="ray")
    remote_bodies = sorted(json.dumps(r.body, sort_keys=True) for r in server.requests)

    assert _by_key(remote) == _by_key(local)
    assert remote_bodies == local_bodies  # the wire too
    statuses = {r.eval_id: r.status for r in remote.results}
    assert statuses == {"multi-turn": "ok", "provider-down": "error", "checker-crash": "error"}
    multi = next(r for r in remote.results if r.eval_id == "multi-turn")
    roles = [m["role"] for m in multi.raw_request["chat_prompt"]]
    assert roles == ["system", "user", "assistant", "user"]  # a real multi-turn list
    assert {e["name"] for e in multi.evaluator_results} == {"judge", "check"}
    # the key travelled to the workers (the server saw it) and nowhere else
    assert all(r.headers.get("authorization") == f"Bearer {DEBUG_SECRET}" for r in server.requests)
    assert DEBUG_SECRET not in json.dumps([r.model_dump(mode="json") for r in remote.results])


def test_cache_and_resume_work_as_in_a_local_run(
    local_ray: str, server: FakeLLMServer, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("E2E_API_KEY", DEBUG_SECRET)
    write_targets(repo, *debug_targets(server.url))
    write_debug_suite(repo)
    first = agentv.run_eval("evals/debug.yaml", cwd=repo, executor="ray", cache=True)
    sent = len(server.requests)
    assert sent and first.cache_hits == 0
    again = agentv.run_eval("evals/debug.yaml", cwd=repo, executor="ray", cache=True)
    # answers and verdicts come from the cache the workers wrote: nothing new is sent
    # (only the target that cannot be reached is asked again: errors are never cached)
    assert again.cache_hits == 2  # multi-turn and checker-crash
    assert again.judge_cache_hits == 1
    assert len(server.requests) == sent
    assert {(r.eval_id, r.status, r.score) for r in again.results} == {
        (r.eval_id, r.status, r.score) for r in first.results
    }

    # a results file holding one case: a resumed run on Ray adds the other two, once
    out = repo / "r.jsonl"
    kept = next(r for r in first.results if r.eval_id == "multi-turn")
    out.write_text(json.dumps(kept.model_dump(mode="json")) + "\n", encoding="utf-8")
    resumed = agentv.run_eval("evals/debug.yaml", cwd=repo, executor="ray", resume=out)
    assert sorted(r.eval_id for r in resumed.results) == ["checker-crash", "provider-down"]
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(r["eval_id"] for r in rows) == ["checker-crash", "multi-turn", "provider-down"]


BURN_AGENT = """\
import json, os, sys, time
out, log_dir, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
started = time.time()
end = time.process_time() + seconds
while time.process_time() < end:  # burn CPU, as an agent at work does
    pass
def ray_worker():  # the nearest ancestor that is a Ray worker (the shell comes between)
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().split(b"\\0")[0].decode()
        if cmd.startswith("ray::"):
            return pid, cmd
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    return None, None
worker_pid, worker = ray_worker()
record = {"pid": os.getpid(), "worker_pid": worker_pid, "worker": worker,
          "node": os.environ.get("AGENTV_RAY_NODE_ID"), "start": started, "end": time.time()}
with open(os.path.join(log_dir, f"{os.getpid()}-{started}.json"), "w") as f:
    json.dump(record, f)
with open(out, "w") as f:
    f.write("done: 42")
"""


def _agent_suite(
    repo: Path, cases: int, command: str, *, timeout: int = 60, workers: str = "", target: str = ""
) -> None:
    """``cases`` cases on the target ``default``: a cli target running ``command``, unless
    ``target`` gives the target's own fields."""
    target = target or f"provider: cli\n    command_template: {command}\n    cwd: ."
    write(
        repo,
        ".agentv/targets.yaml",
        f"""$schema: agentv-targets-v2.2
targets:
  - name: default
    {target}
    timeout_seconds: {timeout}
    {workers}
""",
    )
    body = "".join(
        f"""  - id: case-{i}
    outcome: Says 42.
    input_messages:
      - role: user
        content: Work on task {i}.
    execution:
      evaluators:
        - type: contains
          value: "42"
"""
        for i in range(cases)
    )
    write(repo, "evals/agent.yaml", f"$schema: agentv-eval-v2\nevalcases:\n{body}")


def test_agent_cases_run_in_ray_workers_no_more_than_the_cpus_allow(
    local_ray: str, repo: Path
) -> None:
    logs = repo / "logs"
    logs.mkdir()
    write(repo, "burn.py", BURN_AGENT)
    _agent_suite(repo, 8, f"python3 burn.py {{OUTPUT_FILE}} {logs} 0.3")

    run = agentv.run_eval("evals/agent.yaml", cwd=repo, executor="ray")

    assert [r.status for r in run.results] == ["ok"] * 8
    seen = [json.loads(p.read_text()) for p in logs.iterdir()]
    assert len(seen) == 8  # each case's agent ran once
    assert {s["worker"] for s in seen} == {f"ray::{TASK_NAME}"}  # inside a Ray worker
    assert all(s["worker_pid"] != os.getpid() for s in seen)
    assert {s["node"] for s in seen} == {ray.get_runtime_context().get_node_id()}
    # 2 CPUs, 1 per case: never more than 2 agents at once
    events = sorted([(s["start"], 1) for s in seen] + [(s["end"], -1) for s in seen])
    running = peak = 0
    for _, step in events:
        running += step
        peak = max(peak, running)
    assert 1 <= peak <= 2


def test_cpus_per_case_bounds_the_cases_at_once(local_ray: str, repo: Path) -> None:
    logs = repo / "logs"
    logs.mkdir()
    write(repo, "burn.py", BURN_AGENT)
    _agent_suite(repo, 4, f"python3 burn.py {{OUTPUT_FILE}} {logs} 0.2")
    run = agentv.run_eval("evals/agent.yaml", cwd=repo, executor="ray", ray_cpus_per_case=2)
    assert [r.status for r in run.results] == ["ok"] * 4
    seen = [json.loads(p.read_text()) for p in logs.iterdir()]
    spans = sorted((s["start"], s["end"]) for s in seen)
    # 2 CPUs, 2 per case: one at a time
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))


VICTIM_AGENT = """\
import os, sys, time
out, marker = sys.argv[1], sys.argv[2]
task = open(sys.argv[3]).read()
if "task 0." in task and not os.path.exists(marker):
    pid = os.getppid()  # the Ray worker running this case (above the shell)
    while not open(f"/proc/{pid}/cmdline", "rb").read().startswith(b"ray::"):
        pid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
    with open(marker, "w") as f:
        f.write(str(pid))
    time.sleep(60)  # until the test kills that worker
time.sleep(0.2)
with open(out, "w") as f:
    f.write("done: 42")
"""


def test_codex_logs_written_in_workers_are_under_the_run_and_listed_by_it(
    local_ray: str, repo: Path
) -> None:
    # the fake Codex of the agent tests, named by path: the workers' PATH is Ray's
    (repo / "bin").mkdir()
    codex = install_script(repo / "bin", "codex", FAKE_CODEX)
    _agent_suite(repo, 4, "", target=f"provider: codex\n    executable: {codex}")

    run = agentv.run_eval("evals/agent.yaml", cwd=repo, executor="ray")

    # answered (the fake echoes the question, so the check for "42" fails: not an error)
    assert [r.status for r in run.results] == ["failed"] * 4
    assert all(r.candidate_answer.startswith("ANSWER: ") for r in run.results)
    logs = run.artifacts["Codex CLI logs"]
    # each case's log, written where a local run writes it (not in the workers' folder)
    assert sorted(logs) == sorted((repo / ".agentv" / "logs" / "codex").iterdir())
    assert sorted(log.name.split("_")[2] for log in logs) == [f"case-{i}" for i in range(4)]


def test_a_killed_worker_costs_an_attempt_and_the_case_runs_once_more(
    local_ray: str, repo: Path
) -> None:
    marker = repo / "victim.pid"
    write(repo, "victim.py", VICTIM_AGENT)
    # one case at a time across the cluster: the killed worker's turn must come back, or the
    # other cases wait for it forever
    _agent_suite(
        repo,
        6,
        f"python3 victim.py {{OUTPUT_FILE}} {marker} {{CHAT_PROMPT_FILE}}",
        workers="workers: 1",
    )
    killed: list[int] = []

    def kill_when_ready() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if marker.exists() and marker.read_text().strip():
                pid = int(marker.read_text())
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_when_ready)
    killer.start()
    run = agentv.run_eval("evals/agent.yaml", cwd=repo, executor="ray")
    killer.join()

    assert killed, "the victim case never started"
    ids = [r.eval_id for r in run.results]
    assert sorted(ids) == sorted(f"case-{i}" for i in range(6))  # every case exactly once
    assert [r.status for r in run.results] == ["ok"] * 6
    attempts = {r.eval_id: r.attempts for r in run.results}
    assert attempts["case-0"] == 2
    assert all(attempts[f"case-{i}"] == 1 for i in range(1, 6))


def test_the_key_is_in_no_record_log_line_or_task_name(
    local_ray: str, server: FakeLLMServer, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a vendor key from the environment (shipped to the workers by the driver) and one
    # substituted into targets.yaml
    vendor_key = "sk-vendor-" + "k" * 30
    monkeypatch.setenv("E2E_API_KEY", DEBUG_SECRET)
    monkeypatch.setenv("OPENAI_API_KEY", vendor_key)
    write_targets(repo, *debug_targets(server.url))
    write_debug_suite(repo)
    # the answer quotes the key: masked before any record is made
    server.reply = lambda rec: f"The answer is 42. {DEBUG_SECRET}"  # type: ignore[assignment]
    out = repo / "out.jsonl"
    run = agentv.run_eval("evals/debug.yaml", cwd=repo, executor="ray", out=out)
    assert run.results
    text = out.read_text(encoding="utf-8")
    assert DEBUG_SECRET not in text and vendor_key not in text
    assert '"masked_secrets":true' in text.replace(" ", "")
    logs = Path(ray.get_runtime_context().get_temp_dir()) / "session_latest" / "logs"
    if not logs.is_dir():  # where this Ray version keeps the session's logs
        logs = Path(ray._private.worker._global_node.get_session_dir_path()) / "logs"
    assert logs.is_dir()
    for path in logs.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert DEBUG_SECRET.encode() not in data, path
            assert vendor_key.encode() not in data, path
    assert DEBUG_SECRET not in TASK_NAME


def test_the_cli_attaches_to_a_cluster_and_writes_the_usual_results(
    local_ray: str, server: FakeLLMServer, repo: Path
) -> None:
    write_targets(repo, *debug_targets(server.url))
    write_debug_suite(repo)
    env, unset = {"E2E_API_KEY": DEBUG_SECRET}, ["RAY_ADDRESS"]
    args = ("eval", "evals/debug.yaml")
    local = agentv_cli(repo, *args, "--out", "local.jsonl", env=env, unset=unset)
    remote = agentv_cli(
        repo,
        *(*args, "--out", "ray.jsonl", "--executor", "ray", "--ray-address", local_ray),
        env=env,
        unset=unset,
    )
    assert remote.returncode == local.returncode == 3, remote.stderr  # errors: exit code 3
    assert DEBUG_SECRET not in remote.stdout + remote.stderr

    def lines(name: str) -> dict[str, dict[str, Any]]:
        rows = [json.loads(x) for x in (repo / name).read_text().splitlines()]
        return {r["eval_id"]: _comparable(r) for r in rows}

    assert lines("ray.jsonl") == lines("local.jsonl")
    # the summary is the same apart from times
    assert "Total eval cases: 3" in remote.stdout


SLOW_AGENT = """\
import sys, time
time.sleep(float(sys.argv[2]))
open(sys.argv[1], "w").write("done: 42")
"""


def test_ctrl_c_on_a_local_ray_run_keeps_finished_results_and_stops_ray(repo: Path) -> None:
    """Without --ray-address the command starts its own local Ray, and stops it on Ctrl-C."""
    write(repo, "slow.py", SLOW_AGENT)
    _agent_suite(repo, 40, "python3 slow.py {OUTPUT_FILE} 0.5")
    proc, results = _running_on_its_own_ray(repo)
    # its own local Ray: Ray names the session after the process that started it
    assert _raylets(proc.pid), "no local Ray was started"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    rows = [json.loads(x) for x in results.read_text().splitlines()]
    assert 3 <= len(rows) < 40
    assert len({r["eval_id"] for r in rows}) == len(rows)  # none twice
    assert all(r["status"] == "ok" for r in rows)
    assert "Interrupted" in err
    # the local Ray it started is gone
    deadline = time.monotonic() + 30  # a hang guard: over at once when it holds
    while _raylets(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _raylets(proc.pid)


def test_when_the_cluster_is_lost_agentv_says_so_and_sums_up(repo: Path) -> None:
    # The raylet of the driver's node dies mid-run (as when the head a driver runs on dies):
    # Ray would end the driver some seconds later with its own messages only. agentv stops
    # the run first: its error, the summary of what finished, the command that resumes it.
    write(repo, "slow.py", SLOW_AGENT)
    _agent_suite(repo, 20, "python3 slow.py {OUTPUT_FILE} 0.3", workers="workers: 8")
    proc, results = _running_on_its_own_ray(repo)
    raylets = _raylets(proc.pid)
    assert raylets, "no local Ray was started"
    for pid in raylets:
        os.kill(int(pid), signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert "error: the Ray cluster was lost (the raylet of this node" in err
    assert "To finish the run: agentv eval evals/agent.yaml --resume r.jsonl" in err
    assert "EVALUATION SUMMARY" in out
    rows = [json.loads(x) for x in results.read_text().splitlines()]  # whole records only
    assert 3 <= len(rows) < 20
    assert all(r["status"] == "ok" for r in rows)  # the cases cut short are not errors
    assert f"{len(rows)} of 20 runs finished" in err
    # and the file is resumable: the rest runs (here, on this machine)
    resumed = agentv_cli(repo, "eval", "evals/agent.yaml", "--resume", "r.jsonl")
    assert resumed.returncode == 0, resumed.stderr
    assert f"{20 - len(rows)} run(s) to do" in resumed.stdout
    assert len(results.read_text().splitlines()) == 20


def _running_on_its_own_ray(repo: Path) -> tuple[subprocess.Popen[str], Path]:
    """``agentv eval`` of the agent suite on a local Ray of its own (no --ray-address),
    once 3 of its records are written; and its results file."""
    proc = start_agentv(
        repo,
        *("eval", "evals/agent.yaml", "--out", "r.jsonl"),
        *("--executor", "ray", "--ray-cpus-per-case", "0.5"),
        unset=["RAY_ADDRESS"],
    )
    results = repo / "r.jsonl"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if results.exists() and len(results.read_text().splitlines()) >= 3:
            break
        time.sleep(0.1)
    return proc, results


def _raylets(driver_pid: int) -> list[str]:
    """The raylet processes of the local Ray that process ``driver_pid`` started."""
    found = subprocess.run(
        ["pgrep", "-f", f"raylet --raylet_socket_name=\\S*/session_\\S*_{driver_pid}/"],
        capture_output=True,
        text=True,
    )
    return found.stdout.split()


# A cluster of two nodes on this machine: a head with no CPU for cases (where the driver
# runs, as on a cluster whose head only coordinates) and a worker node with 2 CPUs.
TWO_NODES = """
import asyncio, json, logging, sys
import ray
from ray.cluster_utils import Cluster
from agentv.api import prepare_run

cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
cluster.add_node(num_cpus=2)
cluster.wait_for_nodes()
ray.init(address=cluster.address, logging_level=logging.ERROR, log_to_driver=False)
try:
    keepers, case_nodes, statuses = [], set(), []
    for _ in range(3):  # three runs, three keepers: chance alone would not put all on the head
        prepared = prepare_run("evals/e.yaml", cwd=sys.argv[1], executor="ray")
        run = asyncio.run(prepared.run())
        keepers.append(prepared.executor.keeper_node)
        case_nodes |= {node for node, _ in prepared.executor.placements}
        statuses += [r.status for r in run.results]
    print(json.dumps({
        "driver": ray.get_runtime_context().get_node_id(),
        "keepers": keepers,
        "case_nodes": sorted(case_nodes),
        "statuses": statuses,
    }))
finally:
    ray.shutdown()
    cluster.shutdown()
"""


def test_the_gate_keeper_runs_on_the_drivers_node_not_a_workers(repo: Path) -> None:
    # Ray would place an actor that needs no CPU on the worker node most of the time: then
    # losing that node would fail every request left in the run
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n  - name: default\n    provider: mock\n"
        "    response: The answer is 42.\n",
    )
    cases = "".join(
        f"  - id: c{i}\n    outcome: Says 42.\n    input_messages:\n"
        f"      - role: user\n        content: Question {i}\n"
        "    execution:\n      evaluators:\n        - type: contains\n          value: '42'\n"
        for i in range(4)
    )
    write(repo, "evals/e.yaml", f"$schema: agentv-eval-v2\nevalcases:\n{cases}")
    done = subprocess.run(
        [sys.executable, "-c", TWO_NODES, str(repo)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["statuses"] == ["ok"] * 12
    assert seen["case_nodes"] and seen["driver"] not in seen["case_nodes"]  # two real nodes
    assert seen["keepers"] == [seen["driver"]] * 3


def test_without_ray_the_error_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    with pytest.raises(ConfigError) as caught:
        make_executor("ray")
    assert str(caught.value) == (
        "--executor ray needs Ray, which is not installed; install agentv's `ray` extra: "
        "pip install 'ray>=2.40'"
    )


def test_executor_options_are_checked() -> None:
    assert make_executor("local") is None
    with pytest.raises(ConfigError, match="executor must be one of local, ray"):
        make_executor("cluster")
    with pytest.raises(ConfigError, match="need --executor ray"):
        make_executor("local", ray_address="127.0.0.1:6379")
    with pytest.raises(ConfigError, match="above 0"):
        make_executor("ray", ray_cpus_per_case=0)


def test_the_local_path_does_not_import_ray(tmp_path: Path) -> None:
    code = "import sys, agentv.api, agentv.cli.app, agentv.run.orchestrator\nprint('ray' in sys.modules)\n"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.stdout.strip() == "False", proc.stderr


async def test_concurrent_runs_each_get_their_own_env_file_in_the_workers(
    local_ray: str, tmp_path: Path
) -> None:
    # two projects, each with its own .env, at the same time on the same workers: each
    # case's agent sees its run's value, never the other's, and no worker's os.environ
    # holds either (a worker process serves every run)
    alpha, beta = (env_project(tmp_path, name) for name in ("alpha", "beta"))
    runs = await asyncio.gather(
        agentv.arun_eval("evals", cwd=alpha, executor="ray"),
        agentv.arun_eval("evals", cwd=beta, executor="ray"),
    )
    for run, name in zip(runs, ("alpha", "beta"), strict=True):
        assert sorted(r.candidate_answer for r in run.results) == [f"value-of-{name}"] * 6

    @ray.remote
    def worker_environ() -> list[str]:
        return [name for name in os.environ if name == "PROJ_SECRET"]

    assert ray.get([worker_environ.remote() for _ in range(4)]) == [[]] * 4


def _api_suite(repo: Path, server: FakeLLMServer, cases: int, **target: Any) -> None:
    """``cases`` cases on ``default``, an OpenAI target at ``server`` (``target``: more of its
    fields)."""
    write_targets(repo, openai_target(server.url, **target))
    write(
        repo,
        "evals/api.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        + "".join(
            f"  - {{id: c{i}, outcome: ok, input_messages: [{{role: user, content: q{i}}}],"
            " evaluators: [{type: contains, value: fake}]}\n"
            for i in range(cases)
        ),
    )


def test_a_targets_workers_caps_its_requests_across_the_cluster(local_ray: str, repo: Path) -> None:
    with FakeLLMServer(delay_ms=150) as server:
        _api_suite(repo, server, 6, workers=1)
        run = agentv.run_eval("evals/api.yaml", cwd=repo, executor="ray")
        assert [r.status for r in run.results] == ["ok"] * 6
        received = sorted(r.received_at for r in server.requests)
        # 2 worker processes run cases at once, but the target's one turn is the cluster's:
        # each request reaches the server after the one before was answered
        assert len(received) == 6
        assert all(b - a >= 0.14 for a, b in itertools.pairwise(received)), received


def test_one_429_pauses_the_target_in_every_worker_process(local_ray: str, repo: Path) -> None:
    with FakeLLMServer(delay_ms=50) as server:
        server.script(Fault.rate_limited(retry_after=0.8))  # the first answer only
        _api_suite(repo, server, 12)
        run = agentv.run_eval("evals/api.yaml", cwd=repo, executor="ray")
        assert [r.status for r in run.results] == ["ok"] * 12
        t0 = next(r for r in server.requests if r.fault is not None).received_at
        received = sorted(r.received_at for r in server.requests)
        # the other worker process (its requests already on their way aside) waits too
        assert [t for t in received if t0 + 0.1 < t < t0 + 0.75] == [], (t0, received)
        assert len(received) == 13 and max(received) > t0 + 0.75
        # the run's figures are the cluster's gate's
        assert run.load["default"].requests == 13
        assert run.load["default"].throttled == 1
        assert run.load["default"].throttled_seconds >= 0.75


async def test_the_gate_keeper_gives_back_turns_of_dropped_requests_and_lost_cases() -> None:
    from agentv.run.executors.ray_gates import GateKeeper, GateSpec

    keeper = GateKeeper({7: GateSpec("api", 1)})
    assert await keeper.acquire(7, 0, "case-a", "t1") is not None  # the only turn
    waiting = asyncio.ensure_future(keeper.acquire(7, 0, "case-b", "t2"))
    await asyncio.sleep(0.01)
    assert not waiting.done()
    keeper.drop("t2")  # gave up while waiting: no turn taken
    assert await waiting is None
    keeper.drop("t3")  # gave up before its request came: it gets none
    assert await keeper.acquire(7, 0, "case-b", "t3") is None
    keeper.forget("case-a")  # its worker died holding the turn
    granted = await asyncio.wait_for(keeper.acquire(7, 0, "case-c", "t4"), 1)
    assert granted is not None and granted[1] == 1
    keeper.drop("t4")  # granted, but its request had stopped waiting: the turn comes back
    assert await asyncio.wait_for(keeper.acquire(7, 0, "case-d", "t5"), 1) is not None
    keeper.release("t5")
    keeper.release("t5")  # a second release of one ticket changes nothing
    assert await asyncio.wait_for(keeper.acquire(7, 0, "case-e", "t6"), 1) is not None
    late = asyncio.ensure_future(keeper.acquire(7, 0, "case-f", "t7"))
    await asyncio.sleep(0.01)
    assert not late.done()  # one turn, held by t6
    late.cancel()
    assert keeper.stats()["api"].requests == 4  # t1, t4, t5, t6


async def test_answers_times_reach_a_real_keeper_actor(local_ray: str) -> None:
    from agentv.run.executors.ray_gates import GateKeeper, GateSpec, RemoteGate

    spec = GateSpec("api", 4)
    keeper = ray.remote(GateKeeper).options(num_cpus=0).remote({3: spec})
    try:
        gate = RemoteGate(keeper, 3, spec)
        await keeper.throttled.remote(3, 0.0, None)  # paced from now on
        await gate.acquire()
        assert gate.limit == 4  # no answer seen yet: as many at once as before
        # answered in 10 ms: the pace doubles every tenth of a second until a refusal, and at
        # 10 ms answers the limit stays at 3 until it passes 50 a second (over half a second
        # of doubling), however late the keeper hears of it on a busy machine
        gate.succeeded(sent_at=gate.now() - 0.01)
        gate.release()
        # the keeper's gate learns how long answers take with the turn given back, and
        # fits how many it lets go at once to the pace (an async actor need not run one
        # caller's calls in order: ask again until the release has arrived)
        limits = []
        for _ in range(50):
            await gate.acquire()
            limits.append(gate.limit)
            gate.release()
            if limits[-1] < 4:
                break
            await asyncio.sleep(0.02)
        assert limits[-1] == 3 and set(limits) <= {3, 4}  # 2 x pace x 0.01 s (< 1), + 2
    finally:
        ray.kill(keeper)


async def test_successes_reach_the_keeper_with_the_turn_given_back() -> None:
    from agentv.run.executors.ray_gates import GateKeeper, GateSpec, RemoteGate

    class Direct:
        """The keeper's methods called at once, as the actor's ``.remote`` would."""

        def __init__(self, keeper: GateKeeper) -> None:
            self.keeper = keeper

        def __getattr__(self, name: str) -> Any:
            method = getattr(self.keeper, name)

            class Call:
                @staticmethod
                def remote(*args: Any) -> Any:
                    result = method(*args)
                    if asyncio.iscoroutine(result):
                        return asyncio.ensure_future(result)
                    return None

            return Call

    keeper = GateKeeper({3: GateSpec("api", 4)})
    gate = RemoteGate(Direct(keeper), 3, GateSpec("api", 4))
    keeper.throttled(3, 0.0, None)
    inner = keeper.snapshot(3)
    assert (inner.limit, inner.min_latency) == (4, None)
    await gate.acquire()
    gate.succeeded(sent_at=gate.now() - 0.5)
    gate.succeeded(sent_at=gate.now() - 0.8)  # the quicker of the two is sent along
    assert keeper.snapshot(3).min_latency is None  # told with the release, not before
    gate.release()
    inner = keeper.snapshot(3)
    assert inner.min_latency == pytest.approx(0.5, abs=0.05)
    assert inner.limit == 3  # 2 x 0.9 a second x 0.5 s, + 2
    assert gate._successes == 0 and gate._latency is None


def test_simulated_users_run_on_ray_through_their_own_target(
    local_ray: str, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with (
        FakeLLMServer(reply=agent_reply) as agent,
        FakeLLMServer(reply=customer_reply) as customer,
    ):
        write_targets(repo, *support_parties(agent, customer))
        write_support_suite(repo, {"id": "a", "first": "null"}, {"id": "b"})
        local = agentv.run_eval("evals/support.yaml", cwd=repo)
        sent = (len(agent.requests), len(customer.requests))
        agent.reset()
        customer.reset()
        remote = agentv.run_eval("evals/support.yaml", cwd=repo, executor="ray")
        assert (len(agent.requests), len(customer.requests)) == sent
    assert _by_key(remote) == _by_key(local)
    assert {r.user["ended"] for r in remote.results} == {"goal"}
    assert {r.status for r in remote.results} == {"ok"}


WORKSPACE_AGENT = """\
import os, sys
from pathlib import Path
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
print(f"fixed in {os.getcwd()} by pid {os.getpid()} under {os.getppid()}")
"""


def test_cases_in_workspaces_run_in_ray_workers_each_in_its_own(
    local_ray: str, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from support.gitrepo import commit

    root = repo / "workspaces"
    monkeypatch.setenv("AGENTV_WORKSPACE_ROOT", str(root))  # the driver's, passed on
    commit(repo / "calc", {"calc.py": "def add(a, b):\n    return a - b\n"}, "one")
    write(repo, "agent.py", WORKSPACE_AGENT)
    write(
        repo,
        ".agentv/targets.yaml",
        f"""$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: cli
    command_template: {sys.executable} {repo / "agent.py"}
""",
    )
    cases = "".join(
        f"""  - id: task{i}
    outcome: fixed
    input_messages: [{{role: user, content: fix {i}}}]
    evaluators: [{{type: file_contains, path: calc.py, value: a + b}}]
"""
        for i in range(4)
    )
    write(
        repo,
        "evals/ws.yaml",
        "$schema: agentv-eval-v2\nworkspace:\n  repos: [{path: ., repo: ../calc}]\n"
        f"  isolation: none\nevalcases:\n{cases}",
    )
    run = agentv.run_eval("evals/ws.yaml", cwd=repo, executor="ray")
    assert [r.status for r in run.results] == ["ok"] * 4
    folders = {r.candidate_answer.split()[2] for r in run.results}
    assert len(folders) == 4  # a workspace each, made where the case ran, then removed
    assert all(Path(f).parent.parent == root / "temp" and not Path(f).exists() for f in folders)
    for record in run.results:
        assert record.workspace is not None
        assert record.workspace["changes"]["modified"] == ["calc.py"]
    # made in Ray's workers, not in this process
    assert all(int(r.candidate_answer.split()[-1]) != os.getpid() for r in run.results)
