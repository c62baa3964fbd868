"""The library's front door: run, check, render and read eval files and results from Python.

    import agentv

    run = agentv.run_eval(["evals/"], target="default", workers=8)
    print(run.summary.mean, run.summary.errors)
    for result in run.results:          # EvalResult models, one per run of a case
        print(result.eval_id, result.score)

The ``agentv`` command line is a thin layer over this module (docs/architecture.md): it
imports nothing of agentv's but this module and ``agentv.errors``, and adds printing,
signals and exit codes, nothing else. Nothing here prints. Modules are imported when a
function needs them, so that a command's start-up pays only for what it uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypedDict, Unpack

from agentv.errors import (
    AgentVError,
    ClusterLostError,
    ConfigError,
    Diagnostic,
    DiagnosticsView,
    InputError,
    NoCasesError,
    ProviderError,
    SetupError,
)

if TYPE_CHECKING:
    from agentv.evalfile.loader import LoadContext, LoadedEvalFile
    from agentv.providers.python import PythonTarget
    from agentv.results.compare import CaseDelta, Comparison, Side, Significance
    from agentv.results.flips import EvaluatorFlips, Flip
    from agentv.results.record import CaseKey, EvalResult
    from agentv.results.report import Report
    from agentv.results.summary import Summary, Tokens, TurnStats
    from agentv.results.writers import ResultWriter
    from agentv.run.estimate import Estimate
    from agentv.run.orchestrator import Executor, ProgressSink
    from agentv.run.plan import Lane, Plan
    from agentv.run.preview import Preview
    from agentv.run.repeats import AutoRepeats
    from agentv.run.resume import RERUN_ERRORS, RERUN_FAILED, ResultsState
    from agentv.run.scheduling import GateStats
    from agentv.run.sending import RunSettings, RunStats
    from agentv.run.validation import FileReport
    from agentv.store import Calibration, ImportedReviews, RunStore, StoredRun
    from agentv.targets import DryRun, TargetPool
    from agentv.view.server import Workbench

__all__ = [
    "RERUN_ERRORS",
    "RERUN_FAILED",
    "AgentVError",
    "Calibration",
    "CaseDelta",
    "ClusterLostError",
    "Comparison",
    "ConfigError",
    "Diagnostic",
    "DryRun",
    "Estimate",
    "EvalResult",
    "EvalRun",
    "EvaluatorFlips",
    "Flip",
    "GateStats",
    "ImportedReviews",
    "ImportedRun",
    "InputError",
    "NoCasesError",
    "PreparedRun",
    "Preview",
    "ProviderError",
    "PythonTarget",
    "Regrade",
    "Report",
    "ResultsFile",
    "RunOptions",
    "RunRegistration",
    "SetupError",
    "Side",
    "Significance",
    "StoredRun",
    "Summary",
    "Tokens",
    "TurnStats",
    "Validation",
    "aregrade",
    "arun_eval",
    "calibrate",
    "compare",
    "default_results_path",
    "display_path",
    "estimate",
    "export_reviews",
    "github_annotations",
    "import_reviews",
    "import_runs",
    "load_eval_file",
    "open_store",
    "prepare_run",
    "preview",
    "read_results",
    "register_run",
    "regrade",
    "render",
    "report",
    "report_path",
    "reviewer_name",
    "run_eval",
    "runs",
    "store_path",
    "validate",
    "workbench",
    "write_junit",
]

PathLike = str | Path

#: The one table of public names defined elsewhere (``agentv`` takes its names from this
#: module), each imported when first asked for, so that a command's start-up pays only for
#: what it uses: name -> its module.
_LAZY = {
    "RERUN_ERRORS": "agentv.run.resume",
    "RERUN_FAILED": "agentv.run.resume",
    "CaseDelta": "agentv.results.compare",
    "Comparison": "agentv.results.compare",
    "DryRun": "agentv.targets",
    "Estimate": "agentv.run.estimate",
    "EvalResult": "agentv.results.record",
    "GateStats": "agentv.run.scheduling",
    "Preview": "agentv.run.preview",
    "PythonTarget": "agentv.providers.python",
    "Report": "agentv.results.report",
    "Side": "agentv.results.compare",
    "Significance": "agentv.results.compare",
    "EvaluatorFlips": "agentv.results.flips",
    "Flip": "agentv.results.flips",
    "Calibration": "agentv.store",
    "ImportedReviews": "agentv.store",
    "StoredRun": "agentv.store",
    "Summary": "agentv.results.summary",
    "Tokens": "agentv.results.summary",
    "TurnStats": "agentv.results.summary",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentv.api' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


# --- running ------------------------------------------------------------------------------


class RunOptions(TypedDict, total=False):
    """The options of a run (``prepare_run``, ``run_eval``, ``arun_eval``), each optional:
    ``agentv eval``'s flags by their Python names. An unknown name is a ``ConfigError``
    naming the valid ones."""

    target: str | PythonTarget | Sequence[str | PythonTarget] | None
    """One target for every case (``--target``), or several: every case on each (a
    matrix). Default: each case's own target, else the file's, else ``default``. A
    ``PythonTarget`` is your own code as a target."""
    repeat: int | Literal["auto"] | None
    """Runs of each case (default: the files' and cases' own ``repeat``, else 1); each run
    is its own request. ``"auto"``: every case once, then more runs of the cases whose
    pass / fail verdict is not settled, the most unsettled first, until settled, at
    ``max_repeat`` or at ``budget_usd`` (docs/trusting-verdicts.md)."""
    max_repeat: int | None
    """With ``repeat="auto"``: the most runs of a case (default 10)."""
    repeat_confidence: float | None
    """With ``repeat="auto"``: how sure a settled verdict is (default 0.95)."""
    targets_file: PathLike | None
    """The targets file (default: found from each eval file)."""
    workers: int | None
    """Requests in flight at once per target (default: each target's ``workers``, else 3)."""
    out: PathLike | None
    """The results file to write (None: no file)."""
    output_format: Literal["jsonl", "yaml"] | None
    """The results file's format: ``"jsonl"`` (the default) or ``"yaml"``. A file that is
    resumed or rerun into keeps its own format (a different one here is a
    ``ConfigError``: a file never mixes two)."""
    eval_id: str | None
    """Run only the case with this id."""
    dry_run: bool | DryRun
    """Answer every case with a mock instead of calling the targets."""
    agent_timeout: float | None
    """Seconds a target may take per case (default 120; None or 0: no limit); a finite
    number (NaN, infinity or a negative number is refused)."""
    max_retries: int
    """Extra attempts for a case whose target timed out (default 2)."""
    cache: bool
    """Reuse answers stored on disk (``.agentv/cache``) for identical requests."""
    dump_prompts: PathLike | None
    """A folder to write each case's prompt to, as JSON."""
    allow_outside_root: bool
    """Accept file references that resolve outside the repository root."""
    pass_threshold: float | None
    """The lowest passing score, over every config's ``pass_threshold`` (default 0.8)."""
    resume: PathLike | None
    """A results file to complete: only the runs it has no record of, or whose prompt
    changed, are run, appended to it."""
    retry_errors: bool
    """With ``resume``: also run again the runs whose latest record is ``error`` or
    ``invalid``."""
    rerun: PathLike | None
    """A results file whose runs with one of ``rerun_statuses`` (their latest record) run
    again, alone, appended to that file unless ``out`` names another."""
    rerun_statuses: Iterable[str]
    """What ``rerun`` picks (default ``RERUN_FAILED``: failed, uncertain, error, invalid,
    user_error)."""
    replay_user: PathLike | None
    """A results file whose simulated users' turns are sent again verbatim instead of
    asking the simulators (docs/eval-files.md, "Simulated users")."""
    keep_results: bool
    """Keep every result in ``EvalRun.results`` (default True; False for very large runs:
    the results file has them)."""
    cwd: PathLike | None
    """Where relative paths start and ``.env`` is looked for (default: the working
    directory)."""
    executor: Literal["local", "ray"]
    """Where cases run: here (default), or on Ray."""
    ray_address: str | None
    """The Ray cluster to attach to (default ``RAY_ADDRESS``, else a local Ray)."""
    ray_cpus_per_case: float | None
    """CPUs each case reserves on Ray (default 1)."""
    budget_usd: float | None
    """US dollars the run may spend: once its requests have cost that much, nothing more
    is sent; requests in flight finish, and the runs not sent are recorded ``skipped``
    (``EvalRun.budget_reached``). A finite number above 0 (not text, not a bool). Local
    runs only (not with ``executor="ray"``)."""
    judge_samples: int | Mapping[str, Any] | None
    """How many times every judge that sets no ``samples`` of its own is asked about one
    answer: a number, or ``{"min": 1, "max": 5, "margin": 0.1}`` (docs/trusting-verdicts.md).
    Default: once."""
    on_uncertain: Literal["uncertain", "fail", "pass"] | None
    """What a judge's samples disagreeing about pass or fail makes of a run, for judges
    that set no ``on_uncertain`` of their own: status ``uncertain`` (the default),
    ``failed`` or ``ok``."""


_OPTION_NAMES: tuple[str, ...] = tuple(RunOptions.__annotations__)


def _check_options(options: dict[str, Any]) -> None:
    unknown = [name for name in options if name not in _OPTION_NAMES]
    if unknown:
        name = unknown[0]
        close = difflib.get_close_matches(name, _OPTION_NAMES, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"valid: {', '.join(_OPTION_NAMES)}"
        raise ConfigError(f"unknown run option {name!r}; {hint}")
    # as the command line refuses them: NaN, infinity, a negative time, text or a flag
    # where a number belongs would otherwise be read as no limit, or as $1
    timeout = options.get("agent_timeout")
    if timeout is not None and not (_number(timeout) and 0 <= timeout < math.inf):
        raise ConfigError(
            f"agent_timeout must be 0 (no limit) or a number of seconds above 0 (got {timeout!r})"
        )
    budget = options.get("budget_usd")
    if budget is not None and not (_number(budget) and 0 < budget < math.inf):
        raise ConfigError(f"budget_usd must be a number of US dollars above 0 (got {budget!r})")


def _number(value: object) -> bool:
    """Whether ``value`` is a number (a bool is not)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


@dataclass
class EvalRun:
    """What a finished (or interrupted) run produced."""

    results: list[EvalResult]
    """One per run of a case this call ran, in completion order (empty with
    ``keep_results=False``)."""
    summary: Summary
    """Statistics over the results file's latest record of every run when the run added
    to a file (``resume``, a rerun into its file), else over the runs this call ran:
    ``total``, ``mean``, ``errors`` and more."""
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
    """Every case was answered by a mock (``dry_run``), no target was asked."""
    ran: int = 0
    """Runs of cases this call ran (``summary`` may cover more: a whole results file)."""
    whole_file: bool = False
    """``summary`` is the results file's (this call added to a file that held results)."""
    diagnostics_of_file: list[Diagnostic] = field(default_factory=list)
    """With ``whole_file``: lines of the results file that are not results (left out)."""

    @property
    def clean(self) -> bool:
        """Every selected case ran and was graded without error.

        Exit code 0's condition, ``--threshold`` aside.
        """
        s = self.summary
        return not (s.errors or s.invalid or s.user_errors or s.skipped or self.unusable_files)

    artifacts: dict[str, list[Path]] = field(default_factory=dict)
    """Files the targets left for people to read (agent logs), by kind."""
    prompts_dir: Path | None = None
    """Where ``dump_prompts`` wrote the prompts, when any were written."""
    spent_usd: float = 0.0
    """US dollars this call's requests cost (every party; answers reused from ``cache``
    not counted: ``reused_usd``). Tokens without a price add nothing: ``unpriced``."""
    reused_usd: float = 0.0
    """The price of the answers reused from ``cache`` (not spent again)."""
    unpriced: list[str] = field(default_factory=list)
    """Targets whose tokens had no price (each said with what to do)."""
    budget_usd: float | None = None
    """The run's budget (``budget_usd``), when it had one."""
    budget_reached: bool = False
    """The budget stopped the run: some runs were not sent (status ``skipped``)."""
    rounds: int = 0
    """With ``repeat="auto"``: the rounds it ran (the first: every case once)."""


class _Sink:
    """Where each finished record goes: the results file (when there is one)."""

    def __init__(self, writer: ResultWriter | None, auto: AutoRepeats | None = None) -> None:
        self.writer = writer
        self.auto = auto

    def write(self, record: dict[str, Any]) -> None:
        if self.writer is not None:
            self.writer.write(record)
        if self.auto is not None:  # --repeat auto plans its next round from the records
            self.auto.observe(record)


def _collector(keep: bool) -> Any:
    """The run's statistics, keeping (``keep``) its results in completion order."""
    from agentv.results.record import EvalResult
    from agentv.results.summary import SummaryCollector

    class Collector(SummaryCollector):
        def __init__(self) -> None:
            super().__init__()
            self.results: list[EvalResult] | None = [] if keep else None

        def add_record(self, record: dict[str, Any]) -> None:
            super().add_record(record)  # the record is read as it is
            if self.results is not None:
                self.results.append(EvalResult.from_record(record))

    return Collector()


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


@dataclass(kw_only=True)
class PreparedRun:
    """A run planned and checked, not started: every case was loaded and every target
    built; nothing was sent. ``await run()`` runs it.

    Its fields say what the run will do, decided when it was prepared; the run does
    exactly that.
    """

    total: int
    """Runs of cases the run will send (with ``resume`` or ``rerun``: those left to run)."""
    diagnostics: list[Diagnostic]
    """Problems found while planning (cases left out, warnings)."""
    out: Path | None
    """The results file (None: no file, unless ``open_results`` is given one)."""
    output_format: str
    """The results file's format: ``"jsonl"`` or ``"yaml"``."""
    targets: list[tuple[str, int]]
    """Each target the cases run on, as ``name [provider=kind]``, and how many requests it
    may have in flight in this run."""
    pass_threshold: float | None
    """The pass threshold every case of the run has (None: the files' configs set
    different ones)."""
    cache: bool = False
    """Answers are reused from ``.agentv/cache`` (the ``cache`` option)."""
    keep_results: bool = True
    """``EvalRun.results`` will hold every result."""
    append: bool = False
    """The results go after what ``out`` holds (``resume``, a rerun into its file)."""
    changed_since: int = 0
    """With ``resume``: runs recorded in the file that run again because their case's
    prompt changed since."""
    retried: int = 0
    """With ``resume`` and ``retry_errors``: runs recorded as errors that run again."""
    errors_left: list[tuple[str, str, str, int | None]] = field(default_factory=list)
    """With ``resume`` and no ``retry_errors``: the runs (dataset, eval id, target,
    repeat: None for a case the file has one run of) whose latest record is ``error``,
    ``invalid`` or ``user_error``, left as they are (``retry_errors``, or a rerun of
    errors, runs them again)."""
    taken_up: int = 0
    """With ``resume``: conversations the budget stopped part-way that go on from there
    (their recorded turns are not sent again)."""
    set_aside: int = 0
    """With ``resume``: bytes of a partial last record moved to ``OUT.partial``."""
    file_diagnostics: list[Diagnostic] = field(default_factory=list)
    """Lines of the file resumed or rerun that are not results (left out: as not run)."""
    executor: Executor | None = field(default=None, repr=False)
    """Where the cases run (``agentv.run.executors``); None: here, in this process."""
    auto_repeat: dict[str, Any] | None = None
    """With ``repeat="auto"``: its rule (``max``, ``confidence``, ``margin``); ``total``
    is then its first round's runs, and grows by each round's as it is planned."""
    auto_pending: int = 0
    """With ``repeat="auto"`` and ``resume``: the cases whose runs in the file leave their
    verdict unsettled (each wants another run after the first round)."""
    _plan: Plan = field(repr=False)
    _pool: TargetPool = field(repr=False)
    _settings: RunSettings = field(repr=False)
    _auto: AutoRepeats | None = field(default=None, repr=False)
    _stats: RunStats = field(default_factory=lambda: _run_stats(), repr=False)
    #: the run's environment (the process's variables over its ``.env``): the variables
    #: its targets, agents and code evaluators see while it runs (``agentv.system.env``)
    _env: Mapping[str, str] | None = field(default=None, repr=False)
    #: ``resume``: the file's writer, opened (and locked) before the file was read
    _held: ResultWriter | None = field(default=None, repr=False)

    @property
    def finished(self) -> int:
        """Runs of cases finished so far (while the run goes, and after it ends or stops)."""
        return self._stats.finished

    def close(self) -> None:
        """Let go of what the prepared run holds without running it (a resumed file's lock).

        ``run`` does it when it ends.
        """
        if self._held is not None:
            self._held.close()
            self._held = None

    def open_results(self, out: PathLike | None = None) -> ResultWriter | None:
        """Create the results file.

        A resumed file was opened, and locked, when the run was prepared: that writer is
        handed over.

        Args:
            out: Where to write when the run was prepared without ``out``.

        Returns:
            The results file's writer (its ``path`` says where), or None when the run
            writes no file.

        Raises:
            SetupError: The file cannot be written.
        """
        if self._held is not None:
            held, self._held = self._held, None
            return held
        path = self.out if self.out is not None else _path(out)
        if path is None:
            return None
        from agentv.results.writers import open_writer

        return open_writer(path, self.output_format, append=self.append)

    async def run(
        self, *, writer: ResultWriter | None = None, progress: ProgressSink | None = None
    ) -> EvalRun:
        """Run every case; each result is written the moment its case ends.

        On cancellation every finished result is already written; ``finished`` says how
        many.

        Args:
            writer: The results file (default: ``open_results()``); closed at the end.
            progress: Told when each case starts and ends, and the run's notes (default:
                nobody).

        Returns:
            What the run produced.

        Raises:
            ClusterLostError: The Ray cluster was lost; its ``run`` is what finished.
        """
        from agentv.system.env import environment_scope

        # the run's own variables for everything it starts, whatever runs beside it
        with environment_scope(self._env if self._env is not None else os.environ):
            return await self._run(writer, progress)

    async def _run(self, writer: ResultWriter | None, progress: ProgressSink | None) -> EvalRun:
        from agentv.run.orchestrator import Orchestrator

        writer = writer if writer is not None else self.open_results()
        collector = _collector(self.keep_results)
        sink = progress or _Silent()
        auto = self._auto
        orchestrator = Orchestrator(
            self._pool,
            self._settings,
            writer=_Sink(writer, auto),
            collector=collector,
            progress=sink,
            executor=self.executor,
            stats=self._stats,
        )
        lanes = self._plan.lanes()
        more = None
        if auto is not None:
            auto.meter = lambda: orchestrator.sender.meter
            lanes = auto.first_round(lanes)
            more = _rounds(auto, sink, self)
        started = time.perf_counter()
        stopped: ClusterLostError | None = None
        try:
            await orchestrator.run(lanes, more)
        except ClusterLostError as exc:  # summed up below, then raised with what finished
            stopped = exc
        finally:
            if writer is not None:
                writer.close()
            await self._pool.aclose()
        dumper = self._settings.dumper
        meter = orchestrator.sender.meter
        summary = collector.summary()
        spent, reused = meter.spent, meter.reused
        if self.executor is not None and summary.cost is not None:
            # the cases ran in other processes, each with its own meter: their records say
            spent, reused = summary.cost.total.usd, summary.cost.total.reused_usd
        file_problems: list[Diagnostic] = []
        whole = self.append and writer is not None
        if whole:  # the file is the unit: its summary is the whole file's
            assert writer is not None
            read = read_results(writer.path)
            summary, file_problems = read.summary, read.diagnostics
        run = EvalRun(
            results=collector.results or [],
            summary=summary,
            ran=self._stats.finished,
            whole_file=whole,
            diagnostics_of_file=file_problems,
            out=writer.path if writer is not None else None,
            diagnostics=list(self._plan.diagnostics),
            requests=self._stats.requests,
            cache_hits=self._stats.cache_hits,
            judge_cache_hits=self._stats.judge_cache_hits,
            retries={t: dict(c) for t, c in self._stats.retries.items()},
            load={name: gate.stats for name, gate in orchestrator.gates.by_target().items()},
            unusable_files=list(self._plan.unusable_files),
            wall_seconds=time.perf_counter() - started,
            dry_run=self._pool.dry_run is not None,
            artifacts=_artifacts(self._pool),
            prompts_dir=dumper.folder if dumper is not None and dumper.count else None,
            spent_usd=spent,
            reused_usd=reused,
            unpriced=list(meter.unpriced.values()),
            budget_usd=meter.budget,
            budget_reached=meter.stopped,
            rounds=auto.counts.rounds if auto is not None else 0,
        )
        if stopped is not None:
            stopped.run = run
            raise stopped
        return run


def _rounds(
    auto: AutoRepeats, progress: ProgressSink, prepared: PreparedRun
) -> Callable[[], list[Lane] | None]:
    """``--repeat auto``'s next rounds, each added to ``prepared.total`` and said to
    ``progress`` (and added to its total when it keeps one: ``more``, a method sinks may
    leave out)."""

    def more() -> list[Lane] | None:
        lanes = auto.next_round()
        if lanes:
            added = auto.counts.last
            prepared.total += added
            progress.note(
                f"--repeat auto: round {auto.counts.rounds}, {added} more run(s) of the cases "
                "whose verdict is not settled"
            )
            grow = getattr(progress, "more", None)
            if callable(grow):
                grow(added)
        return lanes

    return more


def _run_stats() -> RunStats:
    from agentv.run.sending import RunStats

    return RunStats()


def _artifacts(pool: TargetPool) -> dict[str, list[Path]]:
    """Files the run's targets left for people to read, grouped under each kind's label."""
    found: dict[str, list[Path]] = {}
    for t in pool.all_targets():
        if t.provider.artifacts:
            found.setdefault(t.provider.artifacts_label, []).extend(t.provider.artifacts)
    return found


def prepare_run(paths: PathLike | Sequence[PathLike], **options: Unpack[RunOptions]) -> PreparedRun:
    """Plan a run: find the eval files, load and check every case, build every target.

    Nothing is sent. ``.env`` is read as ``agentv eval`` reads it, into the run's own
    environment (never ``os.environ``): runs prepared or running at the same time in one
    process each see their own. ``executor="ray"`` runs the cases on Ray with the same
    results as a local run.

    Args:
        paths: Eval files, folders (searched for eval files) or globs, relative to ``cwd``.
        **options: The run's options: ``RunOptions``.

    Returns:
        The run, ready to go. Its fields say what it will do; ``await prepared.run()``
        runs it.

    Raises:
        InputError: A file cannot be used (``diagnostics`` lists every problem).
        NoCasesError: No case is left to run (``diagnostics`` says why).
        ConfigError: An option or a target cannot be used as given.
        SetupError: What the machine lacks: an unset variable, an SDK.
    """
    from agentv.evalfile.files import find_repo_root
    from agentv.evalfile.finder import expand_eval_paths
    from agentv.system.env import environment_scope, read_environment

    _check_options(dict(options))
    if options.get("budget_usd") is not None and options.get("executor", "local") != "local":
        raise ConfigError(
            "budget_usd holds a run's spend in this process: use executor='local' (the "
            "default) with it"
        )
    cwd = options.get("cwd")
    base = Path(cwd).resolve() if cwd is not None else Path.cwd().resolve()
    args = [str(paths)] if isinstance(paths, (str, Path)) else [str(p) for p in paths]
    files = expand_eval_paths(args, base)
    env, env_file = read_environment(find_repo_root(files[0].parent, base), base)
    with environment_scope(env):  # targets are built with the run's own variables
        return _prepare(files, base, env, env_file, options)


def _prepare(
    files: list[Path],
    base: Path,
    env: dict[str, str],
    env_file: Path | None,
    options: RunOptions,
) -> PreparedRun:
    from agentv.evalfile.files import FileStore
    from agentv.evalfile.loader import LoadContext
    from agentv.run.executors import make_executor
    from agentv.targets import DryRun, TargetPool

    executor = make_executor(
        options.get("executor", "local"),
        ray_address=options.get("ray_address"),
        ray_cpus_per_case=options.get("ray_cpus_per_case"),
        env=_driver_env(env, env_file),
    )
    dry_run = options.get("dry_run", False)
    if dry_run is True:
        dry_run = DryRun()
    pool = TargetPool(
        cwd=base,
        targets_path=_under(base, options.get("targets_file")),
        dry_run=dry_run or None,
    )
    context = LoadContext(
        store=FileStore(cwd=base), allow_outside_root=options.get("allow_outside_root", False)
    )
    _check_repeat(options)
    names = _target_names(options.get("target"), pool)
    if pool.python_targets and options.get("executor", "local") != "local":
        raise ConfigError(
            "a PythonTarget runs in this process: use executor='local' (the default) with it"
        )
    workers = options.get("workers")
    if workers is not None and workers < 1:
        raise ConfigError(f"workers must be at least 1 (got {workers})")
    pass_threshold = options.get("pass_threshold")
    if pass_threshold is not None and not 0 <= pass_threshold <= 1:
        raise ConfigError(f"pass_threshold must be from 0 to 1 (got {pass_threshold})")
    out = _under(base, options.get("out"))
    resume, rerun = options.get("resume"), options.get("rerun")
    if options.get("retry_errors") and resume is None:
        raise ConfigError("retry_errors goes with resume (--rerun-errors FILE with --resume FILE)")
    if resume is not None and out is not None:
        raise ConfigError("resume appends to the file it resumes; leave out out")
    # What a results file already holds is read before the plan is made, so that the plan
    # comes out finished. A resumed file is locked before anything in it is read or
    # changed: another run still writing it stops this one here, and its last record is
    # never taken for a partial one and set aside.
    held: ResultWriter | None = None
    state: ResultsState | None = None
    picked: dict[CaseKey, set[int]] | None = None
    append = False
    if resume is not None:
        from agentv.run.resume import read_state

        out = base / Path(resume)
        held = _lock_for_resume(out, options.get("output_format"))
        append = True
    try:
        if resume is not None:
            state = read_state(out, repair=True)  # type: ignore[arg-type]
        elif rerun is not None:
            from agentv.run.resume import RERUN_FAILED, read_state

            state = read_state(base / Path(rerun), repair=False)
            picked = state.runs_with(set(options.get("rerun_statuses", RERUN_FAILED)))
            if out is None:  # by default into the same file: it keeps the whole truth
                out = base / Path(rerun)
                append = True
        return _planned(
            files,
            base,
            env,
            pool,
            context,
            names,
            executor,
            options,
            out,
            append,
            state,
            picked,
            held,
        )
    except BaseException:
        if held is not None:
            held.close()
        raise


def _check_repeat(options: RunOptions) -> None:
    """``repeat``, ``max_repeat`` and ``repeat_confidence``, checked (``ConfigError``)."""
    repeat = options.get("repeat")
    auto = repeat == "auto"
    if repeat is not None and not auto:
        if isinstance(repeat, bool) or not isinstance(repeat, int):
            raise ConfigError(f"repeat is a number of runs or 'auto' (got {repeat!r})")
        if repeat < 1:
            raise ConfigError(f"repeat must be at least 1 (got {repeat})")
    for name in ("max_repeat", "repeat_confidence"):
        if options.get(name) is not None and not auto and options.get("resume") is None:
            raise ConfigError(f"{name} goes with repeat='auto' (--repeat auto)")
    if auto or options.get("max_repeat") is not None:
        if options.get("executor", "local") != "local":
            raise ConfigError(
                "repeat='auto' decides each round from the last in this process: use "
                "executor='local' (the default) with it"
            )
        if options.get("rerun") is not None:
            raise ConfigError(
                "repeat='auto' does not go with rerun (--rerun-*): --resume a results file "
                "of --repeat auto to go on with it"
            )
    _auto_rule(options, None)  # its numbers, checked now


def _auto_rule(options: RunOptions, found: Any) -> Any:
    """The rule of ``--repeat auto``: ``max_repeat`` and ``repeat_confidence`` over
    ``found`` (a resumed file's rule), over the defaults."""
    from agentv.results.settled import AutoRule

    base = found if found is not None else AutoRule()
    most, confidence = options.get("max_repeat"), options.get("repeat_confidence")
    try:
        return AutoRule(
            max=base.max if most is None else most,
            confidence=base.confidence if confidence is None else confidence,
            margin=base.margin,
        )
    except ValueError as exc:
        raise ConfigError(f"repeat='auto': {exc}") from None


def _planned(
    files: list[Path],
    base: Path,
    env: dict[str, str],
    pool: TargetPool,
    context: LoadContext,
    names: list[str],
    executor: Executor | None,
    options: RunOptions,
    out: Path | None,
    append: bool,
    state: ResultsState | None,
    picked: dict[CaseKey, set[int]] | None,
    held: ResultWriter | None,
) -> PreparedRun:
    """The prepared run of a finished plan."""
    from agentv.results.dumps import PromptDumper
    from agentv.run.cache import ResponseCache
    from agentv.run.plan import plan_run
    from agentv.run.sending import RunSettings, target_workers

    eval_id = options.get("eval_id")
    pass_threshold = options.get("pass_threshold")
    resume = state if options.get("resume") is not None else None
    rule = _resumed_rule(options, resume)
    repeat = options.get("repeat")
    if rule is not None:
        # the first round: every case's first run (on resume, with the runs the file
        # recorded, so that a changed prompt runs them all again)
        recorded = [key[3] for key in resume.runs] if resume is not None else []
        repeat = max(recorded, default=0) + 1
    plan = plan_run(
        files,
        pool,
        cli_target=names,
        repeat=repeat,  # type: ignore[arg-type]
        eval_id=eval_id,
        context=context,
        pass_threshold=pass_threshold,
        resume=resume,
        retry_errors=bool(options.get("retry_errors")),
        rerun=picked,
        auto_resume=rule is not None and resume is not None,
    )
    if not plan.planned:
        if eval_id is not None:
            message = f"no case with id {eval_id!r} in {', '.join(map(str, files))}"
        else:
            message = "no eval cases to run (check --eval-id and the messages above)"
        raise NoCasesError(message, list(plan.diagnostics))
    agent_timeout = options.get("agent_timeout", 120.0)
    dump_prompts = options.get("dump_prompts")
    replay = options.get("replay_user")
    replays = None
    diagnostics = list(plan.diagnostics)
    if replay is not None:
        from agentv.run.resume import match_replays, read_replays

        recording = base / Path(replay)
        replays = read_replays(recording)
        unmatched = match_replays(recording, replays, plan.simulated())
        if unmatched is not None:
            diagnostics.append(unmatched)
    settings = RunSettings(
        workers=options.get("workers"),
        agent_timeout=agent_timeout if agent_timeout and agent_timeout > 0 else None,
        max_retries=max(0, options.get("max_retries", 2)),
        cache=ResponseCache(base / ".agentv" / "cache") if options.get("cache") else None,
        dumper=PromptDumper(base / dump_prompts) if dump_prompts is not None else None,
        budget_usd=options.get("budget_usd"),
        pass_threshold=plan.pass_threshold,
        replay_user=replays,
        judge_samples=judge_samples_option(options.get("judge_samples")),
        on_uncertain=on_uncertain_option(options.get("on_uncertain")),
    )
    thresholds = plan.thresholds
    auto = None
    pending = 0
    if rule is not None:
        from agentv.run.repeats import AutoRepeats

        auto = AutoRepeats(rule, plan)
        if resume is not None:
            auto.seed(resume)
            pending = sum(1 for found in auto.verdicts().values() if found.wants_more)
    return PreparedRun(
        total=plan.total,
        diagnostics=diagnostics,
        out=out,
        output_format=_output_format(out, options.get("output_format"), append=append),
        targets=[(t.label, target_workers(settings, t)) for t in plan.targets()],
        pass_threshold=next(iter(thresholds)) if len(thresholds) == 1 else None,
        cache=settings.cache is not None,
        keep_results=options.get("keep_results", True),
        append=append,
        changed_since=plan.changed_since,
        retried=plan.retried,
        errors_left=list(plan.errors_left),
        taken_up=plan.taken_up,
        set_aside=state.set_aside if state is not None else 0,
        file_diagnostics=list(state.diagnostics) if state is not None else [],
        executor=executor,
        _plan=plan,
        _pool=pool,
        _settings=settings,
        _env=env,
        _held=held,
        auto_repeat=rule.to_dict() if rule is not None else None,
        auto_pending=pending,
        _auto=auto,
    )


def _resumed_rule(options: RunOptions, resume: ResultsState | None) -> Any:
    """The rule of ``--repeat auto`` this run follows (None: not one): the options', over
    a resumed file's (a file made with ``--repeat auto`` goes on with its rule)."""
    from agentv.run.repeats import file_rule

    repeat = options.get("repeat")
    found = file_rule(resume) if resume is not None else None
    if repeat == "auto" or (repeat is None and found is not None):
        return _auto_rule(options, found)
    if options.get("max_repeat") is not None or options.get("repeat_confidence") is not None:
        raise ConfigError(
            "max_repeat and repeat_confidence go with repeat='auto' (--repeat auto), or "
            "with --resume of a results file that --repeat auto made"
        )
    return None


def judge_samples_option(value: Any) -> Any:
    """The ``judge_samples`` option as a ``SampleRule`` (None: once); ``ConfigError``
    saying what is wrong with it."""
    if value is None:
        return None
    from pydantic import ValidationError

    from agentv.evaluators.samples import MAX_SAMPLES, sample_rule

    try:
        if isinstance(value, int) and not isinstance(value, bool) and not 1 <= value <= MAX_SAMPLES:
            raise ValueError
        return sample_rule(value)
    except (ValueError, TypeError, ValidationError) as exc:
        why = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else ""
        raise ConfigError(
            f"judge_samples is a number from 1 to {MAX_SAMPLES} or {{min, max, margin}} "
            f"(got {value!r}){': ' + why if why else ''}"
        ) from None


def on_uncertain_option(value: Any) -> str | None:
    """The ``on_uncertain`` option, checked (``ConfigError`` naming the choices)."""
    from agentv.evaluators.samples import ON_UNCERTAIN

    if value is not None and value not in ON_UNCERTAIN:
        raise ConfigError(f"on_uncertain is one of {', '.join(ON_UNCERTAIN)} (got {value!r})")
    return value


def _lock_for_resume(path: Path, asked: str | None) -> ResultWriter:
    """The writer of a file to resume, opened (and so locked) before it is read: refused
    when the file is missing or not a file, before anything creates it."""
    from agentv.results.writers import open_writer
    from agentv.run.resume import check_results_file

    check_results_file(path)  # before opening it creates it
    return open_writer(path, _output_format(path, asked, append=True), append=True)


def _output_format(out: Path | None, asked: str | None, *, append: bool) -> str:
    """The results file's format: a file that already holds results keeps its own (a file
    never mixes two formats); else what was asked, else JSON Lines."""
    if not append or out is None or not out.exists() or not out.stat().st_size:
        return asked or "jsonl"
    from agentv.results.reader import results_format

    found = results_format(out)
    if asked is not None and asked != found:
        raise ConfigError(
            f"{out} holds {found} results; a file never mixes two formats: leave out "
            f"output_format (--format), or write {asked} results to another file"
        )
    return found


def _target_names(target: Any, pool: TargetPool) -> list[str]:
    """The target names a run option gives; ``PythonTarget``s join the pool by name."""
    from agentv.providers.python import PythonTarget

    given = [target] if isinstance(target, (str, PythonTarget)) else list(target or [])
    names = []
    for item in given:
        if isinstance(item, PythonTarget):
            other = pool.python_targets.setdefault(item.name, item)
            if other is not item:  # results name targets: one would be taken for the other
                raise ConfigError(
                    f"two Python targets are named {item.name!r}: give each its own name "
                    "(PythonTarget(fn, name=...))"
                )
            names.append(item.name)
        else:
            names.append(str(item))
    return names


def _driver_env(env: dict[str, str], env_file: Path | None) -> dict[str, str]:
    """What a case running elsewhere needs of the run's environment: the vendors' key
    variables and what ``.env`` set (a cluster's nodes have neither), and where workspaces
    go when the run says (else each node's own default)."""
    from dotenv import dotenv_values

    from agentv.run.workspaces import ROOT_VARIABLE
    from agentv.system.env import VENDOR_KEY_VARIABLES

    names = {*VENDOR_KEY_VARIABLES, ROOT_VARIABLE}
    if env_file is not None:
        names.update(dotenv_values(env_file, encoding="utf-8"))
    return {name: env[name] for name in sorted(names) if name in env}


def _under(base: Path, path: PathLike | None) -> Path | None:
    return None if path is None else base / Path(path)


async def arun_eval(paths: PathLike | Sequence[PathLike], **options: Unpack[RunOptions]) -> EvalRun:
    """Run eval files and grade every case; ``await`` it inside a running event loop.

    Args:
        paths: Eval files, folders (searched for eval files) or globs, relative to ``cwd``.
        **options: The run's options: ``RunOptions``. ``target`` overrides each case's own
            target (as ``--target``), several names run every case on each (a matrix);
            ``out`` is a results file to write (JSON Lines; ``output_format="yaml"`` for
            YAML), None writes no file.

    Returns:
        What the run produced (its results, summary and counters).

    Raises:
        InputError: A file cannot be used (``diagnostics`` lists every problem).
        NoCasesError: No case is left to run.
        ConfigError: An option or a target cannot be used as given.
        SetupError: What the machine lacks: an unset variable, an SDK.
        ClusterLostError: The Ray cluster was lost; its ``run`` is what finished.
    """
    return await prepare_run(paths, **options).run()


def run_eval(paths: PathLike | Sequence[PathLike], **options: Unpack[RunOptions]) -> EvalRun:
    """Run eval files and grade every case, blocking until the run ends.

    Inside a running event loop (a notebook, an async app) use ``await arun_eval(...)``.

    Args:
        paths: Eval files, folders (searched for eval files) or globs, relative to ``cwd``.
        **options: The run's options: ``RunOptions``, as for ``arun_eval``.

    Returns:
        What the run produced (its results, summary and counters).

    Raises:
        RuntimeError: Called inside a running event loop.
        InputError: A file cannot be used (``diagnostics`` lists every problem).
        NoCasesError: No case is left to run.
        ConfigError: An option or a target cannot be used as given.
        SetupError: What the machine lacks: an unset variable, an SDK.
        ClusterLostError: The Ray cluster was lost; its ``run`` is what finished.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "run_eval() was called inside a running event loop; use `await arun_eval(...)`"
        )
    return asyncio.run(arun_eval(paths, **options))


def default_results_path(cwd: Path, output_format: str) -> Path:
    """Where ``agentv eval`` writes results by default.

    Args:
        cwd: The project folder.
        output_format: ``"jsonl"`` or ``"yaml"``.

    Returns:
        ``CWD/.agentv/results/eval_<UTC time>.<ext>``.
    """
    from agentv.results.writers import default_results_path as path

    return path(cwd, output_format)


# --- eval files: loading, rendering, checking ----------------------------------------------


def load_eval_file(path: PathLike, *, allow_outside_root: bool = False) -> LoadedEvalFile:
    """Load one eval file.

    Args:
        path: The eval file.
        allow_outside_root: Accept file references that resolve outside the repository root.

    Returns:
        Its usable ``cases`` and every ``diagnostics`` entry (a case with errors is left
        out; ``errors`` and ``warnings`` split them).

    Raises:
        InputError: The file as a whole cannot be used.
    """
    from agentv.evalfile.loader import LoadContext
    from agentv.evalfile.loader import load_eval_file as load

    return load(Path(path), context=LoadContext(allow_outside_root=allow_outside_root))


def preview(
    paths: PathLike | Sequence[PathLike],
    *,
    mode: Literal["lm", "agent"] | None = None,
    target: str | None = None,
    targets_file: PathLike | None = None,
    eval_id: str | None = None,
    allow_outside_root: bool = False,
    cwd: PathLike | None = None,
) -> Preview:
    """What every case would send, and every problem met on the way.

    Nothing is sent; no secret is needed or shown.

    Args:
        paths: Eval files, folders or globs, relative to ``cwd``.
        mode: ``"lm"`` or ``"agent"``: how ``question`` is shown (default: as the target
            takes it, else ``"lm"``).
        target: The target to build each request for (default: none).
        targets_file: The targets file (default: found from each eval file).
        eval_id: Only the case with this id.
        allow_outside_root: Accept file references that resolve outside the repository root.
        cwd: Where relative paths start (default: the working directory).

    Returns:
        ``cases`` (as ``render`` returns them), ``diagnostics``, and ``failed`` when a file
        could not be used (``agentv render`` prints all three).

    Raises:
        ConfigError: ``mode`` is neither ``"lm"`` nor ``"agent"``.
    """
    from agentv.run.preview import preview as make_preview

    if mode not in (None, "lm", "agent"):
        raise ConfigError(f"mode must be 'lm' or 'agent' (got {mode!r})")
    args = [paths] if isinstance(paths, (str, Path)) else list(paths)
    return make_preview(
        args,
        eval_id=eval_id,
        mode=mode,
        target=target,
        targets_path=targets_file,
        allow_outside_root=allow_outside_root,
        cwd=cwd,
    )


def estimate(
    paths: PathLike | Sequence[PathLike],
    *,
    target: str | PythonTarget | Sequence[str | PythonTarget] | None = None,
    targets_file: PathLike | None = None,
    repeat: int | None = None,
    eval_id: str | None = None,
    answer_tokens: int | None = None,
    allow_outside_root: bool = False,
    cwd: PathLike | None = None,
    judge_samples: int | Mapping[str, Any] | None = None,
) -> Estimate:
    """What running ``paths`` would cost, before anything is sent (``agentv estimate``).

    For each target and judge: the requests, input tokens (about 4 characters a token, over
    the exact messages the run sends), output tokens and US dollars at the run's prices. No
    secret is needed.

    Args:
        paths: Eval files, folders or globs, relative to ``cwd``.
        target: One target for every case, or several (a matrix); default: each case's own.
        targets_file: The targets file (default: found from each eval file).
        repeat: Runs of each case (default: the files' and cases' own ``repeat``, else 1).
        eval_id: Only the case with this id.
        answer_tokens: How long each answer is taken to be, in tokens (default 500).
        allow_outside_root: Accept file references that resolve outside the repository root.
        cwd: Where relative paths start (default: the working directory).
        judge_samples: As the run option: how many times every judge without ``samples``
            of its own is asked (each sample counted; adaptive ones at their ``max``).

    Returns:
        A line per target and judge, with the totals.

    Raises:
        InputError: No eval file can be used.
        ConfigError: ``repeat`` or ``answer_tokens`` is out of range.
    """
    from agentv.evalfile.finder import expand_eval_paths
    from agentv.run.estimate import DEFAULT_ANSWER_TOKENS, estimate_run
    from agentv.targets import TargetPool

    base = Path(cwd).resolve() if cwd is not None else Path.cwd().resolve()
    args = [str(paths)] if isinstance(paths, (str, Path)) else [str(p) for p in paths]
    if answer_tokens is not None and answer_tokens < 0:
        raise ConfigError(f"answer_tokens must be 0 or more (got {answer_tokens})")
    if repeat is not None and repeat < 1:
        raise ConfigError(f"repeat must be at least 1 (got {repeat})")
    pool = TargetPool(cwd=base, targets_path=_under(base, targets_file), preview=True)
    names = _target_names(target, pool)  # PythonTargets join the pool by name
    found = estimate_run(
        expand_eval_paths(args, base),
        cwd=base,
        targets=names,
        pool=pool,
        repeat=repeat,
        eval_id=eval_id,
        answer_tokens=DEFAULT_ANSWER_TOKENS if answer_tokens is None else answer_tokens,
        allow_outside_root=allow_outside_root,
        judge_samples=judge_samples_option(judge_samples),
    )
    if not found.cases and found.errors:
        raise InputError(found.errors[0].message, found.diagnostics)
    return found


def render(
    paths: PathLike | Sequence[PathLike],
    *,
    mode: Literal["lm", "agent"] | None = None,
    target: str | None = None,
    targets_file: PathLike | None = None,
    eval_id: str | None = None,
    allow_outside_root: bool = False,
    cwd: PathLike | None = None,
) -> list[dict[str, Any]]:
    """What ``agentv render --format json`` prints: one view per case.

    Nothing is sent; no secret is needed or shown. ``preview`` returns the problems instead
    of raising them.

    Args:
        paths: Eval files, folders or globs, relative to ``cwd``.
        mode: ``"lm"`` or ``"agent"``: changes only how ``question`` is shown.
        target: The target to build each request for (default: none).
        targets_file: The targets file (default: found from each eval file).
        eval_id: Only the case with this id.
        allow_outside_root: Accept file references that resolve outside the repository root.
        cwd: Where relative paths start (default: the working directory).

    Returns:
        Per case its ``question``, ``guidelines``, ``sent_messages`` exactly as an LM API
        would receive them and, with a target, its ``request``.

    Raises:
        InputError: A file could not be used (every problem in ``diagnostics``).
    """
    result = preview(
        paths,
        mode=mode,
        target=target,
        targets_file=targets_file,
        eval_id=eval_id,
        allow_outside_root=allow_outside_root,
        cwd=cwd,
    )
    if result.failed:
        first = next((d.message for d in result.errors), "nothing could be rendered")
        raise InputError(first, result.diagnostics)
    return result.cases


@dataclass
class Validation(DiagnosticsView):
    """What ``validate`` found.

    Attributes:
        files: A report per file, each with its own ``diagnostics``, ``valid`` and
            ``describe()``.
        diagnostics: Every problem of every file in one list (``errors`` and ``warnings``
            split them).
    """

    files: list[FileReport]
    diagnostics: list[Diagnostic]

    @property
    def valid(self) -> bool:
        """No file has an error (warnings alone keep it valid)."""
        return all(report.valid for report in self.files)


def validate(
    paths: PathLike | Sequence[PathLike],
    *,
    target: str | Sequence[str] | None = None,
    targets_file: PathLike | None = None,
    allow_outside_root: bool = False,
    cwd: PathLike | None = None,
) -> Validation:
    """Check eval, targets and config files without running anything.

    Eval files also get the checks a run makes before sending anything (with the same
    ``target`` and ``targets_file``), so a valid result means a run would start every case.

    Args:
        paths: Files or folders (searched for YAML files), relative to ``cwd``.
        target: The target(s) a run would name (``--target``).
        targets_file: The targets file (default: found from each eval file).
        allow_outside_root: Accept file references that resolve outside the repository root.
        cwd: Where relative paths start (default: the working directory).

    Returns:
        A report per file and every problem with its file, line and fix.
    """
    from agentv.run.validation import validate_paths

    base = Path(cwd).resolve() if cwd is not None else None
    args = [paths] if isinstance(paths, (str, Path)) else list(paths)
    files = [base / Path(p) if base is not None else Path(p) for p in args]
    reports = validate_paths(
        files,
        allow_outside_root=allow_outside_root,
        target=target,
        targets_file=_under(base, targets_file) if base is not None else _path(targets_file),
        cwd=base,
    )
    return Validation(reports, [d for report in reports for d in report.diagnostics])


def _path(value: PathLike | None) -> Path | None:
    return None if value is None else Path(value)


def display_path(path: PathLike | None, cwd: Path | None = None) -> str:
    """``path`` as messages show it.

    Args:
        path: A path (None shows as nothing).
        cwd: The folder paths are shown from (default: the working directory).

    Returns:
        ``path`` relative to ``cwd`` when it lies inside it, else as given.
    """
    from agentv.evalfile.files import display_path as shown

    return shown(path, cwd)


# --- results: reading, comparing, reporting ------------------------------------------------


@dataclass
class ResultsFile(DiagnosticsView):
    """A results file, read (``read_results``).

    Attributes:
        path: The file.
        format: ``"jsonl"`` or ``"yaml"``.
        results: Its results, in file order.
        diagnostics: Every line that is not a result, as a warning with its line number
            (left out of ``results``), and every record read with something put right (a
            null score read as 0).
        superseded: Records left out because a later one is about the same run.
    """

    path: Path
    format: str
    results: list[EvalResult]
    diagnostics: list[Diagnostic]
    superseded: int = 0

    @property
    def summary(self) -> Summary:
        """The statistics of these results, as ``agentv eval`` prints them."""
        from agentv.results.summary import SummaryCollector

        collector = SummaryCollector()
        for result in self.results:
            collector.add(result)
        return collector.summary()


def read_results(path: PathLike, *, every_record: bool = False) -> ResultsFile:
    """Read a results file into ``EvalResult`` models, every field's type checked.

    A line that is not a result never stops it: it is left out and reported, with its line
    number, in ``diagnostics``.

    Args:
        path: The results file: JSON Lines, or YAML for ``.yaml`` / ``.yml``.
        every_record: Every record as written, instead of the latest record of every run (a
            run resumed or rerun has its newest record count).

    Returns:
        The file's results in file order, and the lines left out.

    Raises:
        InputError: The file cannot be read.
    """
    from agentv.results.reader import read_results as reader

    found = reader(Path(path))
    items = found if every_record else found.latest()
    results = [result for _, result in items]
    diagnostics = [*found.diagnostics, *found.notes]
    return ResultsFile(Path(path), found.format, results, diagnostics, found.superseded)


def repeat_label(repeat: int) -> str:
    """A record's ``repeat`` as people count runs: ``#1`` for repeat 0 (what the console,
    the summary, the report and JUnit show)."""
    from agentv.results.record import repeat_label as label

    return label(repeat)


def eval_files_of(results: PathLike) -> list[str]:
    """The eval files a results file's records name, each once, in the order they first
    come: what ``--resume`` and ``--rerun-*`` run when no eval file is given.

    Args:
        results: The results file.

    Returns:
        The ``eval_file`` of its records, as written (a full path).

    Raises:
        InputError: The file is missing or not a regular file.
    """
    from agentv.run.resume import eval_files_named

    return eval_files_named(Path(results))


def compare(
    base: PathLike,
    new: PathLike,
    *,
    min_delta: float = 0.05,
    significance: float | None = None,
    detect: float | None = None,
    pass_threshold: float | None = None,
    cwd: PathLike | None = None,
) -> Comparison:
    """Compare two results files case by case (``agentv compare``).

    Args:
        base: The results before.
        new: The results after.
        min_delta: The smallest change of a case's score that counts (0 to 1).
        significance: A significance level (0.05): the comparison says whether the drop
            is more than noise, and ``Comparison.fails`` holds only when it is
            (docs/trusting-verdicts.md). None: any regressed case fails.
        detect: A drop (0.05) to say how many paired cases would detect; with it alone,
            the significance figures are at 0.05.
        pass_threshold: What an evaluator's score is weighed at, for its flipped
            verdicts, when its record says neither its own threshold nor whether it
            passed (default 0.8).
        cwd: Where relative paths start, and the project whose run store holds the
            people's reviews (default: the working directory).

    Returns:
        Improved, regressed, unchanged, new and missing cases, the mean score change with a
        95% interval, the pass-rate change, each evaluator's flipped verdicts (with the
        people's, from the project's run store) and, with ``significance`` or
        ``detect``, its ``significance``.

    Raises:
        InputError: A line of either file is not a result (its file and line named).
        ConfigError: ``min_delta``, ``significance`` or ``detect`` is out of range.
    """
    from agentv.results.compare import compare_files

    if not 0 <= min_delta <= 1:
        raise ConfigError(f"min_delta must be from 0 to 1 (got {min_delta})")
    if significance is not None and not 0 < significance < 1:
        raise ConfigError(f"significance must be between 0 and 1 (got {significance})")
    if detect is not None and not 0 < detect <= 1:
        raise ConfigError(f"detect must be more than 0 and at most 1 (got {detect})")
    alpha = significance if significance is not None else (0.05 if detect is not None else None)
    if pass_threshold is not None and not 0 <= pass_threshold <= 1:
        raise ConfigError(f"pass_threshold must be from 0 to 1 (got {pass_threshold})")
    # --detect alone sizes the suite; the gate stays the plain one (any regressed case)
    folder = Path(cwd).resolve() if cwd is not None else Path.cwd().resolve()
    comparison = compare_files(
        Path(base) if cwd is None else folder / Path(base),
        Path(new) if cwd is None else folder / Path(new),
        min_delta=min_delta,
        alpha=alpha,
        detect=detect,
        gate=significance is not None,
        pass_threshold=pass_threshold,
    )
    if not any(e.flips for e in comparison.flips):
        return comparison
    from agentv.results.flips import with_labels

    labels = _labels(comparison.sources, folder)
    return replace(comparison, flips=with_labels(comparison.flips, labels))


def report_path(results: Sequence[PathLike]) -> Path:
    """Where ``report`` writes by default.

    Args:
        results: The results files the report shows.

    Returns:
        ``RESULTS.html`` next to a single results file, ``LAST-vs-FIRST.html`` beside the
        last of several.
    """
    from agentv.results.report import default_report_path

    return default_report_path([Path(p) for p in results])


def report(
    results: PathLike | Sequence[PathLike], *, out: PathLike | None = None, title: str | None = None
) -> Report:
    """Write the HTML report of results files: one self-contained file to open offline.

    Args:
        results: A results file, or several (shown side by side).
        out: The HTML file to write (default: ``report_path(results)``).
        title: The page's title (default: ``agentv report:`` and the results files'
            names).

    Returns:
        Where it was written, how many records it shows, and the lines left out.

    Raises:
        InputError: No results file is given, or one cannot be read.
        OSError: ``out`` cannot be written.
    """
    from agentv.results.report import build_report

    files = [Path(results)] if isinstance(results, (str, Path)) else [Path(p) for p in results]
    target = Path(out) if out is not None else report_path(files)
    return build_report(files, target, title=title)


def write_junit(results: PathLike, out: PathLike) -> Path:
    """Write a results file as JUnit XML: a test case per run of a case.

    The file is written whole (replaced only once complete) and well-formed whatever the
    records hold.

    Args:
        results: The results file.
        out: The XML file to write.

    Returns:
        ``out``.

    Raises:
        InputError: A line of ``results`` is not a result.
        SetupError: ``out`` cannot be written.
    """
    from agentv.errors import SetupError
    from agentv.results.junit import junit_xml, read_records
    from agentv.system.outfile import write_whole

    target = Path(out)
    text = junit_xml(read_records(Path(results)))
    try:  # whole or not at all: a CI step never reads half a file
        write_whole(target, text.encode("utf-8"))
    except OSError as exc:
        raise SetupError(f"cannot write JUnit XML to {target}: {exc.strerror or exc}") from None
    return target


def write_summary(summary: Summary, out: PathLike) -> Path:
    """Write a summary's figures as JSON (``--summary-json``), whole.

    Args:
        summary: The figures to write.
        out: The JSON file (replaced only once complete).

    Returns:
        ``out``.

    Raises:
        SetupError: ``out`` cannot be written.
    """
    import json

    from agentv.errors import SetupError
    from agentv.system.outfile import write_whole

    target = Path(out)
    try:
        write_whole(target, (json.dumps(summary.to_dict(), indent=2) + "\n").encode("utf-8"))
    except OSError as exc:
        raise SetupError(f"cannot write the summary to {target}: {exc.strerror or exc}") from None
    return target


def github_annotations(results: PathLike, cwd: Path) -> list[str]:
    """GitHub Actions workflow commands (``::error ...``) for the runs that did not pass.

    Args:
        results: The results file.
        cwd: The folder the commands' file paths are relative to.

    Returns:
        One command per run of a case that did not pass, with its file and line.
    """
    from agentv.results.junit import github_annotations as annotations
    from agentv.results.junit import read_records

    return annotations(read_records(Path(results)), cwd)


# --- regrading ------------------------------------------------------------------------------


@dataclass
class Regrade(DiagnosticsView):
    """What ``regrade`` wrote.

    Records not regraded are copied into ``out`` as they were.

    Attributes:
        out: The new results file.
        summary: Its statistics.
        regraded: Records graded anew.
        prompt_changed: ``(eval_id, target)`` of the records whose case's prompt is not
            what the record says was sent (``agentv eval --resume OUT`` runs them again).
        not_regraded: ``(eval_id, target, why)`` of the other records not regraded.
        diagnostics: Eval files that could not be read, lines of the results file that are
            not results.
        judge_cache_hits: Judge answers reused from ``cache``.
        spent_usd: US dollars the judges' requests cost (the targets were not asked).
    """

    out: Path
    summary: Summary
    regraded: int
    prompt_changed: list[tuple[str, str]]
    not_regraded: list[tuple[str, str, str]]
    diagnostics: list[Diagnostic]
    judge_cache_hits: int = 0
    """Judge answers reused from ``cache``."""
    spent_usd: float = 0.0
    """US dollars the judges' requests cost (the targets were not asked)."""
    flips: tuple[EvaluatorFlips, ...] = ()
    """Per evaluator (and the case's own verdict), the regraded runs whose pass / fail
    verdict changed, each with the person's verdict when the run store holds a review of
    it (docs/trusting-verdicts.md, "What a judge change did")."""


