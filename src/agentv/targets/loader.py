"""Reading a targets file: every entry checked, every problem located.

Reading never looks at the environment, so ``agentv validate`` works without any key set:
each entry's common keys are checked by ``TargetEntry`` and its provider's fields by that
provider's ``Settings`` model, a field holding ``${{ VAR }}`` being checked only when the
target is built (``agentv.targets.resolve``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentv.errors import Diagnostic, InputError
from agentv.providers import registry
from agentv.targets.discovery import project_dir
from agentv.targets.schema import (
    COMMON_KEYS,
    ENV_REF,
    TargetDefinition,
    TargetEntry,
    TargetsDocument,
    TargetsFile,
    anchor_paths,
    entry_label,
    has_relative_path,
    translate_errors,
    validate_without,
)
from agentv.yamlio import PathKey, YamlSource, load_yaml


def load_targets_file(path: Path) -> TargetsFile:
    """Parse and validate a targets file; raises ``InputError`` when unusable.

    The file is unusable when it has any error, so that a typo in one target is caught
    before a long run rather than when that target is first needed.
    """
    path = Path(path).resolve()
    src = load_yaml(path)
    targets, diags = parse_targets(src)
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
    from agentv.providers.agents import CHECKED_KINDS, setup_warnings

    base = project_dir(src.path)
    out: list[Diagnostic] = []
    for definition in targets.values():
        if definition.kind not in CHECKED_KINDS:
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


def parse_targets(src: YamlSource) -> tuple[dict[str, TargetDefinition], list[Diagnostic]]:
    """The usable targets of a parsed file, and every problem found (in file order)."""
    data = src.data
    diags: list[Diagnostic] = []
    try:
        TargetsDocument.model_validate(data)
    except ValidationError as exc:
        diags.extend(translate_errors(src, exc, TargetsDocument, data))
    entries = data.get("targets") if isinstance(data, dict) else None
    if not isinstance(entries, list):
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
    label = entry_label(entry)
    problems: list[Diagnostic] = []
    common: TargetEntry | None = None
    try:
        common = TargetEntry.model_validate(entry)
    except ValidationError as exc:
        problems.extend(translate_errors(src, exc, TargetEntry, entry, base=base, label=label))
    if not isinstance(entry, dict):
        diags.extend(problems)
        return None

    provider = entry.get("provider")
    kind = registry.canonical_kind(provider) if isinstance(provider, str) else None
    fields = {k: v for k, v in entry.items() if k not in COMMON_KEYS}
    if kind is not None:
        assert isinstance(provider, str)
        problems.extend(_check_fields(src, base, label, provider.strip(), kind, fields))
    diags.extend(problems)

    if common is None or any(d.severity == "error" for d in problems):
        return None
    return TargetDefinition(
        name=common.name,
        kind=common.kind,
        provider=common.provider,
        fields=fields,
        judge_target=common.judge_target,
        workers=common.workers,
        provider_batching=bool(common.provider_batching),
        source=src.path,
        index=index,
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
