"""Step 4 of the data flow: ``targets.yaml`` (``$schema: agentv-targets-v2.2``) to providers.

A targets file lists named targets; each names a ``provider`` kind (or an alias) and carries
that provider's fields at the top level of its entry::

    $schema: agentv-targets-v2.2
    targets:
      - name: default
        provider: openai
        model: gpt-4o-mini
        api_key: ${{ OPENAI_API_KEY }}
        judge_target: judge

Reading a file checks its structure and every provider's fields (through each provider
class's ``Settings`` model) without looking at the environment, so ``agentv validate`` works
without any key set. ``create_provider`` substitutes ``${{ VAR }}`` references, anywhere
inside a string, from the environment (after ``.env`` loading) and builds the provider.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, BaseModel, ValidationError

from agentv.errors import ConfigError, Diagnostic, InputError
from agentv.providers import registry
from agentv.providers.base import Provider
from agentv.yamlio import PathKey, YamlSource, format_key, load_yaml

TARGETS_SCHEMA = "agentv-targets-v2.2"

#: Looked for in each folder, in this order.
CANDIDATE_NAMES: tuple[str, ...] = (
    ".agentv/targets.yaml",
    ".agentv/targets.yml",
    "targets.yaml",
    "targets.yml",
)

#: Keys every target may have, whatever its provider (spelling -> field).
COMMON_KEYS: dict[str, str] = {
    "name": "name",
    "provider": "provider",
    "judge_target": "judge_target",
    "judgeTarget": "judge_target",
    "workers": "workers",
    "provider_batching": "provider_batching",
    "providerBatching": "provider_batching",
}
_TOP_KEYS = ("$schema", "targets")

_ENV_REF = re.compile(r"\$\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
_PLACEHOLDER = re.compile(r"<unset:[A-Za-z_][A-Za-z0-9_]*>")  # see `unset_placeholder`
_ENV_HINT = "set it in the environment, or in a .env file at the repository root"


@dataclass
class TargetDefinition:
    """One entry of ``targets.yaml``; provider fields are kept raw until the target is used."""

    name: str
    kind: str  # canonical provider kind (aliases resolved)
    provider: str  # as written
    fields: dict[str, Any]  # provider-specific fields, `${{ VAR }}` not yet substituted
    judge_target: str | None = None
    workers: int | None = None
    provider_batching: bool = False
    source: Path | None = None
    index: int = 0  # position in the file, for locating errors


@dataclass
class TargetsFile:
    """A parsed targets file."""

    path: Path
    targets: dict[str, TargetDefinition] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def get(self, name: str) -> TargetDefinition:
        """The named target, or a ``ConfigError`` listing the available names."""
        try:
            return self.targets[name]
        except KeyError:
            names = ", ".join(self.targets) or "(none)"
            close = difflib.get_close_matches(name, list(self.targets), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(
                f"target {name!r} not found in {self.path}{hint}; available targets: {names}"
            ) from None

    def judge_for(self, name: str) -> TargetDefinition:
        """The target that judges ``name``'s answers: its ``judge_target``, else itself."""
        target = self.get(name)
        if target.judge_target and target.judge_target in self.targets:
            return self.targets[target.judge_target]
        return target


# --- discovery ------------------------------------------------------------------------------


