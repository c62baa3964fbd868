"""Before a run: which eval files, which cases, and which target each case runs on.

Which target a case runs on is ``agentv.targets.choose_target``'s decision (shared with
``agentv render``); the ``TargetRegistry`` builds each target once per run (one SDK client,
one healthcheck) and shares it between every case using it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from agentv.cases import EvalCase, InvalidCase
from agentv.errors import ConfigError, Diagnostic, InputError
from agentv.evalfile.files import FileStore
from agentv.evalfile.loader import LoadContext, LoadedEvalFile, iter_cases, load_eval_file
from agentv.evaluators.grading import needs_judge
from agentv.targets import DEFAULT_TARGET, RunTarget, TargetRegistry, choose_target


@dataclass(slots=True)
class CaseJob:
    """One case and the target it runs on."""

    case: EvalCase
    target: RunTarget
    pass_threshold: float | None = None  # the case's config's, else the run's


@dataclass(slots=True)
class InvalidJob:
    """A case that cannot run: it gets an ``invalid`` result, nothing is sent for it."""

    invalid: InvalidCase
    target: str | None = None


#: a file with more cases than this is not held in memory: its cases are checked when the
#: run is planned, then built again one at a time while they run
KEEP_LIMIT = 20_000


@dataclass
class Plan:
    """Everything a run will do, decided before the first request.

    Every case has been checked, and every target and judge it needs built; ``jobs()``
    hands the cases out one at a time (re-reading large files), so a run holds only the
    cases in flight. A case whose own target or judge cannot be used is an ``InvalidJob``;
    the run's own target (``--target``, else ``default``) failing stops the run instead.
    """

    files: list[LoadedEvalFile]
    diagnostics: list[Diagnostic]
    registry: TargetRegistry
    total: int = 0
    cli_target: str | None = None
    eval_id: str | None = None
    context: LoadContext | None = None
    unusable_files: list[Path] = field(default_factory=list)
    #: each file's `.agentv/config.yaml` may set its cases' pass threshold (False: the run's)
    config_thresholds: bool = True
    #: (targets-file key, target name) -> why that target, or its judge, cannot be used
    _broken_targets: dict[tuple[Path, str], str] = field(default_factory=dict)
    _broken_judges: dict[int, str] = field(default_factory=dict)

    @property
    def invalid_count(self) -> int:
        """Cases known to be invalid when the plan was made (their targets aside)."""
        return sum(len(loaded.invalid) for loaded in self.files)

    def _name(self, loaded: LoadedEvalFile, case_target: str | None) -> str:
        return choose_target(self.cli_target, case_target, loaded.target)

    def target_for(self, loaded: LoadedEvalFile, case_target: str | None) -> RunTarget:
        """The target a case runs on (``choose_target`` decides which)."""
        return self.registry.target(loaded.path, loaded.repo_root, self._name(loaded, case_target))

    def check_targets(self) -> None:
        """Build every target and judge now, before anything is sent. The run's own target
        failing raises ``ConfigError``; a target only some cases name marks those cases."""
        for loaded in self.files:
            for case_target in loaded.case_targets:
                name = self._name(loaded, case_target)
                try:
                    target = self.target_for(loaded, case_target)
                except ConfigError as exc:
                    if self.cli_target is not None or name == DEFAULT_TARGET:
                        raise
                    self._broken_targets[(loaded.path, name)] = str(exc)
                    continue
                if id(target) not in self._broken_judges:
                    try:
                        self.registry.check_judge(target)
                    except ConfigError as exc:
                        self._broken_judges[id(target)] = str(exc)

    def targets(self) -> list[RunTarget]:
        """Every usable target some case of this plan runs on."""
        seen: dict[int, RunTarget] = {}
        for loaded in self.files:
            for case_target in loaded.case_targets:
                if (loaded.path, self._name(loaded, case_target)) in self._broken_targets:
                    continue
                t = self.target_for(loaded, case_target)
                seen.setdefault(id(t), t)
        return list(seen.values())

    def jobs(self) -> Iterator[CaseJob | InvalidJob]:
        """The cases, in file order, each with its target; invalid cases first per file."""
        for loaded in self.files:
            for invalid in loaded.invalid:
                yield InvalidJob(invalid)
            threshold = self._pass_threshold(loaded)
            for case in iter_cases(loaded, eval_id=self.eval_id, context=self.context):
                name = self._name(loaded, case.target)
                reason = self._broken_targets.get((loaded.path, name))
                if reason is None:
                    target = self.target_for(loaded, case.target)
                    reason = self._broken_judges.get(id(target)) if needs_judge(case) else None
                    if reason is None:
                        yield CaseJob(case, target, threshold)
                        continue
                yield InvalidJob(_invalid(loaded, case, reason), name)

    def pass_thresholds(self, default: float) -> set[float]:
        """The pass thresholds in force for this plan's files (``default`` where no config
        sets one)."""
        found = {self._pass_threshold(loaded) for loaded in self.files}
        return {default if t is None else t for t in found} or {default}

    def _pass_threshold(self, loaded: LoadedEvalFile) -> float | None:
        if self.context is None or not self.config_thresholds:
            return None
        config, _ = self.context.guidelines.for_eval_dir(loaded.path.parent, loaded.repo_root)
        return config.pass_threshold


def _invalid(loaded: LoadedEvalFile, case: EvalCase, reason: str) -> InvalidCase:
    diag = Diagnostic(loaded.path, reason, line=case.line)
    return InvalidCase(loaded.path, case.dataset, -1, case.id, case.line, (diag,))


def plan_run(
    eval_files: list[Path],
    registry: TargetRegistry,
    *,
    cli_target: str | None = None,
    eval_id: str | None = None,
    context: LoadContext | None = None,
    keep_limit: int | None = KEEP_LIMIT,
) -> Plan:
    """Load and check every eval file and build every target and judge. A case with errors
    becomes an invalid job (its diagnostics are kept for printing); a file that cannot be
    used at all loses its own cases only (``unusable_files``)."""
    ctx = context or LoadContext(store=FileStore(cwd=registry.cwd))
    override = cli_target if cli_target and cli_target != DEFAULT_TARGET else None
    plan = Plan(
        files=[],
        diagnostics=[],
        registry=registry,
        cli_target=override,
        eval_id=eval_id,
        context=ctx,
    )
    for path in eval_files:
        try:
            loaded = load_eval_file(path, eval_id=eval_id, context=ctx, keep_limit=keep_limit)
        except InputError as exc:  # this file only: the others still run
            plan.diagnostics.extend(exc.diagnostics or [Diagnostic(path, str(exc))])
            plan.unusable_files.append(path)
            continue
        plan.files.append(loaded)
        plan.diagnostics.extend(loaded.diagnostics)
        plan.total += loaded.case_count + len(loaded.invalid)
    plan.check_targets()  # every target and judge now: nothing is spent on a broken one
    plan.diagnostics.extend(registry.diagnostics)
    return plan
