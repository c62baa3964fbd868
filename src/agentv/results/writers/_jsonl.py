"""JSON Lines: one compact JSON object per line, each line on disk when written."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from agentv.results.writers._base import FileWriter, write_all
from agentv.results.writers._fit import fitted

_OPTIONS = orjson.OPT_APPEND_NEWLINE


def _default(obj: Any) -> Any:
    """Values JSON has no type for: the nearest JSON shape, else their text."""
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, set | frozenset):
        return sorted(obj, key=str)
    if isinstance(obj, bytes | bytearray):
        return bytes(obj).decode("utf-8", errors="replace")
    model_dump = getattr(obj, "model_dump", None)  # pydantic models
    if callable(model_dump):
        return model_dump(mode="json")
    return str(obj)


def _plain(value: Any) -> Any:
    """A copy ``json`` can write as strict JSON (string keys, no NaN or infinity)."""
    if isinstance(value, Mapping):
        return {k if isinstance(k, str) else str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None  # what orjson writes for them too
    if value is None or isinstance(value, str | int | float):
        return value
    return _plain(_default(value))


def dumps_line(record: Mapping[str, Any]) -> bytes:
    """``record`` as one compact JSON line (UTF-8, ending in ``\\n``)."""
    try:
        return orjson.dumps(record, default=_default, option=_OPTIONS)
    except orjson.JSONEncodeError:
        # orjson refuses a few valid Python values (integers over 64 bits, non-string
        # keys, lone surrogates); the standard library writes them, more slowly.
        plain = _plain(record)
        text = json.dumps(plain, ensure_ascii=False, separators=(",", ":"))
        try:
            return (text + "\n").encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate (JSON lets "\\ud800" through): escaped
            return (json.dumps(plain, separators=(",", ":")) + "\n").encode("ascii")


class JsonlWriter(FileWriter):
    """Writes each result as one JSON line, straight to the file (no buffering)."""

    format = "jsonl"

    def write(self, record: dict[str, Any]) -> None:
        """Append one record as a single line in a single write (never a line larger
        than a reader takes: ``_fit``)."""
        line = fitted(record, dumps_line)
        with self._writing() as handle:
            write_all(handle, line, self.path)
