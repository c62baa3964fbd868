"""Writing the files agentv makes for people and tools (the HTML report, JUnit XML, the
summary's JSON): whole, or not at all.

The content goes to a temporary file beside the target (``.NAME.<pid>.<hex>.tmp``), which
replaces the target only once it is complete: a reader (a CI step, a browser) never sees
half a file, and a target that existed stays as it was when writing fails. Whatever stops
the writing (an error, Ctrl-C, SIGTERM as the command line turns it into an exception)
removes the temporary file.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from agentv.system.readfile import NotARegularFileError, special


@contextmanager
def replaced_whole(target: Path) -> Iterator[BinaryIO]:
    """A binary handle whose content replaces ``target`` when the block ends without an
    error; ``OSError`` when the target cannot be written (its folder is missing, it is a
    folder, or a FIFO or a device: never replaced by a file)."""
    what = special(target)
    if what is not None:
        raise NotARegularFileError(target, what)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # os.open with 0o666: the file gets the umask's usual mode (mkstemp's is 0o600)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as handle:
            yield handle
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_whole(target: Path, data: bytes) -> None:
    """Replace ``target`` with ``data`` (see ``replaced_whole``); its folder is created."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with replaced_whole(target) as handle:
        handle.write(data)
