"""Before a run: which eval files, which cases, and which target each case runs on.

Which target a case runs on is ``agentv.targets.choose_target``'s decision (shared with
``agentv render``); the ``TargetPool`` builds each target once per run (one SDK client,
one healthcheck) and shares it between every case using it. ``plan_run`` returns the plan
finished: its pass thresholds, what ``--resume`` / ``--rerun-*`` leave out and its totals
are decided there, and nothing changes the ``Plan`` afterwards (it is frozen).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentv.cases import EvalCase, InvalidCase
from agentv.errors import ConfigError, Diagnostic, InputError
from agentv.evalfile.files import FileStore, display_path
from agentv.evalfile.loader import (
    LoadContext,
    LoadedEvalFile,
    iter_cases,
    iter_entries,
    load_eval_file,
)
from agentv.evaluators.grading import needs_judge
from agentv.prompts.builder import PromptSettings, build_prompt
from agentv.results.record import DEFAULT_PASS_THRESHOLD, CaseKey, RunKey
from agentv.run.resume import (
    RETRIED,
    ResultsState,
    Unfinished,
    plan_digest,
    prompt_changed,
    workspace_changed,
)
from agentv.targets import DEFAULT_TARGET, RunTarget, TargetPool, choose_target


@dataclass(slots=True)
class CaseJob:
    """One run of a case on one target (``repeat`` counts the runs of that pair from 0)."""

    case: EvalCase
    target: RunTarget
    pass_threshold: float | None = None  # the case's config's, else the run's (None: the run's)
    repeat: int = 0
    user: RunTarget | None = None  # the target playing the case's simulated user
    repeats: int = 1  # the runs of that pair the plan holds (how the run is numbered)
    #: a run of ``--repeat auto``: its rule, threshold and why it is made (its record's
    #: ``auto_repeat``; ``agentv.run.repeats``)
    auto: dict[str, Any] | None = None
    #: a conversation the budget stopped part-way, which ``--resume`` goes on from
    resumed: Unfinished | None = None
    #: what ran before the case's workspace was made, once for its file (``before_all``),
    #: as its record keeps it
    setup: tuple[dict[str, Any], ...] = ()


@dataclass(slots=True)
class InvalidJob:
    """A case that cannot run: it gets an ``invalid`` result, nothing is sent for it."""

    invalid: InvalidCase
    target: str | None = None
    repeat: int | None = None


#: a file with more cases than this is not held in memory: its cases are checked when the
#: run is planned (the file's one reading) and wait in a spool on disk, from which they come
#: back one at a time while they run
KEEP_LIMIT = 20_000


@dataclass(frozen=True, eq=False)
class Lane:
    """Everything one target runs, in file order; ``jobs()`` streams it. Each target has
    its own lane, so a slow target never holds up the others' cases."""

    plan: Plan
    target: RunTarget | None  # None: the cases that could not be loaded
    name: str | None
    #: where the jobs come from instead of the plan's files (``--repeat auto``'s rounds)
    source: Callable[[], Iterator[CaseJob | InvalidJob]] | None = None

    def jobs(self) -> Iterator[CaseJob | InvalidJob]:
        """This lane's jobs, one at a time (large files' cases come from their spool)."""
        if self.source is not None:
            return self.source()
        return self.plan._lane_jobs(self)


@dataclass
class _Memo:
    """What a plan learns once and looks up after: targets and judges that cannot be used,
    simulated users' targets, and the decision for each resumed run."""

    decided: dict[RunKey, bool] = field(default_factory=dict)
    #: the runs to go on from where the budget stopped them (their plan unchanged)
    unfinished: dict[RunKey, Unfinished] = field(default_factory=dict)
    changed_since: int = 0  # resumed runs whose prompt changed since their record
    retried: int = 0  # resumed runs run again because their latest record was an error
    #: resumed runs whose latest record is an error, left as they are (no ``retry_errors``):
    #: their key, the repeat None for a case the file has one run of
    errors_left: list[tuple[str, str, str, int | None]] = field(default_factory=list)
    #: the (dataset, eval id, target) of which the resumed file has more than one run
    repeated: set[CaseKey] | None = None
    taken_up: int = 0  # resumed conversations going on from where the budget stopped them
    #: (eval file, target name) -> why that target, or its judge, cannot be used
    broken_targets: dict[tuple[Path, str], str] = field(default_factory=dict)
    broken_judges: dict[int, str] = field(default_factory=dict)
    #: (eval file, name) -> the target playing simulated users, or why it cannot
    user_targets: dict[tuple[Path, str], tuple[RunTarget | None, str | None]] = field(
        default_factory=dict
    )


