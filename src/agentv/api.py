"""The library's front door: run, load and render eval files from Python.

    import agentv

    run = agentv.run_eval(["evals/"], target="default", workers=8)
    print(run.summary.mean, run.summary.errors)
    for result in run.results:          # EvalResult models, one per case
        print(result.eval_id, result.score)

The ``agentv`` command line is a thin layer over these functions (docs/architecture.md):
it adds printing, signals and exit codes, nothing else. Nothing here prints.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentv.errors import Diagnostic, InputError
from agentv.evalfile.files import FileStore, find_repo_root
from agentv.evalfile.finder import expand_eval_paths
from agentv.evalfile.loader import LoadContext, LoadedEvalFile
from agentv.evalfile.loader import load_eval_file as _load_eval_file
from agentv.results.dumps import PromptDumper
from agentv.results.record import EvalResult
from agentv.results.summary import Summary, SummaryCollector
from agentv.results.writers import ResultWriter, open_writer
from agentv.run.cache import ResponseCache
from agentv.run.executors import make_executor
from agentv.run.orchestrator import Executor, Orchestrator, ProgressSink
from agentv.run.pipeline import RunSettings, RunStats
from agentv.run.plan import Plan, plan_run
from agentv.run.resume import RERUN_FAILED
from agentv.run.scheduling import GateStats
from agentv.targets import DryRun, RunTarget, TargetRegistry

PathLike = str | Path


class NoCasesError(InputError):
    """The paths hold no case that can run (none at all, or none left after ``eval_id`` and
    the cases that have errors); ``diagnostics`` says why cases were left out."""

    def __str__(self) -> str:
        return str(self.args[0])  # the reasons are in `diagnostics`, printed on their own


@dataclass
class EvalRun:
    """What a finished (or interrupted) run produced."""

    results: list[EvalResult]
    """One per finished case, in completion order (empty with ``keep_results=False``)."""
    summary: Summary
    """Statistics over every finished case: ``total``, ``mean``, ``errors`` and more."""
    out: Path | None
    """The results file, when one was written."""
    diagnostics: list[Diagnostic] = field(default_factory=list)
    """Problems found while planning (cases left out, warnings)."""
    requests: int = 0
    """Requests sent to targets (cache hits and judge calls not counted)."""
    cache_hits: int = 0
    """Target answers reused from ``cache``."""
    judge_cache_hits: int = 0
    """Judge answers reused from ``cache``."""
    retries: dict[str, dict[int | None, int]] = field(default_factory=dict)
    """Retries per target, by the HTTP status that caused them (None: no answer)."""
    unusable_files: list[Path] = field(default_factory=list)
    """Eval files that could not be used at all (their cases have no results)."""
    wall_seconds: float = 0.0
    """How long the run took, planning excluded."""
    load: dict[str, GateStats] = field(default_factory=dict)
    """Per target: requests sent, throttled answers (429/503), time paused, the lowest
    concurrency it was slowed to."""
    dry_run: bool = False

    @property
    def clean(self) -> bool:
        """Every selected case ran and was graded without error (exit code 0's condition,
        ``--threshold`` aside)."""
        s = self.summary
        return not (s.errors or s.invalid or self.unusable_files)

    artifacts: dict[str, list[Path]] = field(default_factory=dict)
    """Files the targets left for people to read (agent logs), by kind."""
    prompts_dir: Path | None = None
    """Where ``dump_prompts`` wrote the prompts, when any were written."""


class _Sink:
    """Where each finished record goes: the results file, and the run's list of models."""

    def __init__(self, writer: ResultWriter | None, keep: bool) -> None:
        self.writer = writer
        self.results: list[EvalResult] | None = [] if keep else None

    def write(self, record: dict[str, Any]) -> None:
        if self.writer is not None:
            self.writer.write(record)
        if self.results is not None:
            self.results.append(EvalResult.from_record(record))


class _Silent:
    """The progress of a run nobody watches."""

    def case_started(self, key: str, label: str) -> None:
        pass

    def case_finished(
        self,
        key: str,
        label: str,
        *,
        status: str,
        score: float | None,
        error: str | None,
        miss: str | None = None,
    ) -> None:
        pass

    def note(self, text: str) -> None:
        pass