def discover_targets_file(
    eval_file: Path, repo_root: Path, cwd: Path, explicit: Path | None = None
) -> Path:
    """``explicit`` if given, else ``.agentv/targets.yaml`` (or ``targets.yaml``) searched from
    the eval file's folder up to the repository root, then the working directory."""
    if explicit is not None:
        path = (explicit if explicit.is_absolute() else cwd / explicit).resolve()
        if path.is_file():
            return path
        if path.is_dir():
            found = _first_candidate(path)
            if found is not None:
                return found
            raise ConfigError(
                f"no targets file in {path} (looked for {', '.join(CANDIDATE_NAMES)}); "
                "pass the file itself with --targets"
            )
        raise ConfigError(f"targets file not found: {path}; check the path given to --targets")

    start = eval_file.resolve()
    start = start if start.is_dir() else start.parent
    repo_root = repo_root.resolve()
    folders: list[Path] = [start]
    if repo_root == start or repo_root in start.parents:
        for folder in start.parents:
            folders.append(folder)
            if folder == repo_root:
                break
    cwd = cwd.resolve()
    if cwd not in folders:
        folders.append(cwd)
    for folder in folders:
        found = _first_candidate(folder)
        if found is not None:
            return found
    raise ConfigError(
        f"no targets file found for {eval_file}: looked for .agentv/targets.yaml and "
        f"targets.yaml from {start} up to {repo_root}, and in {cwd}; create one "
        "(`agentv init` writes an example) or pass --targets PATH"
    )


def _first_candidate(folder: Path) -> Path | None:
    for name in CANDIDATE_NAMES:
        path = folder / name
        if path.is_file():
            return path
    return None


# --- reading and validating --------------------------------------------------------------------


def load_targets_file(path: Path) -> TargetsFile:
    """Parse and validate a targets file; raises ``InputError`` when unusable.

    The file is unusable when it has any error, so that a typo in one target is caught
    before a long run rather than when that target is first needed.
    """
    path = Path(path).resolve()
    src = load_yaml(path)
    targets, diags = _parse(src)
    if any(d.severity == "error" for d in diags):
        raise InputError(f"{path}: invalid targets file", diags)
    return TargetsFile(path=path, targets=targets, diagnostics=diags)


def validate_targets_file(path: Path) -> list[Diagnostic]:
    """Every problem in a targets file (for ``agentv validate``), including warnings for agent
    targets that could not start on this machine (see ``setup_diagnostics``)."""
    try:
        src = load_yaml(Path(path).resolve())
    except InputError as exc:
        return exc.diagnostics
    targets, diags = _parse(src)
    setup = setup_diagnostics(src, targets)
    if setup:  # `_parse` has put the others in file order
        diags = sorted([*diags, *setup], key=lambda d: (d.line or 0, d.column or 0))
    return diags


def setup_diagnostics(src: YamlSource, targets: Mapping[str, TargetDefinition]) -> list[Diagnostic]:
    """A warning at each agent target entry for each thing that would stop it here: a program
    that is not installed, a working directory that does not exist.

    Warnings, not errors: the eval may be meant for another machine. Relative paths start
    from ``project_dir`` as when the target runs; the environment is not read, so a value
    holding ``${{ VAR }}`` is not checked.
    """
    from agentv.providers.agents import CHECKED_KINDS, setup_warnings

    base = project_dir(src.path)
    out: list[Diagnostic] = []
    for definition in targets.values():
        if definition.kind not in CHECKED_KINDS:
            continue
        settings = _settings_for_checks(definition, base)
        if settings is None:
            continue
        hint = "ignore this warning if the target runs on another machine"
        if _has_relative_path(definition.fields):
            hint += f"; relative paths in this target start from {base}"
        for problem in setup_warnings(definition.kind, definition.name, settings):
            out.append(
                src.diagnostic(
                    ("targets", definition.index),
                    f"target {definition.name!r} cannot run on this machine: {problem}",
                    hint=hint,
                    severity="warning",
                )
            )
    return out


def _has_relative_path(fields: Mapping[str, Any]) -> bool:
    for key, value in fields.items():
        if key in _PATH_FIELDS and isinstance(value, str) and value.strip():
            if not _ENV_REF.search(value) and not Path(value.strip()).expanduser().is_absolute():
                return True
        elif key == "healthcheck" and isinstance(value, dict) and _has_relative_path(value):
            return True
    return False


def _settings_for_checks(definition: TargetDefinition, base: Path) -> Any:
    """The target's settings without substituting the environment, or None when they cannot
    be built. A field that only fails because it holds ``${{ VAR }}`` (a number written as a
    reference) is left out: its value is unknown until the target runs."""
    fields = dict(definition.fields)
    _anchor_paths(fields, base)
    settings_cls = registry.provider_class(definition.kind).Settings
    try:
        return _validate_without(settings_cls, fields, _ENV_REF)
    except ValidationError:
        return None  # `_check_fields` reported why