@dataclass(frozen=True, eq=False)
class Plan:
    """Everything a run will do, decided before the first request.

    Every case has been checked, and every target and judge it needs built. Each case runs
    on its target (``choose_target``), or on every target of a matrix (several
    ``--target``), ``repeat`` times. ``lanes()`` hands the work out per target, one job at a
    time (large files' cases from their spool on disk), so a run holds only the cases in
    flight. A case whose own target or judge cannot be used is an ``InvalidJob``; a target
    the run itself names (``--target``, else ``default``) failing stops the run instead.
    ``plan_run`` makes it whole; nothing changes it after.
    """

    files: tuple[LoadedEvalFile, ...]
    diagnostics: tuple[Diagnostic, ...]
    pool: TargetPool
    cli_targets: tuple[str, ...] = ()  # the matrix; empty: each case's own
    repeat: int | None = None  # runs of every case (the flag); None: the files' and cases'
    eval_id: str | None = None
    context: LoadContext | None = None
    unusable_files: tuple[Path, ...] = ()
    #: the run's pass threshold: the caller's, which wins over every config's
    #: (``config_thresholds`` False), else the default where no config sets one
    pass_threshold: float = DEFAULT_PASS_THRESHOLD
    config_thresholds: bool = True
    #: ``--resume``: the results file's runs (those recorded with the same prompt are not
    #: run again; with ``retry_errors`` those whose latest record is an error or invalid
    #: are); ``--rerun-*``: the runs to run again, by case and target (none other runs)
    resume: ResultsState | None = None
    retry_errors: bool = False
    rerun: Mapping[CaseKey, frozenset[int]] | None = None
    #: resuming ``--repeat auto``: the runs after a case's first that the file has no
    #: record of (or a ``skipped`` one) are ``agentv.run.repeats``' to decide, not the plan's
    auto_resume: bool = False
    planned: int = 0  # runs the files hold (every case, target and repeat)
    total: int = 0  # runs the run sends: ``planned`` less what resume or rerun leave out
    changed_since: int = 0  # resumed runs whose prompt changed since their record
    retried: int = 0  # resumed runs run again because their latest record was an error
    #: resumed runs whose latest record is an error, not run again (no ``retry_errors``):
    #: (dataset, eval id, target, repeat), the repeat None for a case run once
    errors_left: tuple[tuple[str, str, str, int | None], ...] = ()
    taken_up: int = 0  # resumed conversations going on from where the budget stopped them
    thresholds: frozenset[float] = frozenset()  # the pass thresholds in force
    _memo: _Memo = field(default_factory=_Memo, repr=False, compare=False)

    @property
    def invalid_count(self) -> int:
        """Cases known to be invalid when the plan was made (their targets aside)."""
        return sum(len(loaded.invalid) for loaded in self.files)

    def simulated(self) -> Iterator[tuple[str, str]]:
        """The dataset and id of each case of the plan with a simulated user (a large
        file's from its spool)."""
        for loaded in self.files:
            for case in iter_cases(loaded, eval_id=self.eval_id, context=self.context):
                if case.user is not None:
                    yield case.dataset, case.id

    @property
    def cli_target(self) -> str | None:
        """The one target every case runs on, when ``--target`` named exactly one."""
        return self.cli_targets[0] if len(self.cli_targets) == 1 else None

    def _names(self, loaded: LoadedEvalFile, case_target: str | None) -> list[str]:
        if self.cli_targets:
            return list(self.cli_targets)
        return [choose_target(None, case_target, loaded.target)]

    def repeats(self, loaded: LoadedEvalFile, case_repeat: int | None) -> int:
        """Runs of a case: the flag, else the case's `repeat`, else the file's, else 1."""
        return self.repeat or case_repeat or loaded.repeat or 1

    def target_for(self, loaded: LoadedEvalFile, name: str) -> RunTarget:
        """The run target called ``name`` for the cases of ``loaded``."""
        return self.pool.target(loaded.path, loaded.repo_root, name)

    def check_targets(self, *, stop: bool = True) -> None:
        """Build every target and judge now, before anything is sent. A target the run
        names itself failing raises ``ConfigError`` (unless not ``stop``: ``validate`` wants
        every problem); one only some cases name marks them."""
        for loaded in self.files:
            for case_target in loaded.case_targets:
                for name in self._names(loaded, case_target):
                    try:
                        target = self.target_for(loaded, name)
                    except ConfigError as exc:
                        if stop and (self.cli_targets or name == DEFAULT_TARGET):
                            raise
                        self._memo.broken_targets[(loaded.path, name)] = str(exc)
                        continue
                    if id(target) not in self._memo.broken_judges:
                        try:
                            self.pool.check_judge(target)
                        except ConfigError as exc:
                            self._memo.broken_judges[id(target)] = str(exc)

    def _user_target(
        self, loaded: LoadedEvalFile, name: str
    ) -> tuple[RunTarget | None, str | None]:
        """The target playing simulated users named ``name`` for ``loaded``'s cases, or
        why it cannot (asked once per targets file and name)."""
        key = (loaded.path, name)
        found = self._memo.user_targets.get(key)
        if found is None:
            try:
                target = self.target_for(loaded, name)
            except ConfigError as exc:
                found = (None, f"its simulated user's target: {exc}")
            else:
                if target.provider.is_agent:
                    found = (
                        None,
                        f"its simulated user's target {name!r} is an agent "
                        f"({target.kind}); a simulated user needs a model: an LM API, "
                        "a command line or the mock",
                    )
                else:
                    found = (target, None)
            self._memo.user_targets[key] = found
        return found

    def user_targets(self) -> list[RunTarget]:
        """Every usable target that plays a simulated user in this plan."""
        seen: dict[int, RunTarget] = {}
        for loaded in self.files:
            for name in sorted(loaded.user_targets):
                target, _ = self._user_target(loaded, name)
                if target is not None:
                    seen.setdefault(id(target), target)
        return list(seen.values())

    def target_problems(self) -> list[Diagnostic]:
        """For ``agentv validate``, after ``check_targets(stop=False)``: per eval file and
        reason, an error at the first case that cannot run because its target or judge
        cannot be used, counting the cases it holds back. Empty when every case can run."""
        out: list[Diagnostic] = []
        for loaded in self.files:
            names = {n for t in loaded.case_targets for n in self._names(loaded, t)}
            broken = {n for n in names if (loaded.path, n) in self._memo.broken_targets}
            judged = {
                n: self._memo.broken_judges[id(t)]
                for n in names - broken
                if id(t := self.target_for(loaded, n)) in self._memo.broken_judges
            }
            users = {
                n: problem
                for n in loaded.user_targets
                if (problem := self._user_target(loaded, n)[1]) is not None
            }
            if not broken and not judged and not users:
                continue  # every case of the file can run: no need to read them
            found: dict[str, tuple[EvalCase, int]] = {}  # reason -> (first case, cases)
            for case in iter_cases(loaded, eval_id=self.eval_id, context=self.context):
                for name in self._names(loaded, case.target):
                    reason = self._memo.broken_targets.get((loaded.path, name))
                    if reason is None and name in judged and needs_judge(case):
                        reason = judged[name]
                    if reason is None and case.user is not None:
                        reason = users.get(case.user.target)
                    if reason is not None:
                        first, count = found.get(reason, (case, 0))
                        found[reason] = (first, count + 1)
            for reason, (case, count) in found.items():
                cases = (
                    f"case {case.id!r} cannot run"
                    if count == 1
                    else (f"{count} cases cannot run (the first is {case.id!r})")
                )
                named = case.user.target if case.user is not None else None
                named = named if reason in users.values() else case.target or loaded.target
                line = None if self.cli_targets else _target_line(loaded.path, case, named)
                out.append(
                    Diagnostic(
                        loaded.path,
                        f"{cases}: {reason}",
                        line=line or case.line,
                        hint="`agentv eval` would record them as invalid; fix the target "
                        "or pick another one",
                    )
                )
        return out

    def targets(self) -> list[RunTarget]:
        """Every usable target some case of this plan runs on, in the order first named."""
        seen: dict[int, RunTarget] = {}
        for loaded in self.files:
            for case_target in sorted(loaded.case_targets, key=lambda t: t or ""):
                for name in self._names(loaded, case_target):
                    if (loaded.path, name) not in self._memo.broken_targets:
                        t = self.target_for(loaded, name)
                        seen.setdefault(id(t), t)
        if self.cli_targets:  # a matrix keeps the order the targets were given in
            order = {name: i for i, name in enumerate(self.cli_targets)}
            return sorted(seen.values(), key=lambda t: order.get(t.configured_name, 0))
        return list(seen.values())

    def lanes(self) -> list[Lane]:
        """One lane per usable target, plus one for the cases that could not be loaded."""
        lanes = [Lane(self, None, None)]
        lanes += [Lane(self, t, t.configured_name) for t in self.targets()]
        broken = {name for (_, name) in self._memo.broken_targets}
        lanes += [Lane(self, None, name) for name in sorted(broken)]
        return lanes

    def jobs(self) -> Iterator[CaseJob | InvalidJob]:
        """Every job of every lane, lane after lane."""
        for lane in self.lanes():
            yield from lane.jobs()

    def _lane_jobs(self, lane: Lane) -> Iterator[CaseJob | InvalidJob]:
        for loaded in self.files:
            if lane.target is None and lane.name is None:
                yield from self._load_failures(loaded)
                continue
            names = {n for t in loaded.case_targets for n in self._names(loaded, t)}
            if lane.name not in names:
                continue
            broken = self._memo.broken_targets.get((loaded.path, lane.name))  # type: ignore[arg-type]
            if lane.target is None and broken is None:
                continue  # usable for this file: another lane runs its cases
            if lane.target is not None and (
                broken is not None or self.target_for(loaded, lane.name) is not lane.target  # type: ignore[arg-type]
            ):
                continue  # another targets file's target of the same name
            threshold = self._pass_threshold(loaded)
            # the same for every case: looked up once per file, not per case
            in_lane = {t: lane.name in self._names(loaded, t) for t in loaded.case_targets}
            broken_judge = (
                self._memo.broken_judges.get(id(lane.target)) if lane.target is not None else None
            )
            filtered = self.resume is not None or self.rerun is not None
            for case in iter_entries(loaded):
                if isinstance(case, InvalidCase):  # a data row that cannot be used
                    yield from self._invalid_jobs(loaded, case, lane.name)  # type: ignore[arg-type]
                    continue
                found = in_lane.get(case.target)
                if found is None:
                    found = in_lane[case.target] = lane.name in self._names(loaded, case.target)
                if not found:
                    continue
                name: str = lane.name  # type: ignore[assignment]
                runs = self._runs((case.dataset, case.id, name), loaded, case.repeat)
                reason = broken
                if reason is None and broken_judge is not None and needs_judge(case):
                    reason = broken_judge
                user = None
                if reason is None and case.user is not None:
                    user, reason = self._user_target(loaded, case.user.target)
                if reason is None and case.workspace is not None:
                    reason = _no_workspace(lane.target)
                if reason is not None:
                    invalid = _invalid(loaded, case, reason)
                    for r in runs:
                        if not filtered or self._wanted((case.dataset, case.id, name, r)):
                            yield InvalidJob(invalid, name, r)
                    continue
                assert lane.target is not None
                if not filtered and len(runs) == 1:
                    yield CaseJob(case, lane.target, threshold, 0, user)
                    continue
                count = max(len(runs), self.repeats(loaded, case.repeat))
                for r in runs:
                    key = (case.dataset, case.id, name, r)
                    if not filtered or self._wanted(key, case, lane.target):
                        resumed = self._memo.unfinished.get(key)
                        yield CaseJob(case, lane.target, threshold, r, user, count, resumed=resumed)

    def _load_failures(self, loaded: LoadedEvalFile) -> Iterator[InvalidJob]:
        """The cases of ``loaded`` that could not be loaded: a result for each run they were
        written for, on each target they would have run on."""
        for invalid in loaded.invalid:
            for name in self._names(loaded, invalid.target):
                yield from self._invalid_jobs(loaded, invalid, name)

    def _invalid_jobs(
        self, loaded: LoadedEvalFile, invalid: InvalidCase, name: str
    ) -> Iterator[InvalidJob]:
        """A case that cannot run, on target ``name``: a result for each of its runs."""
        if name not in self._names(loaded, invalid.target):
            return
        if invalid.id is not None:
            case = invalid.id
        elif invalid.row is not None:
            case = f"#row{invalid.row.number}"
        else:
            case = f"#{invalid.line or 0}"
        for r in self._runs((invalid.dataset, case, name), loaded, invalid.repeat):
            key = (invalid.dataset, case, name, r)
            if (self.resume is None and self.rerun is None) or self._wanted(key):
                yield InvalidJob(invalid, name, r)

    def _runs(
        self, key: CaseKey, loaded: LoadedEvalFile, case_repeat: int | None
    ) -> range | list[int]:
        """Which runs (repeats) of a case on a target this plan holds: all of them, or for a
        rerun the ones the results file picked (whatever ``--repeat`` says now)."""
        if self.rerun is not None:
            return sorted(self.rerun.get(key, ()))
        return range(self.repeats(loaded, case_repeat))

    def _wanted(
        self, key: RunKey, case: EvalCase | None = None, target: RunTarget | None = None
    ) -> bool:
        """Whether run ``key`` of a case is to run: every run, unless resuming (the runs the
        results file has no record of, or whose prompt changed since, or with
        ``retry_errors`` whose latest record is an error) or rerunning (only the picked
        runs). ``case`` and ``target``: a case that can run, whose prompt is compared."""
        if self.rerun is not None:
            return key[3] in self.rerun.get(key[:3], ())
        if self.resume is None:
            return True
        memo = self._memo
        decided = memo.decided.get(key)
        if decided is None:
            previous = self.resume.runs.get(key)
            if self.auto_resume and key[3] and (previous is None or previous.status == "skipped"):
                memo.decided[key] = False  # whether it runs is the repeats' rule's
                return False
            # a run the budget left unsent (``skipped``) has not run yet
            decided = previous is None or previous.status == "skipped"
            if previous is not None and self.retry_errors and previous.status in RETRIED:
                decided = True
                memo.retried += 1
            elif previous is not None and case is not None and target is not None:
                if case.live:  # a conversation: what it will send, whatever the answers
                    changed = previous.plan_digest != plan_digest(case)
                else:
                    prompt = build_prompt(case, PromptSettings.of(target.provider))
                    changed = prompt_changed(previous, prompt, is_agent=target.provider.is_agent)
                changed = changed or workspace_changed(previous, case)
                if changed:
                    decided = True
                    memo.changed_since += 1
                elif previous.unfinished is not None and case.live:
                    memo.unfinished[key] = previous.unfinished
                    memo.taken_up += 1
            if not decided and previous is not None and previous.status in RETRIED:
                if memo.repeated is None:
                    memo.repeated = {k[:3] for k in self.resume.runs if k[3]}
                several = key[3] or key[:3] in memo.repeated
                memo.errors_left.append((*key[:3], key[3] if several else None))
            memo.decided[key] = decided
        return decided

    def _pass_threshold(self, loaded: LoadedEvalFile) -> float:
        """The pass threshold of ``loaded``'s cases: its config's, else the run's."""
        if self.context is None or not self.config_thresholds:
            return self.pass_threshold
        config, _ = self.context.guidelines.for_eval_dir(loaded.path.parent, loaded.repo_root)
        return self.pass_threshold if config.pass_threshold is None else config.pass_threshold

    def _count(self, loaded: LoadedEvalFile) -> int:
        """Jobs the file's cases make: runs times targets, those that could not be loaded
        included."""
        targets = max(1, len(self.cli_targets))
        runs = sum(count * self.repeats(loaded, r) for r, count in loaded.case_repeats.items())
        failed = sum(self.repeats(loaded, invalid.repeat) for invalid in loaded.invalid)
        return (runs + failed) * targets


