"""S7 scale-out: ``--executor ray`` against the local executor, and a simulated cluster.

Part 1 (this machine): N cases of a ``cli`` agent that burns ``--burn`` seconds of CPU each,
run by ``agentv eval`` with the local executor (``--workers`` = the machine's CPUs) and
with ``--executor ray`` (a local Ray started by the command, one CPU per case). The ideal
is N x burn / CPUs; a case's overhead is (wall - ideal) x CPUs / N. The driver's peak RSS
is its own VmHWM (not Ray's processes'), sampled while it runs.

Part 2 (a simulated cluster): ``ray.cluster_utils.Cluster`` with 1, 2 and 4 nodes of 2
declared CPUs each, all on this machine, and an agent that waits ``--wait`` seconds
instead of burning CPU, so the declared CPUs (not this machine's cores) bound the
throughput. The driver is this process (``agentv.run_eval(executor="ray",
ray_address=...)``); throughput is cases per second against the ideal of CPUs / wait,
measured after a small first run that starts the nodes' worker processes (that run's wall
time is reported as ``warm_up_s``).

Part 3 (the shared gate): the time a turn at a target's gate takes through the run's
``GateKeeper`` actor, which every LM API request of a Ray run asks, against the same gate
in this process; one turn after another, and 50 at once.

    python benchmarks/s7_ray.py                  # the issue's sizes (about 6 minutes)
    python benchmarks/s7_ray.py --cases 40 --cluster-cases 24   # a quick look

Figures go to benchmarks/results/s7.json and the tables to stdout.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_WORK = HERE / ".work" / "s7"
DEFAULT_OUTPUT = HERE / "results" / "s7.json"

BURN = """\
import sys, time
out, seconds = sys.argv[1], float(sys.argv[2])
end = time.process_time() + seconds
while time.process_time() < end:
    pass
open(out, "w").write("done: 42")
"""

WAIT = """\
import sys, time
time.sleep(float(sys.argv[2]))
open(sys.argv[1], "w").write("done: 42")
"""


def make_suite(folder: Path, cases: int, agent: str, seconds: float) -> Path:
    """A repository with one eval file of ``cases`` cases on a ``cli`` agent target."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".git").mkdir(exist_ok=True)
    (folder / ".agentv").mkdir(exist_ok=True)
    (folder / "agent.py").write_text(agent, encoding="utf-8")
    (folder / ".agentv" / "targets.yaml").write_text(
        f"""$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: cli
    command_template: {sys.executable} agent.py {{OUTPUT_FILE}} {seconds}
    cwd: .
    timeout_seconds: 120
""",
        encoding="utf-8",
    )
    body = "".join(
        f"""  - id: case-{i}
    outcome: Says 42.
    input_messages:
      - role: user
        content: Task {i}.
    execution:
      evaluators:
        - type: contains
          value: "42"
"""
        for i in range(cases)
    )
    path = folder / "agent.yaml"
    path.write_text(f"$schema: agentv-eval-v2\nevalcases:\n{body}", encoding="utf-8")
    return path


def peak_rss_mb(pid: int, stop: threading.Event, out: list[float]) -> None:
    """Sample ``pid``'s own peak RSS (VmHWM) until ``stop``; the last value is the peak."""
    while not stop.is_set():
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    out.append(int(line.split()[1]) / 1024)
        except OSError:
            return
        stop.wait(0.1)


def run_cli(folder: Path, args: list[str], agentv: Path) -> dict[str, Any]:
    """One ``agentv eval`` run: wall time, the driver's peak RSS, the cases that passed."""
    results = folder / "results.jsonl"
    results.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [str(agentv), "eval", "agent.yaml", "--out", str(results), "--quiet", *args],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    samples: list[float] = []
    stop = threading.Event()
    sampler = threading.Thread(target=peak_rss_mb, args=(proc.pid, stop, samples), daemon=True)
    sampler.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - started
    stop.set()
    sampler.join()
    rows = (
        [json.loads(line) for line in results.read_text().splitlines()] if results.exists() else []
    )
    if proc.returncode != 0:
        sys.stderr.write(err.decode(errors="replace")[-2000:])
    return {
        "returncode": proc.returncode,
        "wall_s": round(wall, 2),
        "driver_peak_rss_mb": round(max(samples), 1) if samples else None,
        "ok": sum(1 for r in rows if r["status"] == "ok"),
        "records": len(rows),
    }


def part_one(args: argparse.Namespace) -> list[dict[str, Any]]:
    cpus = os.cpu_count() or 1
    folder = make_suite(args.work / "burn", args.cases, BURN, args.burn).parent
    ideal = args.cases * args.burn / cpus
    rows = []
    runs = [
        ("local", ["--workers", str(cpus)]),
        ("ray (local Ray)", ["--executor", "ray", "--ray-cpus-per-case", "1"]),
    ]
    # The fixed cost of a run (start-up, a local Ray's start and stop): a run of one case
    # per CPU, less that case's burn. It is left out of the per-case figure.
    small = make_suite(args.work / "burn-small", cpus, BURN, args.burn).parent
    for label, extra in runs:
        fixed = run_cli(small, extra, args.agentv)["wall_s"] - args.burn
        figures = run_cli(folder, extra, args.agentv)
        steady = figures["wall_s"] - fixed
        figures.update(
            executor=label,
            cases=args.cases,
            cpus=cpus,
            ideal_s=round(ideal, 2),
            fixed_s=round(fixed, 2),
            overhead_ms_per_case=round((figures["wall_s"] - ideal) * cpus / args.cases * 1000, 1),
            steady_overhead_ms_per_case=round((steady - ideal) * cpus / args.cases * 1000, 1),
            efficiency=round(ideal / figures["wall_s"], 3),
        )
        rows.append(figures)
        print(f"  {label}: {figures}", flush=True)
    # What the Ray path adds to a case, beyond what every executor pays (the agent's own
    # process start): the steady per-case overheads' difference.
    local, ray = rows
    ray["ray_path_overhead_ms_per_case"] = round(
        ray["steady_overhead_ms_per_case"] - local["steady_overhead_ms_per_case"], 1
    )
    print(f"  Ray path's own overhead: {ray['ray_path_overhead_ms_per_case']} ms a case")
    return rows