async def aregrade(
    results: PathLike,
    *,
    out: PathLike | None = None,
    eval_paths: PathLike | Sequence[PathLike] | None = None,
    targets_file: PathLike | None = None,
    cache: bool = False,
    pass_threshold: float | None = None,
    agent_timeout: float | None = 120.0,
    allow_outside_root: bool = False,
    cwd: PathLike | None = None,
) -> Regrade:
    """``regrade`` inside a running event loop; the arguments are ``regrade``'s.

    Args:
        results: The results file whose answers are graded again.
        out: The new results file (default: ``RESULTS.regraded.jsonl`` beside it).
        eval_paths: The eval files (default: those the records name).
        targets_file: The targets file (default: found from each eval file).
        cache: Reuse judges' answers stored on disk for identical requests.
        pass_threshold: The lowest passing score, over every config's.
        agent_timeout: Seconds a code evaluator may take (None or 0: no limit).
        allow_outside_root: Accept file references that resolve outside the repository root.
        cwd: Where relative paths start (default: the working directory).

    Returns:
        What was regraded, and what was not and why.

    Raises:
        InputError: The results file holds no result, or cannot be read.
        ConfigError: ``out`` is the results file itself, or an option is out of range.
    """
    from agentv.evalfile.files import find_repo_root
    from agentv.evalfile.finder import expand_eval_paths
    from agentv.system.env import environment_scope, read_environment

    base = Path(cwd).resolve() if cwd is not None else Path.cwd().resolve()
    source = base / Path(results)
    if pass_threshold is not None and not 0 <= pass_threshold <= 1:
        raise ConfigError(f"pass_threshold must be from 0 to 1 (got {pass_threshold})")
    files = None
    if eval_paths is not None:
        args = [eval_paths] if isinstance(eval_paths, (str, Path)) else list(eval_paths)
        files = expand_eval_paths([str(p) for p in args], base)
    first = files[0] if files else _first_eval_file(source)
    env, _ = read_environment(find_repo_root((base / first).parent, base), base)
    with environment_scope(env):  # judges are built and asked with the run's own variables
        return await _regrade(
            source,
            files,
            base,
            out,
            targets_file,
            cache,
            pass_threshold,
            agent_timeout,
            allow_outside_root,
        )


