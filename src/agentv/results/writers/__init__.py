"""Result writers: JSON Lines (default) or YAML, each result on disk the moment it ends.

    writer = open_writer(default_results_path(Path.cwd(), "jsonl"), "jsonl")
    writer.write(result)      # appended and handed to the OS before this returns
    writer.close()

A killed run keeps every finished result, and the file stays valid: each record goes to
the file in one unbuffered ``write`` call.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentv.errors import ConfigError, ResultsFileError
from agentv.results.writers._base import ResultWriter
from agentv.results.writers._jsonl import JsonlWriter, dumps_line
from agentv.results.writers._yaml import YamlWriter, dumps_document

__all__ = [
    "FORMATS",
    "JsonlWriter",
    "ResultWriter",
    "ResultsFileError",
    "YamlWriter",
    "default_results_path",
    "dumps_document",
    "dumps_line",
    "normalize_format",
    "open_writer",
    "record_bytes",
]

FORMATS: dict[str, type[JsonlWriter] | type[YamlWriter]] = {
    "jsonl": JsonlWriter,
    "yaml": YamlWriter,
}
"""Output formats by name (``--format``)."""

_ALIASES = {"yml": "yaml", "json-lines": "jsonl", "jsonlines": "jsonl"}


def normalize_format(fmt: str) -> str:
    """The canonical format name for ``fmt`` (case-insensitive); ``ConfigError`` if unknown."""
    name = fmt.strip().lower()
    name = _ALIASES.get(name, name)
    if name not in FORMATS:
        valid = ", ".join(FORMATS)
        raise ConfigError(f"Unknown output format '{fmt}'. Valid formats: {valid}.")
    return name


def default_results_path(cwd: Path, fmt: str, *, now: datetime | None = None) -> Path:
    """``<cwd>/.agentv/results/eval_<UTC timestamp>.<ext>``.

    For example ``eval_2025-11-30T01-02-03-456Z.jsonl``. The timestamp is ISO 8601 with milliseconds, ``:`` and ``.`` replaced by ``-`` so the
    name is valid on every file system.
    """
    name = normalize_format(fmt)
    moment = (now or datetime.now(UTC)).astimezone(UTC)
    stamp = moment.strftime("%Y-%m-%dT%H-%M-%S-") + f"{moment.microsecond // 1000:03d}Z"
    return cwd / ".agentv" / "results" / f"eval_{stamp}.{name}"


def open_writer(path: Path, fmt: str = "jsonl", *, append: bool = False) -> ResultWriter:
    """Create (truncate; with ``append``, keep) ``path`` and its folders and return a writer
    in format ``fmt``.

    Raises ``ConfigError`` for an unknown format or a file that cannot be created.
    """
    return FORMATS[normalize_format(fmt)](path, append=append)


def record_bytes(record: dict[str, Any], fmt: str, *, first: bool) -> bytes:
    """``record`` as a writer of format ``fmt`` appends it (``first``: to an empty file),
    never larger than a reader takes: for a file written another way (whole, then moved
    into place)."""
    from agentv.results.reader import MAX_RECORD_BYTES
    from agentv.results.writers._fit import fitted

    if normalize_format(fmt) == "yaml":
        separator = b"---\n" if first else b"\n---\n"
        body = fitted(record, _yaml_bytes, MAX_RECORD_BYTES - len(b"---\n"))
        return separator + body
    return fitted(record, dumps_line)


def _yaml_bytes(record: dict[str, Any]) -> bytes:
    return dumps_document(record).encode("utf-8")