@dataclass
class PreparedRun:
    """A run planned and checked, not started: every case was loaded and every target
    built. ``await run()`` runs it; nothing was sent before."""

    plan: Plan
    registry: TargetRegistry
    settings: RunSettings
    out: Path | None
    output_format: str
    keep_results: bool = True
    append: bool = False  # `resume`: the results go after what the file holds
    stats: RunStats = field(default_factory=RunStats)
    #: where the cases run (``agentv.run.executors``); None: here, in this process
    executor: Executor | None = None
    #: (repository root, run folder) whose ``.env`` the run loads again when it starts, in
    #: case another run was prepared meanwhile (agents inherit the environment then)
    env_folders: tuple[Path, Path] | None = None

    @property
    def total(self) -> int:
        """The number of cases the run will send."""
        return self.plan.total

    @property
    def diagnostics(self) -> list[Diagnostic]:
        """Problems found while planning."""
        return self.plan.diagnostics

    def targets(self) -> list[RunTarget]:
        """The targets the cases run on."""
        return self.plan.targets()

    def open_results(self) -> ResultWriter | None:
        """Create the results file (``out``), or None when the run writes none."""
        if self.out is None:
            return None
        return open_writer(self.out, self.output_format, append=self.append)

    async def run(
        self, *, writer: ResultWriter | None = None, progress: ProgressSink | None = None
    ) -> EvalRun:
        """Run every case; each result is written the moment its case ends. ``writer`` is
        the results file (default: ``open_results()``); it is closed at the end. On
        cancellation every finished result is already written; ``stats`` says how many."""
        if self.env_folders is not None:
            from agentv.env import load_env_file

            load_env_file(*self.env_folders)
        writer = writer if writer is not None else self.open_results()
        sink = _Sink(writer, self.keep_results)
        collector = SummaryCollector()
        orchestrator = Orchestrator(
            self.registry,
            self.settings,
            writer=sink,
            collector=collector,
            progress=progress or _Silent(),
            executor=self.executor,
        )
        orchestrator.stats = self.stats
        started = time.perf_counter()
        try:
            await orchestrator.run(self.plan.lanes())
        finally:
            if writer is not None:
                writer.close()
            await self.registry.aclose()
        dumper = self.settings.dumper
        return EvalRun(
            results=sink.results or [],
            summary=collector.summary(),
            out=writer.path if writer is not None else None,
            diagnostics=list(self.plan.diagnostics),
            requests=self.stats.requests,
            cache_hits=self.stats.cache_hits,
            judge_cache_hits=self.stats.judge_cache_hits,
            retries={t: dict(c) for t, c in self.stats.retries.items()},
            load={name: gate.stats for name, gate in orchestrator.gates.by_target().items()},
            unusable_files=list(self.plan.unusable_files),
            wall_seconds=time.perf_counter() - started,
            dry_run=self.registry.dry_run is not None,
            artifacts=artifacts(self.registry),
            prompts_dir=dumper.folder if dumper is not None and dumper.count else None,
        )


def artifacts(registry: TargetRegistry) -> dict[str, list[Path]]:
    """Files the run's targets left for people to read, grouped under each kind's label."""
    found: dict[str, list[Path]] = {}
    for t in registry.all_targets():
        if t.provider.artifacts:
            found.setdefault(t.provider.artifacts_label, []).extend(t.provider.artifacts)
    return found


