"""pydantic's errors on a targets file, said the user's way.

``translate_errors`` is the one place where errors on the targets file's models
(``targets.schema``) and on each provider's ``Settings`` become ``Diagnostic``s with a
file:line:column; ``describe_error`` says the same without a location, for a target whose
values only go wrong once ``${{ VAR }}`` references are substituted.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import (
    BaseModel,
    ValidationError,
)

from agentv.errors import Diagnostic
from agentv.evalfile.schema_errors import block_model, closest_key, unknown_key
from agentv.providers import registry
from agentv.targets.schema import (
    COMMON_KEYS,
    ENV_REF,
    TARGETS_SCHEMA,
    TOP_KEYS,
    TargetEntry,
    TargetsDocument,
    settings_keys,
    spellings,
)
from agentv.yaml.source import PathKey, YamlSource, format_key


def translate_errors(
    src: YamlSource,
    exc: ValidationError,
    model: type[BaseModel],
    data: Any,
    *,
    base: PathKey = (),
    label: str = "target",
    provider: str = "",
) -> list[Diagnostic]:
    """``exc`` (raised by ``model`` on ``data``, found at ``base`` in ``src``) as diagnostics.

    ``model`` is ``TargetsDocument``, ``TargetEntry`` or a provider's ``Settings``; ``label``
    (``target 'name'``) and ``provider`` (as written) word the entries' messages. Values are
    never echoed: a setting may hold a key written literally.
    """
    errors = exc.errors()
    if model is TargetsDocument:
        # the order a reader fixes them in: `$schema`, stray keys, then `targets`
        rank = {"$schema": 0, "targets": 2}
        errors = sorted(errors, key=lambda e: rank.get(e["loc"][0], 1) if e["loc"] else 0)
    out: list[Diagnostic] = []
    seen: set[Any] = set()
    if model not in (TargetsDocument, TargetEntry) and isinstance(data, dict):
        # a misspelt required key is one mistake: its "unknown key" says it all
        meant = _meant(errors, model, data)
        errors = [
            e for e in errors if not (e["type"] == "missing" and _where(model, e, data) in meant)
        ]
    for err in errors:
        if model is TargetsDocument:
            diag = _document_problem(src, err, data)
        elif model is TargetEntry:
            diag = _entry_problem(src, err, data, base, label)
        else:
            diag = _settings_problem(src, err, data, base, label, provider, model)
        # one message per key, not one per member of a union the value did not fit
        if diag is not None and (diag.location, diag.message) not in seen:
            seen.add((diag.location, diag.message))
            out.append(diag)
    return out


def _where(model: type[BaseModel], err: Any, data: Any) -> tuple[PathKey, str]:
    """The block an error is in (its path in the data) and the key it is about."""
    path, _ = block_model(model, tuple(err["loc"]), data)
    return path[:-1], str(path[-1]) if path else ""


def _meant(errors: list[Any], settings_cls: type[BaseModel], data: Any) -> set[tuple[PathKey, str]]:
    """The keys the unknown keys among ``errors`` are typos of: ``(block, key)``, every
    spelling of each."""
    found: set[tuple[PathKey, str]] = set()
    for err in errors:
        if err["type"] != "extra_forbidden" or not err["loc"]:
            continue
        path, block = block_model(settings_cls, tuple(err["loc"]), data)
        if block is None:
            continue
        allowed = settings_keys(block) + (list(COMMON_KEYS) if len(path) == 1 else [])
        close = closest_key(str(path[-1]), allowed)
        if close is not None:
            found.update((path[:-1], key) for key in spellings(block, close))
    return found


def _names(settings_cls: type[BaseModel]) -> list[str]:
    """The keys a target of ``settings_cls`` may hold, one spelling each (snake_case)."""
    return [*settings_cls.model_fields, *dict.fromkeys(COMMON_KEYS.values())]


def _document_problem(src: YamlSource, err: Any, data: Any) -> Diagnostic | None:
    loc = err["loc"]
    if not loc:
        return src.diagnostic(
            (),
            "a targets file must be a YAML mapping with `$schema` and `targets`",
            hint=f"start the file with `$schema: {TARGETS_SCHEMA}` and list targets under "
            "`targets:`",
        )
    if err["type"] in ("extra_forbidden", "invalid_key"):
        return unknown_key(src, (str(loc[0]),), str(loc[0]), TOP_KEYS, f"unknown key {loc[0]!r}")
    if loc[0] == "$schema":
        if err["type"] == "missing":
            return src.diagnostic(
                (), "missing `$schema`", hint=f"add `$schema: {TARGETS_SCHEMA}` at the top"
            )
        return src.diagnostic(
            ("$schema",),
            f"`$schema` is {data['$schema']!r}, expected {TARGETS_SCHEMA!r}",
            hint=f"set `$schema: {TARGETS_SCHEMA}`",
        )
    what = "missing" if err["type"] == "missing" else "not a list"
    return src.diagnostic(
        ("targets",),
        f"`targets` is {what}",
        hint="list the targets under `targets:`, each starting with `- name: ...`",
    )


def entry_label(entry: Any) -> str:
    """``target 'name'`` when the entry has a usable name, else ``target``."""
    name = entry.get("name") if isinstance(entry, dict) else None
    return f"target {name.strip()!r}" if isinstance(name, str) and name.strip() else "target"


def provider_choices() -> list[str]:
    """Every ``provider:`` value accepted (kinds and aliases), sorted."""
    return sorted({*registry.KINDS, *registry.ALIASES})


def _entry_problem(
    src: YamlSource, err: Any, entry: Any, base: PathKey, label: str
) -> Diagnostic | None:
    loc = err["loc"]
    if not loc:
        return src.diagnostic(
            base,
            "a target must be a mapping",
            hint="start each target with `- name: ...` followed by `provider: ...`",
        )
    spelling = loc[0]
    field_name = COMMON_KEYS.get(spelling) if isinstance(spelling, str) else None
    value = entry.get(spelling)
    where = (*base, spelling)
    if field_name == "name":
        what = "has no `name`" if value is None else "`name` must be non-empty text"
        return src.diagnostic(where, f"target {what}", hint="add `name: my-target`")
    if field_name == "provider":
        choices = provider_choices()
        if err["type"] != "unknown_provider":
            what = "has no `provider`" if value is None else "`provider` must be non-empty text"
            return src.diagnostic(
                where, f"{label} {what}", hint=f"valid providers: {', '.join(choices)}"
            )
        close = difflib.get_close_matches(value.strip().lower(), choices, n=1)
        # a warning: only a run that uses this target needs its provider (the target is
        # kept, unusable, with this diagnostic as its problem)
        consequence = f"; a run that uses {label} will fail" if label != "target" else ""
        return src.diagnostic(
            where,
            f"{label}: {value.strip()!r} is not a known provider{consequence}",
            hint=(f"did you mean {close[0]!r}? " if close else "")
            + f"valid providers: {', '.join(choices)}",
            severity="warning",
        )
    if field_name == "judge_target":
        return src.diagnostic(where, f"{label}: `{spelling}` must be the name of another target")
    if field_name == "workers":
        return src.diagnostic(
            where,
            f"{label}: `workers` must be a whole number of at least 1",
            hint="for example `workers: 4`",
        )
    if field_name == "provider_batching":
        return src.diagnostic(where, f"{label}: `{spelling}` must be true or false")
    if field_name == "price":
        return _price_problem(src, err, value, where, label)
    return None  # a provider's key (a key that is not text, say): its settings report it


def _settings_problem(
    src: YamlSource,
    err: Any,
    fields: dict[str, Any],
    base: PathKey,
    label: str,
    provider: str,
    settings_cls: type[BaseModel],
) -> Diagnostic | None:
    loc = err["loc"]
    key = str(loc[0]) if loc else None
    value = fields.get(key) if key is not None else None
    if err["type"] == "extra_forbidden" and key is not None and len(loc) > 1:
        # a key inside a block of a setting (`healthcheck: {type: http, ...}`)
        path, block = block_model(settings_cls, tuple(loc), fields)
        if block is not None:
            return unknown_key(
                src,
                (*base, *path),
                str(path[-1]),
                settings_keys(block),
                f"{label}: unknown key {path[-1]!r} in `{format_key(path[:-1])}`",
                shown=list(block.model_fields),
            )
    if err["type"] == "extra_forbidden" and key is not None:
        return unknown_key(
            src,
            (*base, key),
            key,
            [*settings_keys(settings_cls), *COMMON_KEYS],
            f"{label}: unknown setting {key!r} for {provider} targets",
            shown=_names(settings_cls),
        )
    if err["type"] == "missing" and key is not None and len(loc) > 1:
        path, _ = block_model(settings_cls, tuple(loc), fields)
        return src.diagnostic(
            (*base, *path[:-1]),
            f"{label}: `{format_key(path[:-1])}` has no `{path[-1]}`",
            hint=f"add `{path[-1]}: ...` to it",
        )
    if err["type"] == "missing" and key is not None:
        others = [k for k in spellings(settings_cls, key) if k != key]
        also = f" (or {', '.join(others)})" if others else ""
        return src.diagnostic(
            base,
            f"{label} ({provider}) is missing the required setting `{key}`",
            hint=f"add `{key}: ...`{also} to this target",
        )
    if isinstance(value, str) and ENV_REF.search(value):
        return None  # its value comes from the environment: checked when the target is used
    if key is None:
        return src.diagnostic(base, f"{label} ({provider}): {_pydantic_message(err)}")
    return src.diagnostic(
        (*base, *loc), f"{label}: invalid `{format_key(tuple(loc))}`: {_pydantic_message(err)}"
    )


def describe_error(err: Any) -> str:
    """One pydantic error on a provider's settings, said without the offending value (it may
    be a secret) and without a location: for values known only once the target is built."""
    loc = format_key(tuple(err["loc"]))
    if err["type"] == "extra_forbidden":
        return f"unknown setting `{loc}`"
    if err["type"] == "missing":
        return f"missing required setting `{loc}`"
    message = _pydantic_message(err)
    return f"invalid `{loc}`: {message}" if loc else message


def _pydantic_message(err: Any) -> str:
    msg = str(err.get("msg", "invalid value"))
    return msg.removeprefix("Value error, ")


def validate_without(
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


_PRICE_KEYS = ("input_per_mtok", "output_per_mtok", "cached_input_per_mtok")


def _price_problem(
    src: YamlSource, err: Any, value: Any, where: PathKey, label: str
) -> Diagnostic | None:
    """A target's ``price:`` that does not fit ``TargetPrice`` (docs/targets.md, "Prices")."""
    hint = "for example `price: {input_per_mtok: 2.5, output_per_mtok: 10}` (US dollars)"
    loc = err["loc"]
    if len(loc) < 2 or not isinstance(value, dict):
        return src.diagnostic(where, f"{label}: `price` must be a mapping of prices", hint=hint)
    key = str(loc[1])
    if err["type"] == "extra_forbidden":
        return unknown_key(src, (*where, key), key, _PRICE_KEYS, f"{label}: unknown price {key!r}")
    if err["type"] == "missing":
        if any(closest_key(str(k), _PRICE_KEYS) == key for k in value if k not in _PRICE_KEYS):
            return None  # misspelt: its "unknown price" says it
        return src.diagnostic(where, f"{label}: `price` has no `{key}`", hint=hint)
    return src.diagnostic(
        (*where, key),
        f"{label}: `price.{key}` must be a number of US dollars per million tokens, from 0 "
        "to 1,000,000,000 (written as a number, not as text)",
        hint=hint,
    )
