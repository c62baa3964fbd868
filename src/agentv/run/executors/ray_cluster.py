"""``--executor ray``: cases run in Ray tasks, on a local Ray or an existing cluster.

The driver (``agentv eval`` or ``run_eval``) plans the run as always and hands each case to
a Ray task; the task runs the same ``CasePipeline`` as the local executor (prompt, target,
evaluators, record) in a worker process and returns the record; the driver writes it the
moment it arrives, so the results file, progress, summary, resume and exit codes are those
of a local run. See docs/architecture.md ("Executors") and README "Running on a cluster".

- What a case needs travels with it: the case as loaded (its files already read) and, once
  per run, the run's targets with their settings resolved on the driver (``${{ VAR }}``
  substituted, vendor keys and ``.env`` values included). That goes through Ray's object
  store, never into a task's name, a log line or ``runtime_env`` (which the dashboard shows).
- Each worker process builds the targets once per run and keeps its own event loop, so a
  case costs one task, not one SDK client.
- Rate limits: one gate per target for the whole run, in a Ray actor every worker asks for
  its requests' turns (``agentv.run.executors.ray_gates``): a 429 seen anywhere pauses the
  target everywhere, and a target's own ``workers`` caps its requests across the cluster.
- Backpressure: at most ``in_flight`` cases are submitted at once (twice the cluster's CPUs
  divided by ``cpus_per_case``), pulled from the plan one at a time: memory stays flat.
- A worker that dies mid-case (killed, out of memory, its node lost): the case is sent again,
  up to ``LOST_WORKER_TRIES`` times in all; Ray's own task retries are off so that every lost
  try is counted in the record's ``attempts``. A case is written once, by the driver.
- Cancelling the run (Ctrl-C, SIGTERM) cancels every outstanding task; finished records are
  already written.
- A cluster that is lost (this node's raylet gone, the head silent: ``ray_watch``) stops
  the run with ``ClusterLostError``: the cases not finished are left to ``--resume``, never
  recorded as errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentv.errors import ClusterLostError, ConfigError
from agentv.results.outcome import error_record
from agentv.run.executors.ray_gates import GateKeeper, GateSpec, RemoteGates, hold_for
from agentv.run.executors.ray_watch import ClusterWatch
from agentv.run.pipeline import CasePipeline
from agentv.run.plan import CaseJob
from agentv.run.scheduling import GateStats, max_rpm, max_tpm
from agentv.run.sending import RunSettings, RunStats, Sender, target_workers
from agentv.system.env import environment_scope
from agentv.system.masking import Masker
from agentv.targets import RunTarget

if TYPE_CHECKING:
    from agentv.cases import EvalCase
    from agentv.evaluators.base import CaseGrade
    from agentv.providers.base import Provider
    from agentv.run.orchestrator import Orchestrator
    from agentv.run.plan import Lane
    from agentv.run.resume import Unfinished

#: tries a case gets when the worker running it dies (the first included)
LOST_WORKER_TRIES = 3
#: what every task is called in Ray's dashboard and logs (nothing about the case: no secrets)
TASK_NAME = "agentv-case"
#: how long the end of a run waits for the gates' figures
KEEPER_TIMEOUT_S = 10.0
#: how long a run waits for its gate keeper to start (a new worker process on the node)
KEEPER_START_S = 120.0
#: set in every Ray worker: the id of the node it runs on (agents inherit it)
NODE_ID_VARIABLE = "AGENTV_RAY_NODE_ID"


# --- what travels to the workers ------------------------------------------------------------


@dataclass(frozen=True)
class ProviderSpec:
    """How to build a provider again: its class, its name and its resolved settings."""

    cls: type[Provider]
    name: str
    settings: Any

    def build(self) -> Provider:
        return self.cls(self.name, self.settings)


@dataclass(frozen=True)
class TargetSpec:
    """A run target as a worker rebuilds it; providers are named by their key in the spec."""

    name: str
    kind: str
    provider: int
    workers: int | None
    batching: bool
    judge: int | None = None
    judge_limit: int = 1
    judge_error: str | None = None  # why this target's cases cannot be judged
    dry_run_of: str | None = None


@dataclass(frozen=True)
class RunSpec:
    """Everything a worker needs for every case of one run (sent once, through Ray)."""

    run_id: str
    providers: dict[int, ProviderSpec]
    targets: dict[int, TargetSpec]
    settings: RunSettings
    secrets: tuple[str, ...]
    env: dict[str, str]
    keeper: Any  # the run's GateKeeper actor
    gates: dict[int, GateSpec]  # by provider key


@dataclass(frozen=True)
class CasePayload:
    """One case of the run, as sent to a task."""

    run_id: str
    case: EvalCase
    target: int
    pass_threshold: float | None
    repeat: int
    user: int | None = None  # the key of the target playing its simulated user
    resumed: Unfinished | None = None  # a conversation the budget stopped, to go on from
    #: what ran on the driver before the case's workspace was made (its file's before_all)
    setup: tuple[dict[str, Any], ...] = ()


@dataclass
class CaseOutcome:
    """What a task sends back: the record and grade, and what the case added to the
    worker's counters (the driver adds it to the run's)."""

    record: dict[str, Any]
    grade: CaseGrade | None
    requests: int = 0
    cache_hits: int = 0
    judge_cache_hits: int = 0
    retries: dict[str, Counter[int | None]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    dumps: int = 0
    #: files the case's targets left for people to read (agent logs), by provider key
    artifacts: dict[int, list[Path]] = field(default_factory=dict)
    node_id: str = ""
    pid: int = 0


# --- the worker side ------------------------------------------------------------------------


class _Notes:
    """The worker's progress notes (retries, cut answers), kept for the driver to show."""

    def __init__(self) -> None:
        self.pending: list[str] = []

    def note(self, text: str) -> None:
        self.pending.append(text)

    def take(self) -> list[str]:
        taken, self.pending = self.pending, []
        return taken