def prepare_run(
    paths: PathLike | Sequence[PathLike],
    *,
    target: str | Sequence[str] | None = None,
    repeat: int | None = None,
    targets_file: PathLike | None = None,
    workers: int | None = None,
    out: PathLike | None = None,
    output_format: str = "jsonl",
    eval_id: str | None = None,
    dry_run: bool | DryRun = False,
    agent_timeout: float | None = 120.0,
    max_retries: int = 2,
    cache: bool = False,
    dump_prompts: PathLike | None = None,
    allow_outside_root: bool = False,
    pass_threshold: float | None = None,
    resume: PathLike | None = None,
    rerun: PathLike | None = None,
    rerun_statuses: Iterable[str] = RERUN_FAILED,
    keep_results: bool = True,
    cwd: PathLike | None = None,
    executor: str = "local",
    ray_address: str | None = None,
    ray_cpus_per_case: float | None = None,
) -> PreparedRun:
    """Plan a run: find the eval files, load and check every case, build every target.

    Raises ``InputError`` (with ``diagnostics``) or ``ConfigError`` when the run cannot
    start, ``NoCasesError`` when no case is left to run. Relative paths start from ``cwd``
    (default: the working directory). ``.env`` is loaded as ``agentv eval`` loads it.
    ``pass_threshold`` (the lowest passing score) overrides every config's
    ``pass_threshold`` (default 0.8). ``target``: one name runs every case there; several
    run every case on each of them (a matrix). ``repeat``: runs of each case (default: the
    files' and cases' own ``repeat``, else 1); each run is its own request. ``resume``: a
    results file to complete (only the runs it has no record of, or whose prompt changed,
    are run, appended to it). ``rerun``: a results file whose cases with one of
    ``rerun_statuses`` (default failed, error, invalid) run again, alone.
    ``executor="ray"`` runs the cases on Ray (``ray_address``: a cluster to attach to, else
    ``RAY_ADDRESS``, else a local Ray started for the run; ``ray_cpus_per_case``: CPUs each
    case reserves, default 1), with the same results as a local run.
    """
    from agentv.env import load_env_file

    base = Path(cwd).resolve() if cwd is not None else Path.cwd().resolve()
    args = [str(paths)] if isinstance(paths, (str, Path)) else [str(p) for p in paths]
    files = expand_eval_paths(args, base)
    env_folders = (find_repo_root(files[0].parent, base), base)
    env_file = load_env_file(*env_folders)
    chosen = make_executor(
        executor,
        ray_address=ray_address,
        ray_cpus_per_case=ray_cpus_per_case,
        env=_driver_env(env_file),
    )
    if dry_run is True:
        dry_run = DryRun()
    registry = TargetRegistry(
        cwd=base,
        targets_path=_under(base, targets_file),
        dry_run=dry_run or None,
    )
    context = LoadContext(store=FileStore(cwd=base), allow_outside_root=allow_outside_root)
    if repeat is not None and repeat < 1:
        raise InputError(f"repeat must be at least 1 (got {repeat})")
    names = [target] if isinstance(target, str) else list(target or [])
    plan = plan_run(
        files, registry, cli_target=names, repeat=repeat, eval_id=eval_id, context=context
    )
    if not plan.total:
        if eval_id is not None:
            message = f"no case with id {eval_id!r} in {', '.join(map(str, files))}"
        else:
            message = "no eval cases to run (check --eval-id and the messages above)"
        raise NoCasesError(message, plan.diagnostics)
    if workers is not None and workers < 1:
        raise InputError(f"workers must be at least 1 (got {workers})")
    if pass_threshold is not None and not 0 <= pass_threshold <= 1:
        raise InputError(f"pass_threshold must be from 0 to 1 (got {pass_threshold})")
    settings = RunSettings(
        workers=workers,
        agent_timeout=agent_timeout if agent_timeout and agent_timeout > 0 else None,
        max_retries=max(0, max_retries),
        cache=ResponseCache(base / ".agentv" / "cache") if cache else None,
        dumper=PromptDumper(base / dump_prompts) if dump_prompts is not None else None,
    )
    if pass_threshold is not None:
        settings.pass_threshold = pass_threshold
        plan.config_thresholds = False  # the caller's threshold wins over every config's
    if resume is not None or rerun is not None:
        from agentv.run.resume import read_state

        if resume is not None:
            plan.resume = read_state(base / Path(resume), repair=True)
            out = resume
        else:
            state = read_state(base / Path(rerun), repair=False)  # type: ignore[arg-type]
            plan.rerun = state.cases_with(rerun_statuses)
        plan.total = sum(1 for lane in plan.lanes() for _ in lane.jobs())
        if not plan.total and rerun is not None:
            raise NoCasesError(f"no case in {rerun} has status {', '.join(sorted(rerun_statuses))}")
    return PreparedRun(
        plan=plan,
        registry=registry,
        settings=settings,
        out=_under(base, out),
        output_format=output_format,
        keep_results=keep_results,
        append=resume is not None,
        executor=chosen,
        env_folders=env_folders,
    )