def _parse(src: YamlSource) -> tuple[dict[str, TargetDefinition], list[Diagnostic]]:
    data = src.data
    diags: list[Diagnostic] = []
    if not isinstance(data, dict):
        diags.append(
            src.diagnostic(
                (),
                "a targets file must be a YAML mapping with `$schema` and `targets`",
                hint=f"start the file with `$schema: {TARGETS_SCHEMA}` and list targets under "
                "`targets:`",
            )
        )
        return {}, diags
    schema = data.get("$schema")
    if schema is None:
        diags.append(
            src.diagnostic(
                (), "missing `$schema`", hint=f"add `$schema: {TARGETS_SCHEMA}` at the top"
            )
        )
    elif schema != TARGETS_SCHEMA:
        diags.append(
            src.diagnostic(
                ("$schema",),
                f"`$schema` is {schema!r}, expected {TARGETS_SCHEMA!r}",
                hint=f"set `$schema: {TARGETS_SCHEMA}`",
            )
        )
    for key in data:
        if key not in _TOP_KEYS:
            diags.append(
                _unknown_key(src, (str(key),), str(key), _TOP_KEYS, f"unknown key {key!r}")
            )
    entries = data.get("targets")
    if not isinstance(entries, list):
        what = "missing" if "targets" not in data else "not a list"
        diags.append(
            src.diagnostic(
                ("targets",),
                f"`targets` is {what}",
                hint="list the targets under `targets:`, each starting with `- name: ...`",
            )
        )
        return {}, diags

    targets: dict[str, TargetDefinition] = {}
    first_seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        definition = _entry(src, index, entry, diags)
        name = entry.get("name") if isinstance(entry, dict) else None
        if isinstance(name, str) and name.strip():
            name = name.strip()
            if name in first_seen:
                diags.append(
                    src.diagnostic(
                        ("targets", index, "name"),
                        f"duplicate target name {name!r} (first used by targets[{first_seen[name]}])",
                        hint="give each target a different name",
                    )
                )
                continue
            first_seen[name] = index
        if definition is not None:
            targets[definition.name] = definition

    for definition in targets.values():
        judge = definition.judge_target
        if judge and judge not in first_seen:
            close = difflib.get_close_matches(judge, list(first_seen), n=1)
            diags.append(
                src.diagnostic(
                    (
                        "targets",
                        definition.index,
                        _present_key(entries[definition.index], "judge_target"),
                    ),
                    f"judge_target {judge!r} is not a target in this file; "
                    f"{definition.name!r} will judge its own answers",
                    hint=f"did you mean {close[0]!r}?" if close else "add a target with that name",
                    severity="warning",
                )
            )
    diags.sort(key=lambda d: (d.line or 0, d.column or 0))
    return targets, diags


def _present_key(entry: dict[str, Any], field_name: str) -> str:
    """Which spelling of a common field the entry uses (for locating messages)."""
    for spelling, name in COMMON_KEYS.items():
        if name == field_name and spelling in entry:
            return spelling
    return field_name