def part_two(args: argparse.Namespace) -> list[dict[str, Any]]:
    import ray
    from ray.cluster_utils import Cluster

    import agentv

    folder = make_suite(args.work / "wait", args.cluster_cases, WAIT, args.wait).parent
    warm = make_suite(args.work / "wait-warm", 16, WAIT, args.wait).parent
    rows = []
    for nodes in (1, 2, 4):
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
        for _ in range(nodes - 1):
            cluster.add_node(num_cpus=2)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, logging_level=logging.WARNING, log_to_driver=False)
        try:
            # A first, small run starts the nodes' worker processes (each imports agentv
            # once): the cluster's fixed cost, reported apart from its throughput.
            started = time.perf_counter()
            agentv.run_eval("agent.yaml", cwd=warm, executor="ray")
            warm_up = time.perf_counter() - started
            started = time.perf_counter()
            run = agentv.run_eval("agent.yaml", cwd=folder, executor="ray")
            wall = time.perf_counter() - started
        finally:
            ray.shutdown()
            cluster.shutdown()
        cpus = 2 * nodes
        ideal = args.cluster_cases * args.wait / cpus
        row = {
            "nodes": nodes,
            "declared_cpus": cpus,
            "cases": args.cluster_cases,
            "warm_up_s": round(warm_up, 2),
            "wall_s": round(wall, 2),
            "ideal_s": round(ideal, 2),
            "cases_per_s": round(args.cluster_cases / wall, 2),
            "of_ideal": round(ideal / wall, 3),
            "ok": sum(1 for r in run.results if r.status == "ok"),
        }
        rows.append(row)
        print(f"  {nodes} node(s): {row}", flush=True)
    return rows


def part_three(args: argparse.Namespace) -> dict[str, Any]:
    """What one LM API request pays on Ray for the run's shared gate: a turn asked of the
    keeper actor (one round trip), its success and the turn given back (one-way messages),
    one request after another and with 50 at once, against the same gate in this
    process."""
    import asyncio

    import ray

    from agentv.run.executors.ray_gates import GateKeeper, GateSpec, RemoteGate
    from agentv.run.scheduling import TargetGate

    async def turns(gate: Any, count: int, at_once: int) -> float:
        async def one_after_another(n: int) -> None:
            for _ in range(n):  # what a request that succeeds tells its gate
                await gate.acquire()
                gate.succeeded()
                gate.release()

        started = time.perf_counter()
        await asyncio.gather(*(one_after_another(count // at_once) for _ in range(at_once)))
        return time.perf_counter() - started

    spec = GateSpec("bench", 50)
    ray.init(address="local", num_cpus=2, logging_level=logging.WARNING, log_to_driver=False)
    try:
        keeper = ray.remote(GateKeeper).options(num_cpus=0).remote({0: spec})
        ray.get(keeper.node.remote())  # started
        figures: dict[str, Any] = {"turns": args.gate_turns}
        for at_once in (1, 50):
            remote = asyncio.run(turns(RemoteGate(keeper, 0, spec), args.gate_turns, at_once))
            local = asyncio.run(turns(TargetGate(50), args.gate_turns, at_once))
            figures[f"at_once_{at_once}"] = {
                "keeper_us_per_turn": round(remote / args.gate_turns * 1e6, 1),
                "local_us_per_turn": round(local / args.gate_turns * 1e6, 1),
            }
            print(f"  {at_once} at once: {figures[f'at_once_{at_once}']}", flush=True)
        ray.kill(keeper)
    finally:
        ray.shutdown()
    return figures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--cases", type=int, default=400, help="part 1: cases (default 400)")
    p.add_argument("--burn", type=float, default=0.5, help="part 1: CPU seconds per case")
    p.add_argument("--cluster-cases", type=int, default=96, help="part 2: cases (default 96)")
    p.add_argument("--wait", type=float, default=0.5, help="part 2: seconds each agent waits")
    p.add_argument("--gate-turns", type=int, default=2000, help="part 3: turns (default 2000)")
    p.add_argument("--only", default="1,2,3", help="parts to run: 1, 2, 3 or a list (1,3)")
    p.add_argument("--work", type=Path, default=DEFAULT_WORK)
    p.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    p.add_argument("--agentv", type=Path, default=Path(sys.executable).parent / "agentv")
    args = p.parse_args(argv)
    parts = set(args.only.split(","))
    figures: dict[str, Any] = {"load_average_at_start": os.getloadavg()[0]}
    if "1" in parts:
        print(f"S7 part 1: {args.cases} cases burning {args.burn} s of CPU each", flush=True)
        figures["this_machine"] = part_one(args)
    if "2" in parts:
        print(f"S7 part 2: {args.cluster_cases} cases waiting {args.wait} s each", flush=True)
        figures["simulated_cluster"] = part_two(args)
    if "3" in parts:
        print(f"S7 part 3: {args.gate_turns} turns at the shared gate", flush=True)
        figures["shared_gate"] = part_three(args)
    figures["load_average_at_end"] = os.getloadavg()[0]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(f"figures: {args.output}")
    bad = [r for r in figures.get("this_machine", []) if r["ok"] != args.cases]
    bad += [r for r in figures.get("simulated_cluster", []) if r["ok"] != args.cluster_cases]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
