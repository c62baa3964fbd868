"""YAML results: one document per result, block style, readable multi-line strings."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from agentv.results.reader import MAX_RECORD_BYTES
from agentv.results.writers._base import FileWriter, write_all
from agentv.results.writers._fit import fitted


class _ExactKey(str):
    """A mapping key holding a carriage return: written double-quoted, every character kept
    (turning its CRLF into LF, as text values get, could merge it with another key)."""


class _ResultDumper(yaml.SafeDumper):
    """Block style, sequences indented under their key, multi-line text as ``|`` blocks."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        # PyYAML writes a list flush with its key by default; indent it as people do.
        super().increase_indent(flow, False)

    def represent_mapping(self, tag: str, mapping: Any, flow_style: Any = None) -> yaml.Node:
        if isinstance(mapping, dict) and any(
            isinstance(key, str) and "\r" in key for key in mapping
        ):
            mapping = {
                _ExactKey(k) if isinstance(k, str) and "\r" in k else k: v
                for k, v in mapping.items()
            }
        return super().represent_mapping(tag, mapping, flow_style)


# Unicode line breaks YAML would fold into spaces unless escaped in double quotes.
_UNICODE_BREAKS = ("\x85", "\u2028", "\u2029")


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    if any(ch in value for ch in _UNICODE_BREAKS):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    if "\n" in value or "\r" in value:
        value = value.replace("\r\n", "\n")
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


def _represent_other(dumper: yaml.SafeDumper, value: Any) -> yaml.Node:
    """Values YAML has no tag for: the nearest plain shape, else their text."""
    if isinstance(value, Path):
        return _represent_str(dumper, str(value))
    if isinstance(value, tuple):
        return dumper.represent_list(list(value))
    if isinstance(value, set | frozenset):
        return dumper.represent_list(sorted(value, key=str))
    model_dump = getattr(value, "model_dump", None)  # pydantic models
    if callable(model_dump):
        return dumper.represent_data(model_dump(mode="json"))
    return _represent_str(dumper, str(value))


_ResultDumper.add_representer(str, _represent_str)
_ResultDumper.add_representer(
    _ExactKey,
    lambda dumper, key: dumper.represent_scalar("tag:yaml.org,2002:str", str(key), style='"'),
)
# SafeDumper has its own tags for these (``!!set``); results stay plain lists.
for _kind in (set, frozenset, tuple):
    _ResultDumper.add_representer(_kind, _represent_other)
_ResultDumper.add_multi_representer(object, _represent_other)


def dumps_document(record: dict[str, Any]) -> str:
    """``record`` as the body of one YAML document (no ``---`` line), ending in a newline."""
    return yaml.dump(
        record,
        Dumper=_ResultDumper,
        default_flow_style=False,
        sort_keys=False,
        allow_unicode=True,
        indent=2,
        width=float("inf"),  # never wrap: long answers stay on one line or in a block
    )


def _encoded(record: dict[str, Any]) -> bytes:
    return dumps_document(record).encode("utf-8")


class YamlWriter(FileWriter):
    """Writes each result as its own YAML document, straight to the file."""

    format = "yaml"

    def __init__(self, path: Path, *, append: bool = False) -> None:
        super().__init__(path, append=append)
        # whether the file is empty is known at the first write: a resumed file may have
        # had a partial last document set aside after it was opened (under its lock)
        self._first: bool | None = None if append else True

    def write(self, record: dict[str, Any]) -> None:
        """Append one record as a document (``---`` then the body) in a single write
        (never a document larger than a reader takes: ``_fit``)."""
        # the document's `---` line counts too
        body = fitted(record, _encoded, MAX_RECORD_BYTES - len(b"---\n"))
        with self._writing() as handle:
            if self._first is None:
                self._first = os.fstat(handle.fileno()).st_size == 0
            separator = b"---\n" if self._first else b"\n---\n"
            write_all(handle, separator + body, self.path)
            self._first = False