def _entry(
    src: YamlSource, index: int, entry: Any, diags: list[Diagnostic]
) -> TargetDefinition | None:
    base: PathKey = ("targets", index)
    if not isinstance(entry, dict):
        diags.append(
            src.diagnostic(
                base,
                "a target must be a mapping",
                hint="start each target with `- name: ...` followed by `provider: ...`",
            )
        )
        return None
    before = len([d for d in diags if d.severity == "error"])

    name = entry.get("name")
    if not isinstance(name, str) or not name.strip():
        what = "has no `name`" if name is None else "`name` must be non-empty text"
        diags.append(
            src.diagnostic((*base, "name"), f"target {what}", hint="add `name: my-target`")
        )
        name = None

    label = f"target {name.strip()!r}" if isinstance(name, str) and name.strip() else "target"
    provider = entry.get("provider")
    kind: str | None = None
    if not isinstance(provider, str) or not provider.strip():
        what = "has no `provider`" if provider is None else "`provider` must be non-empty text"
        diags.append(
            src.diagnostic(
                (*base, "provider"),
                f"{label} {what}",
                hint=f"valid providers: {', '.join(_provider_choices())}",
            )
        )
    else:
        kind = registry.canonical_kind(provider)
        if kind is None:
            close = difflib.get_close_matches(provider.strip().lower(), _provider_choices(), n=1)
            diags.append(
                src.diagnostic(
                    (*base, "provider"),
                    f"{label}: unknown provider {provider!r}",
                    hint=(f"did you mean {close[0]!r}? " if close else "")
                    + f"valid providers: {', '.join(_provider_choices())}",
                )
            )

    common = {COMMON_KEYS[k]: (k, v) for k, v in entry.items() if k in COMMON_KEYS}
    judge = common.get("judge_target", (None, None))
    if judge[1] is not None and not (isinstance(judge[1], str) and judge[1].strip()):
        diags.append(
            src.diagnostic(
                (*base, judge[0]),
                f"{label}: `{judge[0]}` must be the name of another target",
            )
        )
    workers = common.get("workers", (None, None))[1]
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or workers < 1
    ):
        diags.append(
            src.diagnostic(
                (*base, "workers"),
                f"{label}: `workers` must be a whole number of at least 1",
                hint="for example `workers: 4`",
            )
        )
    batching = common.get("provider_batching", (None, None))
    if batching[1] is not None and not isinstance(batching[1], bool):
        diags.append(
            src.diagnostic((*base, batching[0]), f"{label}: `{batching[0]}` must be true or false")
        )

    fields = {k: v for k, v in entry.items() if k not in COMMON_KEYS}
    if kind is not None:
        diags.extend(_check_fields(src, base, label, provider.strip(), kind, fields))  # type: ignore[union-attr]

    if len([d for d in diags if d.severity == "error"]) > before or name is None or kind is None:
        return None
    return TargetDefinition(
        name=name.strip(),
        kind=kind,
        provider=provider.strip(),  # type: ignore[union-attr]
        fields=fields,
        judge_target=judge[1].strip() if isinstance(judge[1], str) else None,
        workers=workers,
        provider_batching=bool(batching[1]),
        source=src.path,
        index=index,
    )


def _provider_choices() -> list[str]:
    return sorted({*registry.KINDS, *registry.ALIASES})


def _check_fields(
    src: YamlSource, base: PathKey, label: str, provider: str, kind: str, fields: dict[str, Any]
) -> list[Diagnostic]:
    """The provider's own fields, checked by its ``Settings`` model (no env lookup)."""
    try:
        settings_cls = registry.provider_class(kind).Settings
    except ImportError:
        return []  # the provider's module is not available in this build: nothing to check
    try:
        settings_cls.model_validate(fields)
    except ValidationError as exc:
        return _field_diagnostics(src, base, label, provider, settings_cls, fields, exc)
    return []


def settings_keys(settings_cls: type[BaseModel]) -> list[str]:
    """Every spelling a provider's ``Settings`` accepts (field names and aliases)."""
    keys: list[str] = []
    for name in settings_cls.model_fields:
        keys.extend(k for k in _spellings(settings_cls, name) if k not in keys)
    return keys


def _spellings(settings_cls: type[BaseModel], key: str) -> list[str]:
    """The spellings of the field that ``key`` names (by name or alias), name first."""
    for name, info in settings_cls.model_fields.items():
        found: list[Any] = [name, info.alias]
        va = info.validation_alias
        found.extend(va.choices if isinstance(va, AliasChoices) else [va])
        spellings = list(dict.fromkeys(s for s in found if isinstance(s, str)))
        if key in spellings:
            return spellings
    return [key]