class _Worker:
    """One worker process's part of one run: its targets, built once, and a pipeline."""

    def __init__(self, spec: RunSpec) -> None:
        import ray

        # an agent (a `cli` target) can tell which node of the cluster it runs on
        os.environ[NODE_ID_VARIABLE] = ray.get_runtime_context().get_node_id()
        # the run's environment as the driver sees it: keys and .env values (a cluster's
        # nodes have neither), over this process's; the run's own, never in os.environ
        # (one process may serve several runs), and what a cli agent inherits here
        self.env = {**os.environ, **spec.env}
        self.run_id = spec.run_id
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)
        with environment_scope(self.env):
            providers = {key: p.build() for key, p in spec.providers.items()}
        self.providers = providers
        self._artifacts_seen = dict.fromkeys(providers, 0)
        self.targets: dict[int, RunTarget] = {}
        self._judges: dict[int, tuple[Provider, int] | str] = {}
        for key, t in spec.targets.items():
            target = RunTarget(
                name=t.name,
                kind=t.kind,
                provider=providers[t.provider],
                workers=t.workers,
                batching=t.batching,
                dry_run_of=t.dry_run_of,
            )
            self.targets[key] = target
            if t.judge is not None:
                self._judges[id(target)] = (providers[t.judge], t.judge_limit)
            else:
                self._judges[id(target)] = t.judge_error or f"target {t.name!r} has no judge"
        self.stats = RunStats()
        self.notes = _Notes()
        keys = {id(provider): key for key, provider in providers.items()}
        sender = Sender(
            spec.settings,
            judge_of=self._judge_of,
            stats=self.stats,
            progress=self.notes,
            masker=Masker(spec.secrets),
            gates=RemoteGates(spec.keeper, keys, spec.gates),
        )
        self.pipeline = CasePipeline(sender)
        for target in self.targets.values():
            sender.watch(target)

    def _judge_of(self, target: RunTarget) -> tuple[Provider, int]:
        found = self._judges[id(target)]
        if isinstance(found, str):
            raise ConfigError(found)
        return found

    def run(self, payload: CasePayload, holder: str) -> CaseOutcome:
        hold_for(holder)
        target = self.targets[payload.target]
        job = CaseJob(
            case=payload.case,
            target=target,
            pass_threshold=payload.pass_threshold,
            repeat=payload.repeat,
            user=self.targets[payload.user] if payload.user is not None else None,
            resumed=payload.resumed,
            setup=payload.setup,
        )
        stats = self.stats
        dumper = self.pipeline.settings.dumper
        before = (stats.requests, stats.cache_hits, stats.judge_cache_hits)
        retries_before = {name: Counter(c) for name, c in stats.retries.items()}
        dumps_before = dumper.count if dumper is not None else 0
        with environment_scope(self.env):  # the case's task takes it with it
            record, grade = self.loop.run_until_complete(self.pipeline.run(job))
        return CaseOutcome(
            record=record,
            grade=grade,
            requests=stats.requests - before[0],
            cache_hits=stats.cache_hits - before[1],
            judge_cache_hits=stats.judge_cache_hits - before[2],
            retries={
                name: delta
                for name, counts in stats.retries.items()
                if (delta := counts - retries_before.get(name, Counter()))
            },
            notes=self.notes.take(),
            dumps=(dumper.count if dumper is not None else 0) - dumps_before,
            artifacts=self._new_artifacts(),
            node_id=os.environ[NODE_ID_VARIABLE],
            pid=os.getpid(),
        )

    def _new_artifacts(self) -> dict[int, list[Path]]:
        found: dict[int, list[Path]] = {}
        for key, provider in self.providers.items():
            files = provider.artifacts_after(self._artifacts_seen[key])
            if files:
                found[key] = files
                self._artifacts_seen[key] += len(files)
        return found


