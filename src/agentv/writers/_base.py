"""What every result writer shares: the protocol, the file handling and the errors."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, Self, runtime_checkable

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


class FileWriter:
    """The file handling every writer shares: one unbuffered file, one writer at a time
    (workers on other threads may write too), closing (again is fine), ``with`` support."""

    format = ""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle = open_results_file(path)
        self._lock = threading.Lock()

    @contextmanager
    def _writing(self) -> Iterator[Any]:
        """The open file, held for this writer alone; ``ResultsFileError`` once closed."""
        with self._lock:
            if self._handle is None:
                raise ResultsFileError(
                    f"Cannot write to closed {self.format.upper()} writer ({self.path})"
                )
            yield self._handle

    def close(self) -> None:
        """Close the file (again is fine)."""
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None

    @property
    def closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._handle is None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