def _field_diagnostics(
    src: YamlSource,
    base: PathKey,
    label: str,
    provider: str,
    settings_cls: type[BaseModel],
    fields: dict[str, Any],
    exc: ValidationError,
) -> list[Diagnostic]:
    out: list[Diagnostic] = []
    known = settings_keys(settings_cls)
    for err in exc.errors():
        loc = err["loc"]
        key = str(loc[0]) if loc else None
        value = fields.get(key) if key is not None else None
        if err["type"] == "extra_forbidden" and key is not None:
            out.append(
                _unknown_key(
                    src,
                    (*base, key),
                    key,
                    [*known, *COMMON_KEYS],
                    f"{label}: unknown setting {key!r} for {provider} targets",
                )
            )
        elif err["type"] == "missing" and key is not None:
            others = [k for k in _spellings(settings_cls, key) if k != key]
            also = f" (or {', '.join(others)})" if others else ""
            out.append(
                src.diagnostic(
                    base,
                    f"{label} ({provider}) is missing the required setting `{key}`",
                    hint=f"add `{key}: ...`{also} to this target",
                )
            )
        elif isinstance(value, str) and _ENV_REF.search(value):
            continue  # its value comes from the environment: checked when the target is used
        elif key is None:
            out.append(src.diagnostic(base, f"{label} ({provider}): {_pydantic_message(err)}"))
        else:
            # Never echo the value: it may be a key written literally.
            where = format_key(tuple(loc))
            out.append(
                src.diagnostic(
                    (*base, *loc),
                    f"{label}: invalid `{where}`: {_pydantic_message(err)}",
                )
            )
    return out


def _pydantic_message(err: Any) -> str:
    msg = str(err.get("msg", "invalid value"))
    return msg.removeprefix("Value error, ")


