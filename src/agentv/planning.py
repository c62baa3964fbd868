"""Before a run: which eval files, which cases, and which target each case runs on.

Which target a case runs on is ``agentv.targets.choose_target``'s decision (shared with
``agentv render``); the ``TargetRegistry`` builds each target once per run (one SDK client,
one healthcheck) and shares it between every case using it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from agentv.cases import EvalCase
from agentv.errors import Diagnostic, InputError
from agentv.evalfile.files import FileStore
from agentv.evalfile.loader import LoadContext, LoadedEvalFile, iter_cases, load_eval_file
from agentv.targets import DEFAULT_TARGET, RunTarget, TargetRegistry, choose_target


@dataclass(slots=True)
class CaseJob:
    """One case and the target it runs on."""

    case: EvalCase
    target: RunTarget


#: a file with more cases than this is not held in memory: its cases are checked when the
#: run is planned, then built again one at a time while they run
KEEP_LIMIT = 20_000


@dataclass
class Plan:
    """Everything a run will do, decided before the first request.

    Every case has been checked and its target built; ``jobs()`` hands the cases out one at
    a time (re-reading large files), so a run holds only the cases in flight.
    """

    files: list[LoadedEvalFile]
    diagnostics: list[Diagnostic]
    registry: TargetRegistry
    total: int = 0
    cli_target: str | None = None
    eval_id: str | None = None
    context: LoadContext | None = None

    def target_for(self, loaded: LoadedEvalFile, case_target: str | None) -> RunTarget:
        """The target a case runs on (``choose_target`` decides which)."""
        name = choose_target(self.cli_target, case_target, loaded.target)
        return self.registry.target(loaded.path, loaded.repo_root, name)

    def targets(self) -> list[RunTarget]:
        """Every target some case of this plan runs on."""
        seen: dict[int, RunTarget] = {}
        for loaded in self.files:
            for case_target in loaded.case_targets:
                t = self.target_for(loaded, case_target)
                seen.setdefault(id(t), t)
        return list(seen.values())

    def jobs(self) -> Iterator[CaseJob]:
        """The cases, in file order, each with its target."""
        for loaded in self.files:
            for case in iter_cases(loaded, eval_id=self.eval_id, context=self.context):
                yield CaseJob(case, self.target_for(loaded, case.target))


def plan_run(
    eval_files: list[Path],
    registry: TargetRegistry,
    *,
    cli_target: str | None = None,
    eval_id: str | None = None,
    context: LoadContext | None = None,
    keep_limit: int | None = KEEP_LIMIT,
) -> Plan:
    """Load and check every eval file and build every target. Bad cases are skipped
    (diagnostics); a file that cannot be used at all only loses its own cases."""
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
            continue
        plan.files.append(loaded)
        plan.diagnostics.extend(loaded.diagnostics)
        plan.total += loaded.case_count
    plan.targets()  # build every target now: a bad target stops the run before it starts
    plan.diagnostics.extend(registry.diagnostics)
    return plan