def _add(into: GateStats, more: GateStats) -> None:
    into.requests += more.requests
    into.throttled += more.throttled
    into.throttled_seconds += more.throttled_seconds
    into.lowest_limit = min(into.lowest_limit, more.lowest_limit)


#: this worker process's part of the current run (a process serves one run at a time)
_current: _Worker | None = None


def run_case_task(spec_box: list[Any], payload: CasePayload, holder: str) -> CaseOutcome:
    """The Ray task: one case through the pipeline. ``spec_box`` holds the run's ``RunSpec``
    reference, boxed so that Ray fetches it only when this process first sees the run;
    ``holder`` names this try of the case at the run's gates."""
    global _current
    if _current is None or _current.run_id != payload.run_id:
        import ray

        _current = _Worker(ray.get(spec_box[0]))
    return _current.run(payload, holder)


# --- the driver side ------------------------------------------------------------------------


class RayExecutor:
    """Sends the run's cases to Ray and hands their records back to the orchestrator."""

    def __init__(self, *, address: str | None, cpus_per_case: float, env: dict[str, str]):
        self.address = address
        self.cpus_per_case = cpus_per_case
        self.env = env
        self.in_flight = 0  # the most cases submitted at once (set by ``start``)
        self._owns_ray = False
        self._orchestrator: Orchestrator | None = None
        self._task: Any = None
        self._keeper: Any = None
        self._spec_box: list[Any] = []
        self._run_id = ""
        #: the driver's providers by their key in the run's spec
        self._providers: dict[int, Provider] = {}
        #: the node the run's gate keeper runs on ("" when the run needs none)
        self.keeper_node = ""
        #: where each case ran: (node id, worker process id) -> cases
        self.placements: Counter[tuple[str, int]] = Counter()
        #: why the cluster is lost, once it is (the run stops: ``ClusterLostError``)
        self.lost: str | None = None
        self.watch = ClusterWatch()

    async def start(self, orchestrator: Orchestrator, lanes: list[Lane]) -> int:
        import ray

        if not ray.is_initialized():
            # no address: RAY_ADDRESS when set (as Ray documents), else a local Ray
            ray.init(
                address=self.address,
                logging_level=logging.WARNING,
                log_to_driver=False,  # workers' output stays in Ray's logs, off the display
            )
            self._owns_ray = True
        self._orchestrator = orchestrator
        self.watch.start()
        cpus = float(ray.cluster_resources().get("CPU", 1.0))
        self.in_flight = max(1, math.floor(2 * cpus / self.cpus_per_case))
        spec = self._spec(orchestrator, lanes)
        if self._keeper is not None:  # up before the first case, where the driver runs
            try:
                self.keeper_node = await asyncio.wait_for(
                    self._keeper.node.remote(), KEEPER_START_S
                )
            except TimeoutError:
                raise ConfigError(
                    f"the run's rate-limit keeper (a Ray actor on this node) did not start "
                    f"within {KEEPER_START_S:g} s; check that this node can start Ray "
                    "workers (`ray status`)"
                ) from None
        self._spec_box = [ray.put(spec)]
        self._task = ray.remote(run_case_task).options(
            num_cpus=self.cpus_per_case, max_retries=0, name=TASK_NAME
        )
        return self.in_flight

    def _spec(self, orchestrator: Orchestrator, lanes: list[Lane]) -> RunSpec:
        providers: dict[int, ProviderSpec] = {}

        def key(provider: Provider) -> int:
            if id(provider) not in providers:
                providers[id(provider)] = ProviderSpec(
                    type(provider), provider.name, provider.settings
                )
                self._providers[id(provider)] = provider
            return id(provider)

        targets: dict[int, TargetSpec] = {}
        gates: dict[int, GateSpec] = {}

        def gate(provider: Provider) -> None:
            # a target's own `workers` caps it across the cluster; else the cases at once do
            own = orchestrator.pool.owner(provider)
            workers = own.workers if own is not None else None
            spec = GateSpec(
                provider.name, workers or self.in_flight, max_rpm(provider), max_tpm(provider)
            )
            if provider.is_agent and not (workers or spec.max_rpm or spec.max_tpm):
                # nothing to share: an agent is never throttled by the run (its API's limits
                # are its own business), so each process keeps a gate of its own and a case
                # makes no round trip to the keeper (docs/architecture.md, "Running")
                return
            gates.setdefault(key(provider), spec)

        for lane in lanes:
            t = lane.target
            assert t is not None
            judge, limit, problem = None, 1, None
            try:
                found, limit = orchestrator.judge_of(t)
                judge = key(found)
            except ConfigError as exc:
                problem = str(exc)
            orchestrator.sender.gate(t)  # the run's figures per target add up here
            gate(t.provider)
            if judge is not None:
                orchestrator.gates.for_provider(found, limit)
                gate(found)
            targets[id(t)] = TargetSpec(
                name=t.name,
                kind=t.kind,
                provider=key(t.provider),
                workers=target_workers(orchestrator.settings, t),
                batching=t.batching,
                judge=judge,
                judge_limit=limit,
                judge_error=problem,
                dry_run_of=t.dry_run_of,
            )
        # the targets playing simulated users: sent to the workers, gated as any target
        for u in lanes[0].plan.user_targets() if lanes else []:
            if id(u) in targets:
                continue  # also a lane's target
            orchestrator.sender.gate(u)
            gate(u.provider)
            targets[id(u)] = TargetSpec(
                name=u.name,
                kind=u.kind,
                provider=key(u.provider),
                workers=target_workers(orchestrator.settings, u),
                batching=u.batching,
                judge=None,
                judge_limit=1,
                judge_error=f"target {u.name!r} plays a simulated user and judges nothing",
                dry_run_of=u.dry_run_of,
            )
        self._run_id = uuid.uuid4().hex
        if gates:  # else no actor at all: nothing is shared
            import ray
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            # on the driver's node: Ray would put an actor that needs no CPU on any node,
            # often a worker's, and losing that node would fail every request left
            here = NodeAffinitySchedulingStrategy(
                ray.get_runtime_context().get_node_id(), soft=False
            )
            self._keeper = (
                ray.remote(GateKeeper).options(num_cpus=0, scheduling_strategy=here).remote(gates)
            )
        return RunSpec(
            run_id=self._run_id,
            providers=providers,
            targets=targets,
            settings=orchestrator.settings,
            secrets=orchestrator.masker.secrets,
            env=self.env,
            keeper=self._keeper,
            gates=gates,
        )

    async def run_case(self, job: CaseJob) -> tuple[dict[str, Any], CaseGrade | None]:
        import ray
        from ray.exceptions import (
            NodeDiedError,
            ObjectLostError,
            OutOfMemoryError,
            OwnerDiedError,
            RayError,
            WorkerCrashedError,
        )

        lost_kinds = (
            WorkerCrashedError,
            NodeDiedError,
            OutOfMemoryError,
            ObjectLostError,
            OwnerDiedError,
        )
        payload = CasePayload(
            run_id=self._run_id,
            case=job.case,
            target=id(job.target),  # the target's key in the run's spec
            pass_threshold=job.pass_threshold,
            repeat=job.repeat,
            user=id(job.user) if job.user is not None else None,
            resumed=job.resumed,
            setup=job.setup,
        )
        started = time.perf_counter()
        lost = 0
        while True:
            if self.lost is not None:  # no case is sent to a cluster that is gone
                raise ClusterLostError(self.lost)
            holder = uuid.uuid4().hex  # this try's turns at the run's gates
            ref = self._task.remote(self._spec_box, payload, holder)
            try:
                outcome: CaseOutcome = await self._answer(ref)
            except asyncio.CancelledError:
                if self.lost is None:  # else nothing answers: asking would only fail
                    ray.cancel(ref, force=True)
                    self._forget(holder)
                raise
            except lost_kinds as exc:
                self._forget(holder)  # the turns its requests held
                lost += 1
                if lost < LOST_WORKER_TRIES:
                    continue
                return self._failed(
                    job,
                    started,
                    lost,
                    f"the Ray worker running it died {lost} times: {type(exc).__name__}",
                ), None
            except RayError as exc:
                if _cluster_gone(exc):
                    # not the case's failure: the run stops, and the case (not run) is left
                    # to a run with --resume
                    self.lost = self.lost or _lost_message(exc)
                    raise ClusterLostError(self.lost) from None
                return self._failed(
                    job, started, lost, f"Ray could not run it: {_first_line(exc)}"
                ), None
            break
        self._absorb(outcome)
        record = outcome.record
        if lost:
            record["attempts"] = record.get("attempts", 0) + lost
        return record, outcome.grade

    async def _answer(self, ref: Any) -> CaseOutcome:
        """The task's outcome; ``ClusterLostError`` as soon as the watch finds the cluster
        gone (Ray itself would end this process a little later, without a word)."""
        result = asyncio.wrap_future(ref.future())
        gone = self.watch.gone
        if gone is None:
            return await result
        await asyncio.wait({result, gone}, return_when=asyncio.FIRST_COMPLETED)
        if not result.done():
            result.cancel()
            self.lost = self.lost or _lost_message(self.watch.lost or "it stopped answering")
            raise ClusterLostError(self.lost)
        return result.result()

    def _forget(self, holder: str) -> None:
        if self._keeper is not None:
            self._keeper.forget.remote(holder)

    def _failed(self, job: CaseJob, started: float, lost: int, error: str) -> dict[str, Any]:
        return error_record(
            job.case,
            target=job.target.name,
            provider=job.target.provider,
            prompt=None,
            error=error,
            duration_ms=(time.perf_counter() - started) * 1000,
            attempts=lost,
            repeat=job.repeat,
        )

    def _absorb(self, outcome: CaseOutcome) -> None:
        """Add what the case did on its worker to the run's figures, and show its notes."""
        orch = self._orchestrator
        assert orch is not None
        stats = orch.stats
        stats.requests += outcome.requests
        stats.cache_hits += outcome.cache_hits
        stats.judge_cache_hits += outcome.judge_cache_hits
        for name, counts in outcome.retries.items():
            stats.retries.setdefault(name, Counter()).update(counts)
        dumper = orch.settings.dumper
        if dumper is not None:
            dumper.count += outcome.dumps
        for text in outcome.notes:
            orch.progress.note(text)
        for key, files in outcome.artifacts.items():  # listed at the end, as in a local run
            for path in files:
                self._providers[key].keep_artifact(path)
        self.placements[(outcome.node_id, outcome.pid)] += 1

    async def stop(self) -> None:
        await self.watch.stop()
        if self.lost is not None:
            # The cluster is gone: touching it (the keeper, the object store) would only
            # fail, and Ray ends a driver whose object store is lost. Let go of it.
            self._keeper = None
            if self._owns_ray:
                import ray

                self._owns_ray = False
                with contextlib.suppress(Exception):
                    ray.shutdown()
            return
        if self._keeper is not None:
            import ray

            keeper, self._keeper = self._keeper, None
            try:  # what the run's gates saw, for the summary
                seen = await asyncio.wait_for(keeper.stats.remote(), KEEPER_TIMEOUT_S)
            except Exception:  # a lost keeper costs the summary's load lines, not the run
                seen = {}
            assert self._orchestrator is not None
            gates = self._orchestrator.gates.by_target()
            for name, stats in seen.items():
                if name in gates:
                    _add(gates[name].stats, stats)
            ray.kill(keeper)
        if self._owns_ray:
            import ray

            ray.shutdown()
            self._owns_ray = False


def _cluster_gone(exc: BaseException) -> bool:
    """Whether Ray says the cluster itself is gone (the raylet of the driver's node, the
    head's services), not one worker: no case can run any more."""
    from ray.exceptions import LocalRayletDiedError, RaySystemError

    return isinstance(exc, LocalRayletDiedError | RaySystemError)


def _lost_message(why: BaseException | str) -> str:
    reason = why if isinstance(why, str) else _first_line(why)
    return (
        f"the Ray cluster was lost ({reason}); the run stopped. Every case that finished is "
        "in the results file: a run with --resume runs the rest once the cluster is back "
        "(`ray status`)"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