def _driver_env(env_file: Path | None) -> dict[str, str]:
    """What a case running elsewhere needs of this process's environment: the vendors' key
    variables and what ``.env`` set (a cluster's nodes have neither)."""
    from dotenv import dotenv_values

    from agentv.run.masking import VENDOR_KEY_VARIABLES

    names = set(VENDOR_KEY_VARIABLES)
    if env_file is not None:
        names.update(dotenv_values(env_file, encoding="utf-8"))
    return {name: os.environ[name] for name in sorted(names) if name in os.environ}


def _under(base: Path, path: PathLike | None) -> Path | None:
    return None if path is None else base / Path(path)


async def arun_eval(
    paths: PathLike | Sequence[PathLike],
    *,
    target: str | Sequence[str] | None = None,
    targets_file: PathLike | None = None,
    workers: int | None = None,
    out: PathLike | None = None,
    **options: Any,
) -> EvalRun:
    """Run eval files and grade every case; ``await`` it inside a running event loop.

    ``target`` overrides each case's own target (as ``--target``); several names run every
    case on each (a matrix). ``out`` is a results file to write (JSON Lines;
    ``output_format="yaml"`` for YAML), None writes no file. Other ``options`` are
    ``prepare_run``'s: ``repeat``, ``eval_id``, ``dry_run``, ``agent_timeout``,
    ``max_retries``, ``cache``, ``dump_prompts``, ``allow_outside_root``,
    ``pass_threshold``, ``keep_results``, ``cwd``, ``output_format``, ``executor``
    (``"local"`` or ``"ray"``), ``ray_address``, ``ray_cpus_per_case``.
    """
    prepared = prepare_run(
        paths, target=target, targets_file=targets_file, workers=workers, out=out, **options
    )
    return await prepared.run()


def run_eval(
    paths: PathLike | Sequence[PathLike],
    *,
    target: str | Sequence[str] | None = None,
    targets_file: PathLike | None = None,
    workers: int | None = None,
    out: PathLike | None = None,
    **options: Any,
) -> EvalRun:
    """Run eval files and grade every case (blocking); see ``arun_eval`` for the options.

    Inside a running event loop (a notebook, an async app) use ``await arun_eval(...)``.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "run_eval() was called inside a running event loop; use `await arun_eval(...)`"
        )
    return asyncio.run(
        arun_eval(
            paths, target=target, targets_file=targets_file, workers=workers, out=out, **options
        )
    )


def render(
    paths: PathLike | Sequence[PathLike],
    *,
    mode: str | None = None,
    target: str | None = None,
    targets_file: PathLike | None = None,
    eval_id: str | None = None,
    allow_outside_root: bool = False,
    cwd: PathLike | None = None,
) -> list[dict[str, Any]]:
    """What ``agentv render --format json`` prints: one view per case (``question``,
    ``guidelines``, ``sent_messages`` exactly as an LM API would receive them, and with a
    target its ``request``). Nothing is sent; no secret is needed or shown.

    ``mode`` (``"lm"`` / ``"agent"``) changes only how ``question`` is shown. Raises
    ``InputError`` (with every problem as ``diagnostics``) when a file could not be used.
    """
    from agentv.run.preview import preview

    if mode not in (None, "lm", "agent"):
        raise InputError(f"mode must be 'lm' or 'agent' (got {mode!r})")
    args = [paths] if isinstance(paths, (str, Path)) else list(paths)
    result = preview(
        args,
        eval_id=eval_id,
        mode=mode,  # type: ignore[arg-type]
        target=target,
        targets_path=targets_file,
        allow_outside_root=allow_outside_root,
        cwd=cwd,
    )
    if result.failed:
        first = next((d.message for d in result.errors), "nothing could be rendered")
        raise InputError(first, result.diagnostics)
    return result.cases


def load_eval_file(path: PathLike, *, allow_outside_root: bool = False) -> LoadedEvalFile:
    """Load one eval file: its usable ``cases`` and every ``diagnostics`` entry (errors skip
    their case; ``errors`` and ``warnings`` split them). Raises ``InputError`` when the
    file as a whole cannot be used."""
    return _load_eval_file(Path(path), context=LoadContext(allow_outside_root=allow_outside_root))
