"""The shape of ``targets.yaml``: its models, and a file's targets as read.

``TargetsDocument`` is the file (``$schema`` and a ``targets`` list), ``TargetEntry`` one
entry's common keys (with their camelCase aliases); an entry's other keys belong to its
provider and are checked by that provider's own ``Settings`` model. What is said when a
file does not fit is ``schema_errors.py``; settings that are paths, ``paths.py``.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
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
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError

from agentv.errors import ConfigError, Diagnostic
from agentv.providers import registry
from agentv.providers.pricing import TargetPrice

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
    #: US dollars per million tokens, over the price table's (docs/targets.md, "Prices")
    price: TargetPrice | None = None

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


def spellings(settings_cls: type[BaseModel], key: str) -> list[str]:
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
TOP_KEYS = ("$schema", "targets")


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
    price: TargetPrice | None = None  # ``price:``, when written (and valid)
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
