"""What every result writer shares: the protocol, the file handling and the errors."""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, Self, runtime_checkable

from agentv.errors import ResultsFileError, SetupError
from agentv.system.readfile import NotARegularFileError, kind, special

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


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


def open_results_file(path: Path, *, append: bool = False) -> Any:
    """Create (or empty) ``path`` and its parents, locked for this run; an unbuffered
    binary handle in append mode.

    The lock (an exclusive ``flock``, taken before anything is emptied) makes a second run
    on the same file stop at once with a ``SetupError`` instead of mixing its records into
    this run's. Unbuffered and appending, so that each record reaches the end of the file
    in the single ``write`` call that carries it: a killed run keeps every record written
    so far and never half of one.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        what = special(path)
        if what is not None:  # opening a FIFO to write waits for a reader that never comes
            raise NotARegularFileError(path, what)
        # without blocking: a name swapped for a FIFO meanwhile is found by the check below
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | _CLOEXEC | _NONBLOCK, 0o666)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise SetupError(
            f"Cannot create the results file {path}: {reason}. "
            "Choose a writable location with --out."
        ) from exc
    try:
        what = kind(os.fstat(fd).st_mode)
        if what is not None:
            raise NotARegularFileError(path, what)
        if _NONBLOCK:
            os.set_blocking(fd, True)
        _lock(fd, path)
        if not append:  # `--resume` adds to what the file holds
            os.ftruncate(fd, 0)
    except OSError as exc:
        os.close(fd)
        reason = exc.strerror or str(exc)
        raise SetupError(
            f"Cannot create the results file {path}: {reason}. "
            "Choose a writable location with --out."
        ) from exc
    except BaseException:
        os.close(fd)
        raise
    return open(fd, "ab", buffering=0)  # the writer owns it and closes it


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def _lock(fd: int, path: Path) -> None:
    """Hold ``path`` for this run alone (released when the file is closed, or the process
    dies); ``SetupError`` when another run holds it. Where the file system has no locks,
    nothing is held."""
    if fcntl is None:  # pragma: no cover - Windows
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SetupError(
            f"Cannot write the results file {path}: another agentv run is writing it. "
            "Wait for that run to finish, or choose another file with --out."
        ) from None
    except OSError as exc:
        if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.EINVAL):
            raise


def write_all(handle: Any, data: bytes, path: Path) -> None:
    """Append ``data`` whole, or not at all: a regular file takes it in one system call,
    and a write that fails part-way (disk full, file size limit) is cut back to the end
    of the last whole record before the error is raised."""
    done = 0  # bytes of `data` already in the file
    try:
        written = handle.write(data)
        # A raw file may accept less than asked (a limit reached, a signal); the next
        # write says why, or finishes it.
        while written is not None and written < len(data):
            done += written
            data = data[written:]
            written = handle.write(data)
    except OSError as exc:
        # The file is this run's alone (locked) and appended to: it ended `done` bytes
        # before where it ends now (a write that fails writes nothing).
        with contextlib.suppress(OSError, ValueError):
            fd = handle.fileno()
            os.ftruncate(fd, os.fstat(fd).st_size - done)
        reason = exc.strerror or str(exc)
        raise ResultsFileError(
            f"Cannot write to the results file {path}: {reason} "
            "(the file keeps every whole record written before)"
        ) from exc


class FileWriter:
    """The file handling every writer shares: one unbuffered file, one writer at a time
    (workers on other threads may write too), closing (again is fine), ``with`` support."""

    format = ""

    def __init__(self, path: Path, *, append: bool = False) -> None:
        self.path = path
        self._handle = open_results_file(path, append=append)
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
