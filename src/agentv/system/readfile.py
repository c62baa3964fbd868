"""Opening the files agentv reads as input: regular files only.

Eval, targets, config, JSON Schema, cache, results and attached files, and the files an
agent writes its answer to, are opened here. A name can stand for something that is not a
file: a FIFO (opening it waits for a writer that never comes), a device (``/dev/zero``
never ends), a socket, or symbolic links that point at each other. Each is refused with an
``OSError`` whose ``strerror`` says what it is, so that every caller's existing handling of
unreadable files reports it in words, with the file's name, instead of hanging or reading
for ever. A symbolic link to a regular file is a regular file.

The file is checked before it is opened (opening a FIFO or a device can block or act), and
again on the open descriptor, which is opened without blocking: a name swapped in between
cannot slip through.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
LOOP = "a loop of symbolic links that never reaches a file"


class NotARegularFileError(OSError):
    """The name is a FIFO, a device, a socket or a folder, not a file to read."""

    def __init__(self, path: Path | str, what: str) -> None:
        super().__init__(errno.EINVAL, f"is {what}, not a regular file", str(path))
        self.what = what


class FileTooLargeError(OSError):
    """The file holds more than its reader takes."""

    def __init__(self, path: Path | str, limit: int) -> None:
        super().__init__(errno.EFBIG, f"holds more than {limit:,} bytes", str(path))
        self.limit = limit


def kind(mode: int) -> str | None:
    """What a file of ``mode`` is, in words (None: a regular file)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "not a file"  # pragma: no cover - no other kind on POSIX


def special(path: Path | str) -> str | None:
    """Why ``path`` cannot be read as a file although it exists (``a FIFO (named pipe)``,
    ``a character device``, a loop of symbolic links...); None for a regular file, a
    folder, or nothing at all."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return LOOP if exc.errno == errno.ELOOP else None
    if stat.S_ISDIR(mode):
        return None
    return kind(mode)


def open_input(path: Path | str) -> BinaryIO:
    """``path`` opened for reading in binary, if it is a regular file. Raises ``OSError``
    when it is not (``NotARegularFileError``, or ``strerror`` naming a loop of symbolic
    links) or cannot be opened."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise _explained(exc) from None
    what = kind(mode)
    if what is not None:
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(path))
        raise NotARegularFileError(path, what)
    try:
        fd = os.open(path, os.O_RDONLY | _NONBLOCK | _CLOEXEC)
    except OSError as exc:
        raise _explained(exc) from None
    try:
        what = kind(os.fstat(fd).st_mode)
        if what is not None:  # swapped since it was looked at
            raise NotARegularFileError(path, what)
        if _NONBLOCK:
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_input(path: Path | str, limit: int | None = None) -> bytes:
    """The bytes of the regular file ``path`` (see ``open_input``); ``FileTooLargeError``
    when it holds more than ``limit`` (never more than ``limit + 1`` bytes are read)."""
    with open_input(path) as handle:
        if limit is None:
            return handle.read()
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise FileTooLargeError(path, limit)
    return data


def resolved(path: Path) -> Path:
    """``path.resolve()``; the absolute path itself when it is a special file or a loop of
    links (so that it is named as the user wrote it, not as ``/dev/zero``)."""
    if special(path) is not None:
        return path.absolute()
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # RuntimeError: Python 3.11's "Symlink loop"
        return path.absolute()


def _explained(exc: OSError) -> OSError:
    if exc.errno == errno.ELOOP:
        return OSError(errno.ELOOP, LOOP, exc.filename)
    return exc
