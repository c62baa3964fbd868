"""Before a run: which eval files, which cases, and which target each case runs on.

Target precedence for a case: ``--target`` (when given and not ``default``), else the
case's ``execution.target``, else the eval file's ``target``, else ``default``. Each target
is built once per run (one SDK client, one healthcheck) and shared by every case using it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from agentv.cases import EvalCase
from agentv.errors import ConfigError, Diagnostic, InputError
from agentv.evalfile.files import FileStore
from agentv.evalfile.loader import LoadContext, LoadedEvalFile, iter_cases, load_eval_file
from agentv.providers.base import Provider
from agentv.providers.mock import DRY_RUN_RESPONSE, MockProvider, MockSettings
from agentv.targets import (
    TargetDefinition,
    TargetsFile,
    create_provider,
    discover_targets_file,
    load_targets_file,
)

DEFAULT_TARGET = "default"


@dataclass
class RunTarget:
    """A target as used in this run."""

    name: str  # the name written to results (`<name>-dry-run` in a dry run)
    kind: str
    provider: Provider
    workers: int | None = None
    batching: bool = False
    judge_name: str | None = None
    targets_file: Path | None = None
    judge: Provider | None = None

    @property
    def label(self) -> str:
        kind = (
            "mock (dry-run)"
            if self.name.endswith("-dry-run") and self.kind == "mock"
            else self.kind
        )
        return f"{self.name} [provider={kind}]"


@dataclass
class DryRun:
    """``--dry-run``: every target is replaced by a mock answering without any network."""

    delay_ms: float = 0
    delay_min_ms: float = 0
    delay_max_ms: float = 0
    response: str = DRY_RUN_RESPONSE


@dataclass
class TargetRegistry:
    """Finds targets files, builds each target's provider once, and resolves judges."""

    cwd: Path
    targets_path: Path | None = None
    dry_run: DryRun | None = None
    _files: dict[Path, TargetsFile] = field(default_factory=dict)
    _targets: dict[tuple[Path | None, str], RunTarget] = field(default_factory=dict)
    _by_eval_file: dict[Path, TargetsFile | None] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def _targets_file(self, eval_file: Path, repo_root: Path) -> TargetsFile | None:
        # Every case of a file shares its targets file: look it up once per file.
        if eval_file in self._by_eval_file:
            return self._by_eval_file[eval_file]
        try:
            path = discover_targets_file(eval_file, repo_root, self.cwd, self.targets_path)
        except ConfigError:
            if self.dry_run is not None:
                self._by_eval_file[eval_file] = None
                return None  # a dry run needs no real target
            raise
        path = path.resolve()
        loaded = self._files.get(path)
        if loaded is None:
            loaded = load_targets_file(path)
            self._files[path] = loaded
            self.diagnostics.extend(loaded.diagnostics)
        self._by_eval_file[eval_file] = loaded
        return loaded

    def target(self, eval_file: Path, repo_root: Path, name: str) -> RunTarget:
        """The run target called ``name`` for cases of ``eval_file``."""
        tfile = self._targets_file(eval_file, repo_root)
        key = (tfile.path if tfile else None, name)
        hit = self._targets.get(key)
        if hit is not None:
            return hit
        definition = tfile.get(name) if tfile is not None else None
        if self.dry_run is not None:
            run_target = self._dry_run_target(name, definition)
        else:
            assert definition is not None and tfile is not None
            try:
                provider = create_provider(definition)
            except (ConfigError, InputError) as exc:
                raise ConfigError(f"cannot use target {name!r} from {tfile.path}: {exc}") from None
            run_target = RunTarget(
                name=name,
                kind=definition.kind,
                provider=provider,
                workers=definition.workers,
                batching=definition.provider_batching,
                judge_name=definition.judge_target,
                targets_file=tfile.path,
            )
        self._targets[key] = run_target
        return run_target

    def _dry_run_target(self, name: str, definition: TargetDefinition | None) -> RunTarget:
        assert self.dry_run is not None
        dr = self.dry_run
        settings = MockSettings(
            response=dr.response,
            delay_ms=dr.delay_ms,
            delay_min_ms=dr.delay_min_ms,
            delay_max_ms=dr.delay_max_ms,
        )
        mock = MockProvider(f"{name}-dry-run", settings)
        return RunTarget(
            name=f"{name}-dry-run",
            kind="mock",
            provider=mock,
            workers=definition.workers if definition else None,
            judge=mock,  # a dry run never calls a real judge either
        )

    def judge(self, run_target: RunTarget) -> Provider:
        """The judge for cases on ``run_target``: its ``judge_target``, else the target itself."""
        if run_target.judge is not None:
            return run_target.judge
        judge = run_target.provider
        if run_target.judge_name and run_target.targets_file is not None:
            tfile = self._files[run_target.targets_file]
            definition = tfile.targets.get(run_target.judge_name)
            if definition is None:
                raise ConfigError(
                    f"target {run_target.name!r} names judge_target {run_target.judge_name!r}, "
                    f"which is not in {tfile.path}; available targets: {', '.join(tfile.targets)}"
                )
            key = (tfile.path, definition.name)
            existing = self._targets.get(key)
            judge = existing.provider if existing else create_provider(definition)
            if existing is None:
                self._targets[key] = RunTarget(
                    name=definition.name,
                    kind=definition.kind,
                    provider=judge,
                    workers=definition.workers,
                    targets_file=tfile.path,
                )
        run_target.judge = judge
        return judge

    def all_targets(self) -> list[RunTarget]:
        return list(self._targets.values())

    async def aclose(self) -> None:
        """Close every provider built in this run."""
        seen: set[int] = set()
        for t in self._targets.values():
            for p in (t.provider, t.judge):
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    await p.aclose()


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
        """The target a case runs on (see the module docstring for the precedence)."""
        name = self.cli_target or case_target or loaded.target or DEFAULT_TARGET
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