def _first_eval_file(source: Path) -> Path:
    """The eval file the first record of a results file names (else the file itself):
    where its ``.env`` is looked for. ``InputError`` when it cannot be read."""
    from agentv.results.reader import read_results as reader

    for _, result in reader(source):
        return Path(result.eval_file or source)
    return source


def _regrade_out(source: Path, target: Path) -> None:
    """``ConfigError`` unless ``target`` may take a regrade of ``source``: not the file
    itself (by any name: a hard or symbolic link), and nothing there but results."""
    from agentv.results.reader import read_results as reader

    if target.resolve() == source.resolve() or (
        target.exists() and source.exists() and os.path.samefile(target, source)
    ):
        raise ConfigError(
            f"regrade writes a new results file: give an out other than {source} "
            f"({target} is that file)"
        )
    if not target.exists() or (target.is_file() and target.stat().st_size == 0):
        return
    found = None
    if target.is_file():
        with contextlib.suppress(AgentVError):
            found = next(iter(reader(target, strict=True)), None)
    if found is None or (found[1].eval_id is None and found[1].error is None):
        raise ConfigError(
            f"{target} exists and is not a results file: regrade does not replace it; "
            "remove it or give another --out"
        )


async def _regrade(
    source: Path,
    files: list[Path] | None,
    base: Path,
    out: PathLike | None,
    targets_file: PathLike | None,
    cache: bool,
    pass_threshold: float | None,
    agent_timeout: float | None,
    allow_outside_root: bool,
) -> Regrade:
    from agentv.errors import SetupError
    from agentv.evalfile.files import FileStore
    from agentv.evalfile.loader import LoadContext
    from agentv.results.reader import results_format
    from agentv.results.summary import SummaryCollector
    from agentv.results.writers import record_bytes
    from agentv.run.cache import ResponseCache
    from agentv.run.regrade import default_regrade_path, regrade_file
    from agentv.run.sending import RunSettings
    from agentv.system.outfile import replaced_whole
    from agentv.targets import TargetPool

    target = base / Path(out) if out is not None else default_regrade_path(source)
    _regrade_out(source, target)
    settings = RunSettings(
        agent_timeout=agent_timeout if agent_timeout and agent_timeout > 0 else None,
        cache=ResponseCache(base / ".agentv" / "cache") if cache else None,
    )
    if pass_threshold is not None:  # the caller's, over every config's
        settings = replace(settings, pass_threshold=pass_threshold)
    pool = TargetPool(cwd=base, targets_path=_under(base, targets_file))
    context = LoadContext(store=FileStore(cwd=base), allow_outside_root=allow_outside_root)
    # a regraded record names the file whose answer it grades again, as seen from its own
    # file: compare finds the people's reviews of those answers through it
    origin = os.path.relpath(source.resolve(), target.resolve().parent)
    collector = SummaryCollector()
    fmt = results_format(source)
    written = [0]

    def emit(handle: Any, record: dict[str, Any]) -> None:
        handle.write(record_bytes(record, fmt, first=not written[0]))
        written[0] += 1
        collector.add_record(record)

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # whole or not at all: a write that fails, an error, Ctrl-C leave what was there
        with replaced_whole(target) as handle:
            done = await regrade_file(
                source,
                pool,
                settings,
                lambda record: emit(handle, record),
                cwd=base,
                eval_files=files,
                context=context,
                config_thresholds=pass_threshold is None,  # the caller's wins over configs'
                origin=origin,
            )
    except OSError as exc:
        raise SetupError(
            f"cannot write the regraded results to {target}: {exc.strerror or exc} (nothing "
            "was written there: what was there is as it was)"
        ) from None
    flips = done.flips.result()
    if any(e.flips for e in flips):
        from agentv.results.flips import with_labels

        flips = with_labels(flips, _labels([source], base))
    return Regrade(
        out=target,
        summary=collector.summary(),
        regraded=done.regraded,
        prompt_changed=done.prompt_changed,
        not_regraded=done.not_regraded,
        diagnostics=done.diagnostics,
        judge_cache_hits=done.stats.judge_cache_hits,
        spent_usd=done.spent_usd,
        flips=flips,
    )