def _no_workspace(target: RunTarget | None) -> str | None:
    """Why ``target`` cannot run a case that has a workspace (None: it can)."""
    if target is None or target.provider.works_in_workspace:
        return None
    return (
        f"target {target.name!r} ({target.kind}) cannot work in the case's workspace: only "
        "an agent or a command line runs in a folder (cli, codex, claude-code)"
    )


def _invalid(loaded: LoadedEvalFile, case: EvalCase, reason: str) -> InvalidCase:
    diag = Diagnostic(loaded.path, reason, line=case.line)
    return InvalidCase(loaded.path, case.dataset, -1, case.id, case.line, (diag,))


def _target_line(path: Path, case: EvalCase, name: str | None) -> int | None:
    """The line where ``target: NAME`` is written for ``case``: in the case itself (its
    ``execution``, its simulated ``user``), else at the top of the file (``target:``,
    ``user_target:``, ``execution:``). None when it cannot be told (a data row's case)."""
    if not name:
        return None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    said = re.compile(rf"""\b(user_)?target:\s*["']?{re.escape(name)}["']?\s*(?:[,}}#]|$)""")
    start = (case.line or 1) - 1
    item = lines[start] if 0 <= start < len(lines) else ""
    indent = len(item) - len(item.lstrip(" -"))
    for number in range(start, len(lines)):
        text = lines[number]
        body = text.lstrip(" ")
        if number > start and body.startswith("- ") and len(text) - len(body) + 2 <= indent:
            break  # the next case
        if said.search(text):
            return number + 1
    for number, text in enumerate(lines):
        if text.startswith("evalcases:"):
            break
        if said.search(text):
            return number + 1
    return None


