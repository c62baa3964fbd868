"""Targets as one run uses them: which target a case runs on, each built once, its judge.

Target precedence for a case (``choose_target``, used by ``agentv eval`` and ``agentv
render`` alike): ``--target`` (when given and not ``default``), else the case's
``execution.target``, else the eval file's ``target``, else ``default``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import overload

from agentv.errors import ConfigError, Diagnostic, InputError, SetupError
from agentv.providers.base import Provider
from agentv.providers.mock import (
    DRY_RUN_RESPONSE,
    DRY_RUN_VERDICT,
    MockProvider,
    MockSettings,
)
from agentv.providers.python import PythonProvider, PythonTarget
from agentv.system.readfile import resolved
from agentv.targets.discovery import explicit_targets_file, find_targets_file, no_targets_file
from agentv.targets.loader import load_targets_file
from agentv.targets.resolve import create_provider, preview_environment
from agentv.targets.schema import TargetDefinition, TargetsFile

DEFAULT_TARGET = "default"


@overload
def choose_target(
    cli_target: str | None, case_target: str | None, file_target: str | None
) -> str: ...


@overload
def choose_target(
    cli_target: str | None, case_target: str | None, file_target: str | None, *, default: None
) -> str | None: ...


def choose_target(
    cli_target: str | None,
    case_target: str | None,
    file_target: str | None,
    *,
    default: str | None = DEFAULT_TARGET,
) -> str | None:
    """The name of the target a case runs on: ``cli_target`` (``--target``) when given
    (``--target default`` included: it overrides like any other name), else ``case_target``
    (its ``execution.target``), else ``file_target`` (the eval file's ``target``), else
    ``default`` (None: no target at all)."""
    if cli_target:
        return cli_target
    return case_target or file_target or default


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
    unset: tuple[str, ...] = ()  # a preview's variables that are not set (shown as placeholders)
    repo_root: Path | None = None  # of the eval files using it (where a preview reads .env)
    #: a dry run's mock: the name of the target in targets.yaml it stands in for
    dry_run_of: str | None = None

    @property
    def configured_name(self) -> str:
        """The name in targets.yaml (a dry run's mock is written ``<name>-dry-run``)."""
        return self.dry_run_of if self.dry_run_of is not None else self.name

    @property
    def label(self) -> str:
        """``name [provider=kind]``, how ``--verbose`` names the target."""
        kind = "mock (dry-run)" if self.dry_run_of is not None else self.kind
        return f"{self.name} [provider={kind}]"


@dataclass
class DryRun:
    """``--dry-run``: every target is replaced by a mock answering without any network."""

    delay_ms: float = 0
    delay_min_ms: float = 0
    delay_max_ms: float = 0
    response: str = DRY_RUN_RESPONSE


@dataclass
class TargetPool:
    """Finds targets files, builds each target's provider once, and resolves judges.

    With ``dry_run`` every target is a mock. With ``preview`` (``agentv render``) nothing
    needs a secret: variables are read from the environment over ``.env`` without loading
    it, an unset one becomes ``<unset:VAR>`` (listed in ``RunTarget.unset``), and the values
    that must never be shown are collected in ``secrets``.
    """

    cwd: Path
    targets_path: Path | None = None
    dry_run: DryRun | None = None
    preview: bool = False
    diagnostics: list[Diagnostic] = field(default_factory=list)
    #: (preview) values of credential-looking variables, longest first, for redaction
    secrets: list[str] = field(default_factory=list)
    _files: dict[Path, TargetsFile] = field(default_factory=dict)
    _targets: dict[tuple[Path | None, str], RunTarget] = field(default_factory=dict)
    _by_eval_file: dict[Path, TargetsFile | None] = field(default_factory=dict)
    _environments: dict[Path, dict[str, str]] = field(default_factory=dict)
    #: the values put in for the built targets' ``${{ VAR }}`` (masked by a run)
    _substituted: list[str] = field(default_factory=list)
    #: (targets file, target name) -> why its judge cannot be built (asked once)
    _judge_failures: dict[tuple[Path | None, str], str] = field(default_factory=dict)
    #: targets that are the caller's own Python code (the Python API), by name
    python_targets: dict[str, PythonTarget] = field(default_factory=dict)

    def _targets_file(self, eval_file: Path, repo_root: Path) -> TargetsFile | None:
        """The eval file's targets file, or None when none is found (an explicit
        ``--targets`` that is not there raises, except in a dry run)."""
        # Every case of a file shares its targets file: look it up once per file.
        if eval_file in self._by_eval_file:
            return self._by_eval_file[eval_file]
        if self.targets_path is None:
            path = find_targets_file(eval_file, repo_root, self.cwd)
        else:
            try:
                path = explicit_targets_file(self.targets_path, self.cwd)
            except ConfigError:
                if self.dry_run is None:
                    raise
                path = None  # a dry run needs no real target
        loaded = None
        if path is not None:
            path = resolved(path)
            loaded = self._files.get(path)
            if loaded is None:
                loaded = load_targets_file(path)
                self._files[path] = loaded
                self.diagnostics.extend(loaded.diagnostics)
        self._by_eval_file[eval_file] = loaded
        return loaded

    def target(self, eval_file: Path, repo_root: Path, name: str) -> RunTarget:
        """The run target called ``name`` for cases of ``eval_file``."""
        if name in self.python_targets and self.dry_run is None:
            return self._python(eval_file, repo_root, name)
        tfile = self._targets_file(eval_file, repo_root)
        if tfile is None and self.dry_run is None:
            raise no_targets_file(eval_file, repo_root, self.cwd)
        return self._target(tfile, repo_root, name)

    def find_target(self, eval_file: Path, repo_root: Path, name: str) -> RunTarget | None:
        """Like ``target``, but None when ``eval_file`` has no targets file to look in."""
        if name in self.python_targets and self.dry_run is None:
            return self._python(eval_file, repo_root, name)
        tfile = self._targets_file(eval_file, repo_root)
        if tfile is None and self.dry_run is None:
            return None
        return self._target(tfile, repo_root, name)

    def _python(self, eval_file: Path, repo_root: Path, name: str) -> RunTarget:
        """A target that is the caller's code: built once; its judge (when it names one)
        is found in ``eval_file``'s targets file."""
        hit = self._targets.get((None, f"python:{name}"))
        if hit is not None:
            return hit
        try:
            tfile = self._targets_file(eval_file, repo_root)
        except ConfigError:
            tfile = None  # it needs none, unless it names a judge (said then)
        python = self.python_targets[name]
        run_target = RunTarget(
            name=name,
            kind="python",
            provider=PythonProvider(python),
            judge_name=python.judge_target,
            targets_file=tfile.path if tfile is not None else None,
            repo_root=repo_root,
        )
        self._targets[(None, f"python:{name}")] = run_target
        return run_target

    def _target(self, tfile: TargetsFile | None, repo_root: Path, name: str) -> RunTarget:
        key = (tfile.path if tfile else None, name)
        hit = self._targets.get(key)
        if hit is not None:
            return hit
        definition = tfile.get(name) if tfile is not None else None
        if self.dry_run is not None:
            run_target = self._dry_run_target(name, definition)
        else:
            assert definition is not None and tfile is not None
            run_target = self._build(definition, tfile, repo_root)
        self._targets[key] = run_target
        return run_target

    def _build(
        self, definition: TargetDefinition, tfile: TargetsFile, repo_root: Path
    ) -> RunTarget:
        unset: list[str] = []
        if self.preview:
            # errors are shown as they are: the command names the file already
            env = self._environment(repo_root)
            provider = create_provider(definition, env, unset=unset, cwd=self.cwd)
        else:
            try:
                provider = create_provider(definition, substituted=self._substituted, cwd=self.cwd)
            except (ConfigError, InputError) as exc:
                # what the machine lacks stays a SetupError (docs/python-api.md, errors)
                kind = SetupError if isinstance(exc, SetupError) else ConfigError
                raise kind(
                    f"target {definition.name!r} in {tfile.path} cannot be used: "
                    f"{_reason(str(exc), tfile.path, definition)}"
                ) from None
        provider.price = definition.price
        return RunTarget(
            name=definition.name,
            kind=definition.kind,
            provider=provider,
            workers=definition.workers,
            batching=definition.provider_batching,
            judge_name=definition.judge_target,
            targets_file=tfile.path,
            unset=tuple(dict.fromkeys(unset)),
            repo_root=repo_root,
        )

    def _environment(self, repo_root: Path) -> dict[str, str]:
        """(preview) The variables ``agentv eval`` would see for eval files under
        ``repo_root``; their secrets join ``secrets``."""
        env = self._environments.get(repo_root)
        if env is None:
            from agentv.providers.agents.common import secret_values

            env = preview_environment(repo_root, self.cwd)
            self._environments[repo_root] = env
            self.secrets = sorted({*self.secrets, *secret_values(env)}, key=len, reverse=True)
        return env

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
        # A dry run never calls a real judge either; its mock judge answers with a valid
        # verdict, so a dry run shows no judge failure that a real run would not have.
        judge = MockProvider(
            f"{name}-dry-run-judge", settings.model_copy(update={"response": DRY_RUN_VERDICT})
        )
        return RunTarget(
            name=f"{name}-dry-run",
            kind="mock",
            provider=mock,
            workers=definition.workers if definition else None,
            judge=judge,
            dry_run_of=name,
        )

    def judge(self, run_target: RunTarget) -> Provider:
        """The judge for cases on ``run_target``: its ``judge_target``, else the target
        itself; built once. ``ConfigError`` (the same each time it is asked) when it cannot
        be: ``judge_target`` names no target, or one that cannot be used or built (an unset
        variable, say). A dry run's judge is its mock."""
        if run_target.judge is not None:
            return run_target.judge
        key = (run_target.targets_file, run_target.name)
        failure = self._judge_failures.get(key)
        if failure is not None:
            raise ConfigError(failure)
        try:
            judge = self._build_judge(run_target)
        except ConfigError as exc:
            self._judge_failures[key] = str(exc)
            raise
        run_target.judge = judge
        return judge

    def check_judge(self, run_target: RunTarget) -> None:
        """Build ``run_target``'s judge now, before anything is sent (its ``${{ VAR }}``
        values substituted, so an unset key is reported now); ``ConfigError`` when it cannot
        be. Cheap when asked again for the same target: the outcome is kept, failure too."""
        self.judge(run_target)

    def _build_judge(self, run_target: RunTarget) -> Provider:
        if run_target.kind == "python":
            return self._python_judge(run_target)
        if run_target.targets_file is None:
            return run_target.provider
        tfile = self._files[run_target.targets_file]
        definition = tfile.judge_for(run_target.name)
        if definition.name == run_target.name:
            return run_target.provider
        repo_root = run_target.repo_root or self.cwd
        try:
            return self._target(tfile, repo_root, definition.name).provider
        except (ConfigError, InputError) as exc:
            raise ConfigError(
                f"target {run_target.name!r} in {tfile.path} cannot be judged: "
                f"its judge_target: {exc}"
            ) from None

    def _python_judge(self, run_target: RunTarget) -> Provider:
        """The judge a Python target names (``PythonTarget(judge_target=...)``)."""
        name = run_target.judge_name
        if not name:
            raise ConfigError(
                f"target {run_target.name!r} (your Python code) has no judge for the cases "
                "that need one: give it PythonTarget(..., judge_target=NAME), NAME a target "
                "in targets.yaml"
            )
        if run_target.targets_file is None:
            raise ConfigError(
                f"target {run_target.name!r} (your Python code) names the judge {name!r}, "
                "but no targets.yaml was found for its eval files"
            )
        tfile = self._files[run_target.targets_file]
        try:
            return self._target(tfile, run_target.repo_root or self.cwd, name).provider
        except (ConfigError, InputError) as exc:
            raise ConfigError(
                f"target {run_target.name!r} (your Python code) cannot be judged: its "
                f"judge_target: {exc}"
            ) from None

    def run_secrets(self) -> list[str]:
        """The secret values a run knows, for masking (``agentv.system.masking``): what the built
        targets' ``${{ VAR }}`` references took, their ``api_key`` values, and the vendors'
        key variables."""
        from agentv.system.env import vendor_keys

        values = {*self._substituted, *vendor_keys()}
        for t in self._targets.values():
            for provider in (t.provider, t.judge):
                key = getattr(getattr(provider, "settings", None), "api_key", None)
                if isinstance(key, str) and key.strip():
                    values.add(key.strip())
        return sorted(values, key=len, reverse=True)

    def owner(self, provider: Provider) -> RunTarget | None:
        """The run target whose provider ``provider`` is (None: a judge built for a target,
        not a target of its own)."""
        return next((t for t in self.all_targets() if t.provider is provider), None)

    def all_targets(self) -> list[RunTarget]:
        """Every target built so far (judges included)."""
        return list(self._targets.values())

    async def aclose(self) -> None:
        """Close every provider built in this run."""
        seen: set[int] = set()
        for t in self._targets.values():
            for p in (t.provider, t.judge):
                if p is not None and id(p) not in seen:
                    seen.add(id(p))
                    await p.aclose()


def _reason(message: str, path: Path, definition: TargetDefinition) -> str:
    """``message`` (about ``definition``) without the leading ``path: `` and ``target 'x':``
    that the caller's own words say already."""
    message = message.removeprefix(f"{path}: ")
    for prefix in (
        f"target {definition.name!r} ({definition.provider}): ",
        f"target {definition.name!r}: ",
    ):
        message = message.removeprefix(prefix)
    return message
