"""What every result writer shares: the protocol, the file handling and the errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from agentv.errors import AgentVError, ConfigError


class ResultsFileError(AgentVError):
    """The results file could not be written (disk full, file removed, writer closed)."""


@runtime_checkable
class ResultWriter(Protocol):
    """Appends result records to one file, each one on disk as soon as it is written."""

    path: Path
    """Where the records go."""

    def write(self, record: dict[str, Any]) -> None:
        """Append one result; it is handed to the operating system before this returns."""
        ...

    def close(self) -> None:
        """Close the file; later ``write`` calls raise ``ResultsFileError``."""
        ...


def open_results_file(path: Path) -> Any:
    """Create (or truncate) ``path`` and its parents; an unbuffered binary handle.

    Unbuffered so that each record reaches the file in the single ``write`` call that
    carries it: a killed run keeps every record written so far and never half of one.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return path.open("wb", buffering=0)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(
            f"Cannot create the results file {path}: {reason}. "
            "Choose a writable location with --out."
        ) from exc


def write_all(handle: Any, data: bytes, path: Path) -> None:
    """Write ``data`` completely; a regular file takes it in one system call."""
    try:
        written = handle.write(data)
        # A raw file may accept less than asked (rare: signals, special files); finish it.
        while written is not None and written < len(data):
            data = data[written:]
            written = handle.write(data)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ResultsFileError(f"Cannot write to the results file {path}: {reason}") from exc