def _unknown_key(
    src: YamlSource, key: PathKey, name: str, allowed: Any, message: str
) -> Diagnostic:
    """``message`` about an unknown key, with a "did you mean" or the valid keys as hint."""
    allowed = list(dict.fromkeys(allowed))
    close = difflib.get_close_matches(name, allowed, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"valid keys here: {', '.join(allowed)}"
    return src.diagnostic(key, message, hint=hint, at_key=True)


# --- building providers ------------------------------------------------------------------------


def unset_placeholder(var: str) -> str:
    """What ``render`` shows in place of variable ``var`` when it is not set."""
    return f"<unset:{var}>"


def substitute_env(
    value: Any,
    env: Mapping[str, str],
    *,
    target: str,
    field_name: str,
    unset: list[str] | None = None,
) -> Any:
    """``value`` with every ``${{ VAR }}`` replaced from ``env`` (in nested lists and maps too).

    A variable that is not set, or set to blank, is a ``ConfigError`` naming the target, the
    field and the variable. When ``unset`` is given (for a preview), such a variable becomes
    ``<unset:VAR>`` instead and its name is added to ``unset``.
    """
    if isinstance(value, str):

        def replace(match: re.Match[str]) -> str:
            var = match.group(1)
            found = env.get(var)
            if found is None or not found.strip():
                if unset is not None:
                    unset.append(var)
                    return unset_placeholder(var)
                what = "not set" if found is None else "empty"
                raise ConfigError(
                    f"target {target!r}: field {field_name!r} uses environment variable "
                    f"{var}, which is {what}; {_ENV_HINT}"
                )
            return found.strip()

        return _ENV_REF.sub(replace, value)
    if isinstance(value, dict):
        return {
            k: substitute_env(v, env, target=target, field_name=f"{field_name}.{k}", unset=unset)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [
            substitute_env(v, env, target=target, field_name=f"{field_name}[{i}]", unset=unset)
            for i, v in enumerate(value)
        ]
    return value


def create_provider(
    definition: TargetDefinition,
    env: Mapping[str, str] | None = None,
    *,
    unset: list[str] | None = None,
) -> Provider:
    """Substitute ``${{ VAR }}`` values, validate the provider's settings, build the provider.

    ``unset`` is for previews (``agentv render``), which must work without secrets: a
    variable that is not set becomes ``<unset:VAR>`` and is listed in ``unset``, a setting
    that such a placeholder makes invalid (a number) keeps its default, and a missing API
    key is no error.
    """
    env = os.environ if env is None else env
    fields = {
        key: substitute_env(value, env, target=definition.name, field_name=key, unset=unset)
        for key, value in definition.fields.items()
    }
    if definition.source is not None:
        _anchor_paths(fields, project_dir(definition.source))
    cls = registry.provider_class(definition.kind)
    try:
        if unset:
            settings = _validate_without(cls.Settings, fields, _PLACEHOLDER)
        else:
            settings = cls.Settings.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(_describe(err) for err in exc.errors())
        where = f"{definition.source}: " if definition.source else ""
        raise ConfigError(
            f"{where}target {definition.name!r} ({definition.provider}): {problems}"
        ) from None
    has_key_field = "api_key" in type(settings).model_fields
    if unset is not None and has_key_field and not (settings.api_key or "").strip():
        # A preview sends nothing and never shows a key, so a target that would take its
        # key from the vendor's usual variable renders without that variable.
        settings = settings.model_copy(update={"api_key": unset_placeholder("api_key")})
    return cls(definition.name, settings)


def _validate_without(
    settings_cls: type[BaseModel], fields: dict[str, Any], unknown: re.Pattern[str]
) -> Any:
    """Validate ``fields``, leaving out each invalid field whose value holds the ``unknown``
    pattern (a value not known before the target runs) so that it keeps its default; other
    errors raise."""
    fields = dict(fields)
    while True:
        try:
            return settings_cls.model_validate(fields)
        except ValidationError as exc:
            dropped = {
                key
                for err in exc.errors()
                if err["loc"]
                and (key := str(err["loc"][0])) in fields
                and _holds(fields[key], unknown)
            }
            if not dropped:
                raise
            for key in dropped:
                del fields[key]


def _holds(value: Any, pattern: re.Pattern[str]) -> bool:
    """Whether ``pattern`` occurs in ``value`` or in any string nested inside it."""
    if isinstance(value, str):
        return pattern.search(value) is not None
    if isinstance(value, dict):
        return any(_holds(v, pattern) for v in value.values())
    if isinstance(value, list):
        return any(_holds(v, pattern) for v in value)
    return False


#: settings that name a folder or file; relative values are relative to the project folder
_PATH_FIELDS = frozenset(
    {
        "cwd",
        "log_dir",
        "logDir",
        "log_directory",
        "logDirectory",
        "subagent_root",
        "subagentRoot",
        "workspace_template",
        "workspaceTemplate",
    }
)


def project_dir(targets_file: Path) -> Path:
    """The folder a targets file's relative paths start from.

    For ``<project>/.agentv/targets.yaml`` that is ``<project>``; for a targets file
    anywhere else, its own folder. So ``cwd: scripts`` means the same wherever agentv runs.
    """
    folder = targets_file.resolve().parent
    return folder.parent if folder.name == ".agentv" else folder


def _anchor_paths(fields: dict[str, Any], base: Path) -> None:
    for key, value in list(fields.items()):
        if key in _PATH_FIELDS and isinstance(value, str) and value.strip():
            path = Path(value.strip()).expanduser()
            fields[key] = str(path if path.is_absolute() else base / path)
        elif key == "healthcheck" and isinstance(value, dict):
            value = dict(value)
            _anchor_paths(value, base)
            fields[key] = value


def _describe(err: Any) -> str:
    """One pydantic error, said without the offending value (it may be a secret)."""
    loc = format_key(tuple(err["loc"]))
    if err["type"] == "extra_forbidden":
        return f"unknown setting `{loc}`"
    if err["type"] == "missing":
        return f"missing required setting `{loc}`"
    message = _pydantic_message(err)
    return f"invalid `{loc}`: {message}" if loc else message
