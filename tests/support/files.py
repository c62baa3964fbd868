"""Writing the files of a test's project."""

from __future__ import annotations

from pathlib import Path


def write(root: Path, rel: str, text: str) -> Path:
    """Write ``text`` to ``root/rel`` (creating folders) and return the path.

    Args:
        root: the project folder.
        rel: the file's path under it.
        text: its content (UTF-8).
    """
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path
