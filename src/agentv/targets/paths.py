"""Settings that name a file or folder: each provider's settings class declares them
(``path_fields``), and ``anchor_paths`` makes their relative values start from the targets
file's project folder (docs/targets.md).
"""

from __future__ import annotations

import functools
import typing
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import (
    BaseModel,
)

from agentv.targets.schema import ENV_REF, field_spellings


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
