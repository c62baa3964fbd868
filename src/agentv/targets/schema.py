"""The shape of ``targets.yaml``, and what is said when a file does not fit it.

``TargetsDocument`` is the file (``$schema`` and a ``targets`` list), ``TargetEntry`` one
entry's common keys (with their camelCase aliases); an entry's other keys belong to its
provider and are checked by that provider's own ``Settings`` model. ``translate_errors`` is
the one place where pydantic's errors on any of these models become ``Diagnostic``s with a
file:line:column; ``describe_error`` says the same without a location, for a target whose
values only go wrong once ``${{ VAR }}`` references are substituted.

Settings that name a file or folder are declared on each provider's settings class
(``path_fields``); ``anchor_paths`` makes their relative values start from a given folder.
"""

from __future__ import annotations

import difflib
import functools
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from agentv.errors import ConfigError, Diagnostic
from agentv.evalfile.schema_errors import unknown_key
from agentv.providers import registry
from agentv.yaml.source import PathKey, YamlSource, format_key

TARGETS_SCHEMA = "agentv-targets-v2.2"

#: ``${{ VAR }}``: a value taken from the environment when the target is used
ENV_REF = re.compile(r"\$\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def broken_env_ref(value: str) -> bool:
    """Whether ``value`` holds a ``${{`` that starts no complete ``${{ VAR }}`` (unclosed, or
    not a variable name): sent as it is, it would be a literal such as a key's name."""
    return "${{" in value and "${{" in ENV_REF.sub("", value)


#: what is said of such a value (never the value itself: it may hold a key)
BROKEN_ENV_REF = "has a `${{` that is not a complete `${{ VAR }}` reference"
BROKEN_ENV_REF_HINT = "write the variable as `${{ NAME }}` (letters, digits and _, closed by `}}`)"


# --- the models ---------------------------------------------------------------------------------


def _non_blank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("blank", "must not be blank")
    return value.strip()


def _known_provider(value: str) -> str:
    if registry.canonical_kind(value) is None:
        raise PydanticCustomError("unknown_provider", "unknown provider")
    return value


_Text = Annotated[StrictStr, AfterValidator(_non_blank)]


class TargetsDocument(BaseModel):
    """A whole targets file: ``$schema: agentv-targets-v2.2`` and the ``targets`` list (each
    entry is checked on its own, as a ``TargetEntry``)."""

    model_config = ConfigDict(extra="forbid")

    schema_: Literal["agentv-targets-v2.2"] = Field(alias="$schema")
    targets: list[Any]


class TargetEntry(BaseModel):
    """The keys every target may have, whatever its provider; the others stay as extra data
    (``provider_fields``) for the provider's own ``Settings`` model."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, frozen=True)

    name: _Text
    provider: Annotated[_Text, AfterValidator(_known_provider)]
    judge_target: _Text | None = Field(
        default=None, validation_alias=AliasChoices("judge_target", "judgeTarget")
    )
    workers: StrictInt | None = Field(default=None, ge=1)
    provider_batching: StrictBool | None = Field(
        default=None, validation_alias=AliasChoices("provider_batching", "providerBatching")
    )

    @model_validator(mode="before")
    @classmethod
    def _last_spelling_wins(cls, data: Any) -> Any:
        # `judge_target` and `judgeTarget` both written: the later one counts, as for a key
        # written twice (pydantic would take the first alias found)
        if not isinstance(data, dict):
            return data
        out = dict(data)
        for name, info in cls.model_fields.items():
            present = [k for k in data if k in field_spellings(info, name)]
            for spelling in present[:-1]:
                del out[spelling]
        return out

    @property
    def kind(self) -> str:
        """The canonical provider kind (aliases resolved)."""
        kind = registry.canonical_kind(self.provider)
        assert kind is not None  # checked by `_known_provider`
        return kind


def field_spellings(info: FieldInfo, name: str) -> list[str]:
    """Every spelling of one model field: its name first, then its aliases."""
    found: list[Any] = [name, info.alias]
    va = info.validation_alias
    found.extend(va.choices if isinstance(va, AliasChoices) else [va])
    return list(dict.fromkeys(s for s in found if isinstance(s, str)))


def settings_keys(settings_cls: type[BaseModel]) -> list[str]:
    """Every spelling a model accepts (field names and aliases)."""
    keys: list[str] = []
    for name, info in settings_cls.model_fields.items():
        keys.extend(k for k in field_spellings(info, name) if k not in keys)
    return keys


def _spellings(settings_cls: type[BaseModel], key: str) -> list[str]:
    """The spellings of the field that ``key`` names (by name or alias), name first."""
    for name, info in settings_cls.model_fields.items():
        spellings = field_spellings(info, name)
        if key in spellings:
            return spellings
    return [key]


#: Keys every target may have, whatever its provider (spelling -> field).
COMMON_KEYS: dict[str, str] = {
    spelling: name
    for name, info in TargetEntry.model_fields.items()
    for spelling in field_spellings(info, name)
}
_TOP_KEYS = ("$schema", "targets")


@dataclass
class TargetDefinition:
    """One entry of ``targets.yaml``; provider fields are kept raw until the target is used.

    An entry with its own problems (an unknown provider, an invalid or unknown setting) is
    kept, marked unusable: its ``problems`` say why, and it is an error only when a run
    uses it (``require_usable``). ``judge_problems`` say why its answers cannot be judged
    (a ``judge_target`` that is not in the file); the target itself stays usable.
    """

    name: str
    kind: str  # canonical provider kind (aliases resolved); "" when the provider is unknown
    provider: str  # as written
    fields: dict[str, Any]  # provider-specific fields, `${{ VAR }}` not yet substituted
    judge_target: str | None = None
    workers: int | None = None
    provider_batching: bool = False
    source: Path | None = None
    index: int = 0  # position in the file, for locating errors
    problems: tuple[Diagnostic, ...] = ()  # why this target cannot be used (empty: usable)
    judge_problems: tuple[Diagnostic, ...] = ()  # why its answers cannot be judged

    @property
    def usable(self) -> bool:
        """Whether a run can use this target (its entry has no problem of its own)."""
        return not self.problems

    def require_usable(self) -> None:
        """Raise ``ConfigError`` naming the target, its file and every reason it cannot be
        used (with its line); nothing when it is usable."""
        if self.problems:
            raise ConfigError(
                f"{self._named()} cannot be used: {problem_reasons(self.problems, self.name)}"
            )

    def require_judgeable(self) -> None:
        """Raise ``ConfigError`` when this target's ``judge_target`` names no target."""
        if self.judge_problems:
            reasons = problem_reasons(self.judge_problems, self.name)
            raise ConfigError(f"{self._named()} cannot be judged: {reasons}")

    def _named(self) -> str:
        where = f" in {self.source}" if self.source is not None else ""
        return f"target {self.name!r}{where}"


def problem_reasons(problems: tuple[Diagnostic, ...] | list[Diagnostic], name: str) -> str:
    """``line 7: unknown setting 'x' (did you mean 'y'?); line 9: ...``: each problem of
    target ``name`` said briefly, with its line, for one message."""
    label = re.compile(rf"^target {re.escape(repr(name))}(?: \([^)]*\))?(?:: | is | )")
    consequence = f"; a run that uses target {name!r} will fail"
    out: list[str] = []
    for diag in problems:
        text = label.sub("", diag.message, count=1).removesuffix(consequence)
        close = re.match(r"did you mean [^?]*\?", diag.hint or "")
        if close:
            text += f" ({close.group(0)})"
        out.append(f"line {diag.line}: {text}" if diag.line is not None else text)
    return "; ".join(dict.fromkeys(out))


@dataclass
class TargetsFile:
    """A parsed targets file: every named entry (usable or not) and what a run says about
    the file (``diagnostics``: warnings only, since a file with errors of its own is not
    loaded; each unusable entry's errors stay on the entry, ``TargetDefinition.problems``)."""

    path: Path
    targets: dict[str, TargetDefinition] = field(default_factory=dict)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def get(self, name: str) -> TargetDefinition:
        """The named target; ``ConfigError`` when there is none (listing the available
        names) or when it cannot be used (saying why, with lines)."""
        try:
            target = self.targets[name]
        except KeyError:
            names = ", ".join(self.targets) or "(none)"
            close = difflib.get_close_matches(name, list(self.targets), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(
                f"target {name!r} not found in {self.path}{hint}; available targets: {names}"
            ) from None
        target.require_usable()
        return target

    def judge_for(self, name: str) -> TargetDefinition:
        """The target that judges ``name``'s answers: its ``judge_target``, else itself.
        ``ConfigError`` when ``judge_target`` names no target or one that cannot be used."""
        target = self.get(name)
        target.require_judgeable()
        if not target.judge_target or target.judge_target == name:
            return target
        try:
            return self.get(target.judge_target)
        except ConfigError as exc:
            raise ConfigError(
                f"target {name!r} in {self.path} cannot be judged: its judge_target: {exc}"
            ) from None


# --- pydantic errors, said the user's way -------------------------------------------------------


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
        return unknown_key(src, (str(loc[0]),), str(loc[0]), _TOP_KEYS, f"unknown key {loc[0]!r}")
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
    if err["type"] == "extra_forbidden" and key is not None:
        return unknown_key(
            src,
            (*base, key),
            key,
            [*settings_keys(settings_cls), *COMMON_KEYS],
            f"{label}: unknown setting {key!r} for {provider} targets",
        )
    if err["type"] == "missing" and key is not None:
        others = [k for k in _spellings(settings_cls, key) if k != key]
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


# --- settings that are paths ------------------------------------------------------------------


@dataclass(frozen=True)
class PathLayout:
    """Where a settings model holds paths: the spellings of its path fields, and the
    layouts of the models nested under other keys (a ``healthcheck`` mapping)."""

    keys: frozenset[str] = frozenset()
    nested: MappingProxyType[str, PathLayout] = field(default_factory=lambda: MappingProxyType({}))

    def __bool__(self) -> bool:
        return bool(self.keys or self.nested)


@functools.cache
def path_layout(model: type[BaseModel]) -> PathLayout:
    """The path fields a settings model declares (``path_fields``, by field name; every
    alias of such a field counts too), followed into the models its fields hold."""
    declared: frozenset[str] = getattr(model, "path_fields", frozenset())
    keys: set[str] = set()
    nested: dict[str, PathLayout] = {}
    for name, info in model.model_fields.items():
        spellings = field_spellings(info, name)
        if name in declared:
            keys.update(spellings)
            continue
        inner = [layout for m in _models_in(info.annotation) if (layout := path_layout(m))]
        if inner:
            merged = _merge(inner)
            nested.update(dict.fromkeys(spellings, merged))
    return PathLayout(frozenset(keys), MappingProxyType(nested))


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models a field's type names (through unions, ``Annotated``, ``|``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def _merge(layouts: list[PathLayout]) -> PathLayout:
    """One layout for a value that may be any of several models (a tagged union)."""
    keys = frozenset().union(*(layout.keys for layout in layouts))
    names = {k for layout in layouts for k in layout.nested}
    nested = {
        k: _merge([layout.nested[k] for layout in layouts if k in layout.nested]) for k in names
    }
    return PathLayout(keys, MappingProxyType(nested))


def anchor_paths(settings_cls: type[BaseModel], fields: dict[str, Any], base: Path) -> None:
    """Make every relative path in ``fields`` (raw settings of ``settings_cls``) start from
    ``base``, in place; ``~`` is expanded."""
    _anchor(path_layout(settings_cls), fields, base)


def _anchor(layout: PathLayout, fields: dict[str, Any], base: Path) -> None:
    for key, value in list(fields.items()):
        if key in layout.keys and isinstance(value, str) and value.strip():
            path = Path(value.strip()).expanduser()
            fields[key] = str(path if path.is_absolute() else base / path)
        elif key in layout.nested and isinstance(value, dict):
            value = dict(value)
            _anchor(layout.nested[key], value, base)
            fields[key] = value


def has_relative_path(settings_cls: type[BaseModel], fields: dict[str, Any]) -> bool:
    """Whether any path setting in ``fields`` is relative (a ``${{ VAR }}`` value is not
    known, so it does not count)."""
    return _relative(path_layout(settings_cls), fields)


def _relative(layout: PathLayout, fields: dict[str, Any]) -> bool:
    for key, value in fields.items():
        if key in layout.keys and isinstance(value, str) and value.strip():
            if not ENV_REF.search(value) and not Path(value.strip()).expanduser().is_absolute():
                return True
        elif (
            key in layout.nested
            and isinstance(value, dict)
            and _relative(layout.nested[key], value)
        ):
            return True
    return False