def same_cases(files: list[LoadedEvalFile]) -> list[Diagnostic]:
    """An error at every case whose (dataset, id) an earlier file of the run has too.

    Results, ``--resume``, ``compare``, ``--eval-id`` and ``regrade`` name a case by its
    dataset and id: two cases with the same would be taken for runs of one case (their
    records mixed, one's failure hidden by the other's pass), as two cases with one id in
    a file would. Files of distinct datasets (each file's own, by default) are not read.
    """
    by_dataset: dict[str, list[LoadedEvalFile]] = {}
    for loaded in files:
        by_dataset.setdefault(loaded.dataset, []).append(loaded)
    out: list[Diagnostic] = []
    for dataset, group in by_dataset.items():
        if len(group) < 2:
            continue
        first: dict[str, tuple[Path, int | None]] = {}
        for loaded in group:
            ids = [(case.id, case.line) for case in iter_cases(loaded)]
            ids += [(bad.id, bad.line) for bad in loaded.invalid if bad.id is not None]
            for case_id, line in ids:
                where = first.setdefault(case_id, (loaded.path, line))
                if where[0] == loaded.path:
                    continue  # its own file says so itself (an id used twice)
                at = f" (line {where[1]})" if where[1] is not None else ""
                out.append(
                    Diagnostic(
                        loaded.path,
                        f"case {case_id!r} of dataset {dataset!r} is also in "
                        f"{display_path(where[0])}{at}: results and --resume name a case "
                        "by its dataset and id, so their runs would be taken for one case's",
                        line=line,
                        hint="give one of the files its own `dataset:`, or rename one of the cases",
                    )
                )
    return out


