"""Reading a targets file: every entry checked, every problem located.

Reading never looks at the environment, so ``agentv validate`` works without any key set:
each entry's common keys are checked by ``TargetEntry`` and its provider's fields by that
provider's ``Settings`` model, a field holding ``${{ VAR }}`` being checked only when the
target is built (``agentv.targets.resolve``).

A problem of one entry belongs to that entry, so that a typo in a target a run does not use
never stops it: the entry is kept, marked unusable, and only a run using it fails (with the
reasons and their lines). Problems of the file itself make it unusable.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentv.errors import Diagnostic, InputError
from agentv.providers import registry
from agentv.providers.pricing import TargetPrice
from agentv.system.readfile import resolved
from agentv.targets.discovery import project_dir
from agentv.targets.paths import (
    anchor_paths,
    has_relative_path,
)
from agentv.targets.schema import (
    BROKEN_ENV_REF,
    BROKEN_ENV_REF_HINT,
    COMMON_KEYS,
    ENV_REF,
    TargetDefinition,
    TargetEntry,
    TargetsDocument,
    TargetsFile,
    broken_env_ref,
)
from agentv.targets.schema_errors import (
    entry_label,
    translate_errors,
    validate_without,
)
from agentv.yaml.source import PathKey, YamlSource, format_key, load_yaml


def load_targets_file(path: Path) -> TargetsFile:
    """Parse and check a targets file for a run; raises ``InputError`` with every located
    problem when the file has an error: the file itself is unusable (not a mapping, a wrong
    or missing ``$schema``, ``targets`` not a list, a name used twice), or an entry has an
    invalid or misspelled setting or a ``judge_target`` naming no target. ``agentv validate``
    reports exactly these as errors, so it passes when a run can read the file.

    An unknown provider kind is the one problem that stays a warning (``diagnostics``) until
    a run uses that target (``TargetsFile.get`` then raises): the file may be shared with a
    newer agentv (docs/targets.md).
    """
    path = resolved(Path(path))
    src = load_yaml(path)
    parsed = _parse(src)
    if any(d.severity == "error" for d in parsed.diagnostics):
        raise InputError(f"{path}: invalid targets file", parsed.diagnostics)
    return TargetsFile(path=path, targets=parsed.targets, diagnostics=parsed.diagnostics)


def validate_targets_file(path: Path) -> list[Diagnostic]:
    """Every problem in a targets file (for ``agentv validate``), including warnings for agent
    targets that could not start on this machine (see ``setup_diagnostics``)."""
    try:
        src = load_yaml(resolved(Path(path)))
    except InputError as exc:
        return exc.diagnostics
    targets, diags = parse_targets(src)
    setup = setup_diagnostics(src, targets)
    if setup:  # `parse_targets` has put the others in file order
        diags = sorted([*diags, *setup], key=lambda d: (d.line or 0, d.column or 0))
    return diags


def setup_diagnostics(src: YamlSource, targets: Mapping[str, TargetDefinition]) -> list[Diagnostic]:
    """A warning at each agent target entry for each thing that would stop it here: a program
    that is not installed, a working directory that does not exist.

    Warnings, not errors: the eval may be meant for another machine. Relative paths start
    from ``project_dir`` as when the target runs; the environment is not read, so a value
    holding ``${{ VAR }}`` is not checked.
    """
    base = project_dir(src.path)
    out: list[Diagnostic] = []
    for definition in targets.values():
        if not definition.usable:
            continue
        settings_cls = registry.provider_class(definition.kind).Settings
        fields = dict(definition.fields)
        anchor_paths(settings_cls, fields, base)
        try:
            # a field only invalid because it holds `${{ VAR }}` is unknown until the run
            settings = validate_without(settings_cls, fields, ENV_REF)
        except ValidationError:
            continue  # `parse_targets` reported why
        hint = "ignore this warning if the target runs on another machine"
        if has_relative_path(settings_cls, definition.fields):
            hint += f"; relative paths in this target start from {base}"
        for problem in settings.setup_warnings(definition.name, definition.kind):
            out.append(
                src.diagnostic(
                    ("targets", definition.index),
                    f"target {definition.name!r} cannot run on this machine: {problem}",
                    hint=hint,
                    severity="warning",
                )
            )
    return out


def parse_targets(src: YamlSource) -> tuple[dict[str, TargetDefinition], list[Diagnostic]]:
    """Every named target of a parsed file (usable or not: see ``TargetDefinition.usable``)
    and every problem found, in file order, as ``agentv validate`` reports them: errors,
    except an unknown provider, a warning (only a run using that target fails)."""
    parsed = _parse(src)
    return parsed.targets, parsed.diagnostics


@dataclass
class _Parsed:
    targets: dict[str, TargetDefinition]
    diagnostics: list[Diagnostic]  # every problem, in file order
    file_errors: list[Diagnostic]  # those that make the whole file unusable


def _parse(src: YamlSource) -> _Parsed:
    data = src.data
    diags: list[Diagnostic] = []
    file_errors: list[Diagnostic] = []
    try:
        TargetsDocument.model_validate(data)
    except ValidationError as exc:
        file_errors.extend(translate_errors(src, exc, TargetsDocument, data))
    entries = data.get("targets") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return _Parsed({}, list(file_errors), file_errors)

    targets: dict[str, TargetDefinition] = {}
    first_seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        problems = _entry_problems(src, index, entry)
        diags.extend(problems)
        definition = _definition(src, index, entry, problems)
        if definition is None:
            continue
        if definition.name in first_seen:
            file_errors.append(
                src.diagnostic(
                    ("targets", index, "name"),
                    f"duplicate target name {definition.name!r} "
                    f"(first used by targets[{first_seen[definition.name]}])",
                    hint="give each target a different name",
                )
            )
            continue
        first_seen[definition.name] = index
        targets[definition.name] = definition

    for definition in targets.values():
        judge = definition.judge_target
        if judge and judge not in first_seen:
            close = difflib.get_close_matches(judge, list(first_seen), n=1)
            problem = src.diagnostic(
                (
                    "targets",
                    definition.index,
                    _present_key(entries[definition.index], "judge_target"),
                ),
                f"target {definition.name!r}: judge_target {judge!r} is not a target in this file",
                hint=f"did you mean {close[0]!r}?" if close else "add a target with that name",
            )
            definition.judge_problems = (problem,)
            diags.append(problem)
    diags = sorted([*diags, *file_errors], key=lambda d: (d.line or 0, d.column or 0))
    return _Parsed(targets, diags, file_errors)


def _present_key(entry: dict[str, Any], field_name: str) -> str:
    """Which spelling of a common field the entry uses (for locating messages)."""
    for spelling, name in COMMON_KEYS.items():
        if name == field_name and spelling in entry:
            return spelling
    return field_name


def _entry_problems(src: YamlSource, index: int, entry: Any) -> list[Diagnostic]:
    """Every problem of one entry: its common keys (``TargetEntry``), then its provider's
    settings (that provider's ``Settings``; not checked when the provider is unknown)."""
    base: PathKey = ("targets", index)
    label = entry_label(entry)
    problems: list[Diagnostic] = []
    try:
        TargetEntry.model_validate(entry)
    except ValidationError as exc:
        problems.extend(translate_errors(src, exc, TargetEntry, entry, base=base, label=label))
    if not isinstance(entry, dict):
        return problems
    provider = entry.get("provider")
    kind = registry.canonical_kind(provider) if isinstance(provider, str) else None
    if kind is not None:
        assert isinstance(provider, str)
        problems.extend(
            _check_fields(src, base, label, provider.strip(), kind, _provider_fields(entry))
        )
    problems.extend(
        src.diagnostic(
            (*base, *key),
            f"{label}: `{format_key(key)}` {BROKEN_ENV_REF}",
            hint=BROKEN_ENV_REF_HINT,
        )
        for key in _broken_env_refs(_provider_fields(entry), ())
    )
    return problems


def _broken_env_refs(value: Any, key: PathKey) -> list[PathKey]:
    """Where a text value inside ``value`` holds a broken ``${{`` reference."""
    if isinstance(value, str):
        return [key] if broken_env_ref(value) else []
    if isinstance(value, dict):
        return [k for name, v in value.items() for k in _broken_env_refs(v, (*key, str(name)))]
    if isinstance(value, list):
        return [k for i, v in enumerate(value) for k in _broken_env_refs(v, (*key, i))]
    return []


def _provider_fields(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in COMMON_KEYS}


def _definition(
    src: YamlSource, index: int, entry: Any, problems: list[Diagnostic]
) -> TargetDefinition | None:
    """The entry as a target (None when it has no usable name: nothing can refer to it);
    with ``problems`` it is kept, unusable, its values taken as far as they are valid."""
    name = entry.get("name") if isinstance(entry, dict) else None
    if not isinstance(name, str) or not name.strip():
        return None
    assert isinstance(entry, dict)
    common: dict[str, Any] = {}
    for key, value in entry.items():  # the later spelling wins, as `TargetEntry` decides
        if key in COMMON_KEYS:
            common[COMMON_KEYS[key]] = value
    provider = common.get("provider")
    provider = provider.strip() if isinstance(provider, str) else ""
    judge = common.get("judge_target")
    workers = common.get("workers")
    batching = common.get("provider_batching")
    try:
        price = TargetPrice.model_validate(common["price"]) if "price" in common else None
    except ValidationError:
        price = None  # said in `problems`
    return TargetDefinition(
        name=name.strip(),
        kind=registry.canonical_kind(provider) or "" if provider else "",
        provider=provider,
        fields=_provider_fields(entry),
        judge_target=judge.strip() if isinstance(judge, str) and judge.strip() else None,
        workers=workers
        if isinstance(workers, int) and not isinstance(workers, bool) and workers >= 1
        else None,
        provider_batching=batching if isinstance(batching, bool) else False,
        price=price,
        source=src.path,
        index=index,
        problems=tuple(problems),
    )


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
        return translate_errors(
            src, exc, settings_cls, fields, base=base, label=label, provider=provider
        )
    return []