def _labels(results: Sequence[Path], cwd: Path) -> dict[tuple[str, str, str, int], str]:
    """The people's verdicts of the runs of ``results`` in the project's run store (none
    when it has no store yet: it is never created for this)."""
    from agentv.store.project import store_settings

    path = store_settings(cwd, None).path
    if not path.is_file():
        return {}
    from agentv.store import RunStore

    with RunStore(path, create=False) as store:
        return store.labels(results)


def regrade(
    results: PathLike,
    *,
    out: PathLike | None = None,
    eval_paths: PathLike | Sequence[PathLike] | None = None,
    targets_file: PathLike | None = None,
    cache: bool = False,
    pass_threshold: float | None = None,
    agent_timeout: float | None = 120.0,
    allow_outside_root: bool = False,
    cwd: PathLike | None = None,
) -> Regrade:
    """Grade again the answers a results file recorded, with the evaluators the eval files
    hold now, asking no target.

    The new results file holds every record of ``results``, the regraded ones graded anew
    (judges are asked, through ``cache`` when set; the targets by the names the records
    hold, their judges as a run finds them). Records whose case's prompt changed since,
    live conversations and records without an answer are not regraded: they are copied as
    they were and listed in the returned ``Regrade`` (docs/after-the-run.md, "Regrading").
    Inside a running event loop use ``await aregrade(...)``.

    Args:
        results: The results file whose answers are graded again.
        out: The new results file (default: ``RESULTS.regraded.jsonl`` beside it).
        eval_paths: The eval files (default: those the records name).
        targets_file: The targets file (default: found from each eval file).
        cache: Reuse judges' answers stored on disk for identical requests.
        pass_threshold: The lowest passing score, over every config's.
        agent_timeout: Seconds a code evaluator may take (None or 0: no limit).
        allow_outside_root: Accept file references that resolve outside the repository root.
        cwd: Where relative paths start (default: the working directory).

    Returns:
        What was regraded, and what was not and why.

    Raises:
        RuntimeError: Called inside a running event loop.
        InputError: The results file holds no result, or cannot be read.
        ConfigError: ``out`` is the results file itself, or an option is out of range.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "regrade() was called inside a running event loop; use `await aregrade(...)`"
        )
    return asyncio.run(
        aregrade(
            results,
            out=out,
            eval_paths=eval_paths,
            targets_file=targets_file,
            cache=cache,
            pass_threshold=pass_threshold,
            agent_timeout=agent_timeout,
            allow_outside_root=allow_outside_root,
            cwd=cwd,
        )
    )


# --- run history: the store, reviews, agreement, the workbench -------------------------------


def store_path(store: PathLike | None = None, *, cwd: PathLike | None = None) -> Path:
    """Where the project's run store is: ``store`` when given (relative to ``cwd``), else
    ``run_store`` in the project's ``.agentv/config.yaml``, else ``.agentv/runs.sqlite`` in
    the project (docs/run-history.md)."""
    from agentv.store.project import store_settings

    base = Path(cwd).resolve() if cwd is not None else Path.cwd().resolve()
    return store_settings(base, Path(store) if store is not None else None).path


def open_store(
    store: PathLike | None = None, *, cwd: PathLike | None = None, create: bool = True
) -> RunStore:
    """The project's run store, opened (created when missing, unless ``create`` is
    False: then ``InputError`` says there is none). Close it when done (it is a context
    manager). ``InputError`` when the file is not a run store."""
    from agentv.store import RunStore

    return RunStore(store_path(store, cwd=cwd), create=create)


def runs(
    *,
    store: PathLike | None = None,
    eval_file: str | None = None,
    target: str | None = None,
    since: str | None = None,
    until: str | None = None,
    search: str | None = None,
    limit: int | None = None,
    cwd: PathLike | None = None,
) -> list[StoredRun]:
    """The run history, newest first: every run ``agentv eval`` registered and every
    results file imported (``agentv runs``).

    Args:
        store: The run store (default: the project's, ``.agentv/runs.sqlite``).
        eval_file: Only runs of an eval file whose path contains this text.
        target: Only runs on this target.
        since: Only runs started on this day or later (``YYYY-MM-DD``).
        until: Only runs started on this day or earlier (``YYYY-MM-DD``).
        search: Only runs whose id, command, files, targets or commit contain this text.
        limit: At most this many runs.
        cwd: Where relative paths start (default: the working directory).

    Returns:
        The runs as ``StoredRun`` entries, each with its summary's figures; a run whose
        results file moved or vanished says so (``missing``). No store yet: no runs.

    Raises:
        InputError: The store is not a run store.
    """
    from agentv.store import RunFilter

    path = store_path(store, cwd=cwd)
    if not path.exists():
        return []
    for name, day in (("since", since), ("until", until)):
        if day is not None:
            _check_day(name, day)
    with open_store(path, create=False) as opened:
        return opened.runs(RunFilter(eval_file, target, since, until, search, limit))


def _check_day(name: str, day: str) -> None:
    from datetime import date

    try:
        date.fromisoformat(day)
    except ValueError:
        raise ConfigError(f"{name} is a day written YYYY-MM-DD (got {day!r})") from None


@dataclass
class ImportedRun:
    """A results file indexed into the store: its run's ``id``, whether the run is
    ``new`` (else the run already registered with that file was indexed again), how many
    ``records`` were read and how many lines were not results (``bad_lines``)."""

    path: Path
    id: int
    new: bool
    records: int
    bad_lines: int


def import_runs(
    paths: PathLike | Sequence[PathLike],
    *,
    store: PathLike | None = None,
    cwd: PathLike | None = None,
) -> list[ImportedRun]:
    """Index results files made elsewhere or before into the run store (``agentv runs
    import``); a file already in the store is indexed again.

    Args:
        paths: Results files (JSON Lines or YAML).
        store: The run store (default: the project's).
        cwd: Where relative paths start.

    Returns:
        One ``ImportedRun`` per file.

    Raises:
        InputError: A file is not a results file (the files before it are imported).
    """
    base = Path(cwd).resolve() if cwd is not None else Path.cwd().resolve()
    files = [paths] if isinstance(paths, (str, Path)) else list(paths)
    done = []
    with open_store(store, cwd=base) as opened:
        for file in files:
            path = base / Path(file)
            run_id, new, indexed = opened.import_results(path)
            done.append(ImportedRun(path, run_id, new, indexed.records, indexed.bad_lines))
    return done


def calibrate(
    *, store: PathLike | None = None, run: int | None = None, cwd: PathLike | None = None
) -> Calibration:
    """How far each evaluator agrees with people (``agentv calibrate``): over the reviewed
    runs of cases, per evaluator (judges first) the number of labels, the share of
    agreement, Cohen's kappa and the confusion matrix, with a warning below 20 labels.

    Args:
        store: The run store (default: the project's).
        run: Only the reviews of this run (its id in the store).
        cwd: Where relative paths start.

    Returns:
        A ``Calibration`` (empty when there is no store or no review yet).
    """
    from agentv.store import Calibration

    path = store_path(store, cwd=cwd)
    if not path.exists():
        return Calibration((), 0)
    with open_store(path, create=False) as opened:
        return opened.calibrate(run)


def reviewer_name(cwd: PathLike | None = None) -> str | None:
    """Who reviews, by default: git's ``user.name`` (None when unset)."""
    from agentv.store.project import git_user

    return git_user(Path(cwd) if cwd is not None else Path.cwd())


def export_reviews(
    out: PathLike | None = None,
    *,
    store: PathLike | None = None,
    run: int | None = None,
    cwd: PathLike | None = None,
) -> list[str]:
    """Every review of the store (``run``: of one run) as lines of JSON, oldest first;
    written to ``out`` too when given (whole: replaced only once complete)."""
    path = store_path(store, cwd=cwd)
    if not path.exists():
        lines: list[str] = []
    else:
        with open_store(path, create=False) as opened:
            lines = list(opened.export_reviews(run))
    if out is not None:
        from agentv.errors import SetupError
        from agentv.system.outfile import write_whole

        target = Path(out)
        try:
            write_whole(target, "".join(line + "\n" for line in lines).encode("utf-8"))
        except OSError as exc:
            raise SetupError(f"cannot write reviews to {target}: {exc.strerror or exc}") from None
    return lines


def import_reviews(
    path: PathLike,
    *,
    store: PathLike | None = None,
    reviewer: str | None = None,
    cwd: PathLike | None = None,
) -> ImportedReviews:
    """Add the reviews of a JSON Lines file (as ``export_reviews`` writes them, or labels
    made elsewhere naming a run by its ``run`` uid or ``results`` file and a case by its
    ``case_key`` or ``dataset``, ``eval_id`` and ``target``). Lines that are not reviews,
    or name no run or case of the store, are reported in ``diagnostics`` and left out;
    ``reviewer`` stands for a line's own when it has none."""
    from agentv.system.readfile import open_input

    base = Path(cwd).resolve() if cwd is not None else Path.cwd().resolve()
    source = base / Path(path)
    try:
        with open_input(source) as handle:
            text = handle.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read reviews from {source}: {exc}") from None
    with open_store(store, cwd=base) as opened:
        return opened.import_reviews(source, text.splitlines(), reviewer=reviewer)


def workbench(
    *,
    store: PathLike | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    token: str | None = None,
    reviewer: str | None = None,
    cwd: PathLike | None = None,
) -> Workbench:
    """The local web workbench over the run store (``agentv view``), bound and ready to
    serve (``Workbench.serve()`` blocks until Ctrl-C).

    Args:
        store: The run store (default: the project's; created when missing).
        host: The address to listen on: 127.0.0.1 unless another is asked for, which
            then needs an access token.
        port: The port (0: a free one).
        token: The access token another host than the loopback asks for (default: one is
            generated); ignored on 127.0.0.1.
        reviewer: The name reviews are recorded under (default: git's ``user.name``).
        cwd: Where relative paths start.

    Raises:
        SetupError: The ``view`` extra is not installed, or the address cannot be bound.
    """
    try:
        from agentv.view.server import Workbench as Server
    except ImportError as exc:
        from agentv.errors import SetupError

        missing = (exc.name or "starlette").split(".")[0]
        from agentv.system.extras import install_line

        raise SetupError(
            f"agentv view needs the view extra ({missing} is missing): {install_line('view')}"
        ) from None
    base = Path(cwd).resolve() if cwd is not None else Path.cwd().resolve()
    return Server.bind(
        store_path(store, cwd=base),
        host=host,
        port=port,
        token=token,
        reviewer=reviewer if reviewer is not None else reviewer_name(base),
        cwd=base,
    )


@dataclass
class RunRegistration:
    """A run registered in the store when it started (``register_run``): ``finish()``
    completes its entry when it ends (its results file indexed, its figures filled)."""

    store: Path
    run_id: int

    def finish(self, *, interrupted: bool = False) -> None:
        """Complete the run's entry. ``AgentVError`` when the store cannot be written or
        the results file read: the run itself is not affected."""
        with open_store(self.store, create=False) as opened:
            opened.finish_run(self.run_id, interrupted=interrupted)


def register_run(
    prepared: PreparedRun,
    *,
    results: PathLike,
    command: Sequence[str],
    store: PathLike | None = None,
    cwd: PathLike | None = None,
) -> RunRegistration | None:
    """Register a run that starts in the project's run store (``agentv eval`` does, at its
    start): when, the command line, the git commit and whether the tree was dirty, the eval
    files with their content hashes, targets, repeats and the results file. A run that adds
    to a results file (``resume``, a rerun into it) updates the run that wrote the file.
    None when registration is off (``register_runs: false`` in the project's
    ``.agentv/config.yaml``; ``store`` given turns it on). ``AgentVError`` when the store
    cannot be written."""
    from agentv.store import RunStart
    from agentv.store.project import store_settings

    base = Path(cwd).resolve() if cwd is not None else Path.cwd().resolve()
    settings = store_settings(base, Path(store) if store is not None else None)
    if not settings.register and store is None:
        return None
    plan = prepared._plan
    start = RunStart(
        command=list(command),
        cwd=base,
        eval_files=[loaded.path for loaded in plan.files],
        targets=[t.name for t in plan.targets()],
        results_path=base / Path(results),
        repeats=plan.repeat,
        pass_threshold=prepared.pass_threshold,
        appending=prepared.append,
    )
    with open_store(settings.path, cwd=base) as opened:
        return RunRegistration(opened.path, opened.start_run(start))