def plan_run(
    eval_files: list[Path],
    pool: TargetPool,
    *,
    cli_target: str | list[str] | None = None,
    repeat: int | None = None,
    eval_id: str | None = None,
    context: LoadContext | None = None,
    keep_limit: int | None = KEEP_LIMIT,
    pass_threshold: float | None = None,
    resume: ResultsState | None = None,
    retry_errors: bool = False,
    rerun: Mapping[CaseKey, set[int] | frozenset[int]] | None = None,
    auto_resume: bool = False,
) -> Plan:
    """Load and check every eval file and build every target and judge: the whole plan.

    A case with errors becomes an invalid job (its diagnostics are kept for printing); a
    file that cannot be used at all loses its own cases only (``unusable_files``).

    Args:
        eval_files: The eval files, in the order their cases run.
        pool: Builds each target once per run.
        cli_target: One target for every case, or several (a matrix); None: each case's own.
        repeat: Runs of every case (None: the files' and cases' own ``repeat``, else 1).
        eval_id: Only the case with this id.
        context: How files are read (default: from ``pool``'s folder).
        keep_limit: Cases of a file held in memory before they go to a spool on disk.
        pass_threshold: The caller's pass threshold, over every config's (None: each
            file's config's, else the default).
        resume: A results file's runs (``--resume``): those it has a record of, made with
            the same prompt, are left out.
        retry_errors: With ``resume``: run again the runs whose latest record is an error.
        rerun: Only these runs (by case and target, their repeats), ``--rerun-*``.
        auto_resume: With ``resume``, of a ``--repeat auto`` run: a case's runs after its
            first that the file has no record of are left to the repeats' rule.

    Returns:
        The finished plan (its ``total`` counts the runs it sends).

    Raises:
        ConfigError: A target the run itself names cannot be used.
    """
    ctx = context or LoadContext(store=FileStore(cwd=pool.cwd))
    names = [cli_target] if isinstance(cli_target, str) else list(cli_target or [])
    files: list[LoadedEvalFile] = []
    diagnostics: list[Diagnostic] = []
    unusable: list[Path] = []
    for path in eval_files:
        try:
            loaded = load_eval_file(path, eval_id=eval_id, context=ctx, keep_limit=keep_limit)
        except InputError as exc:  # this file only: the others still run
            diagnostics.extend(exc.diagnostics or [Diagnostic(path, str(exc))])
            unusable.append(path)
            continue
        files.append(loaded)
        diagnostics.extend(loaded.diagnostics)
    twice = same_cases(files)
    if twice:  # before any target is built: nothing runs
        raise InputError("the same case is in two eval files", twice)
    plan = Plan(
        files=tuple(files),
        diagnostics=(),
        pool=pool,
        cli_targets=tuple(dict.fromkeys(names)),
        repeat=repeat,
        eval_id=eval_id,
        context=ctx,
        unusable_files=tuple(unusable),
        pass_threshold=DEFAULT_PASS_THRESHOLD if pass_threshold is None else pass_threshold,
        config_thresholds=pass_threshold is None,
        resume=resume,
        retry_errors=retry_errors,
        rerun=None if rerun is None else {k: frozenset(v) for k, v in rerun.items()},
        auto_resume=auto_resume,
    )
    planned = sum(plan._count(loaded) for loaded in plan.files)
    plan.check_targets()  # every target and judge now: nothing is spent on a broken one
    diagnostics.extend(pool.diagnostics)
    total = planned
    if resume is not None or rerun is not None:  # what is left: every job, decided once
        total = sum(1 for lane in plan.lanes() for _ in lane.jobs())
    found = {plan._pass_threshold(loaded) for loaded in plan.files}
    return replace(
        plan,
        diagnostics=tuple(diagnostics),
        planned=planned,
        total=total,
        changed_since=plan._memo.changed_since,
        retried=plan._memo.retried,
        errors_left=tuple(plan._memo.errors_left),
        taken_up=plan._memo.taken_up,
        thresholds=frozenset(found or {plan.pass_threshold}),
    )
