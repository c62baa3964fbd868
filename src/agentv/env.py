"""Loading ``.env`` files, so that ``${{ VAR }}`` in ``targets.yaml`` can come from one.

The first ``.env`` found is loaded: the repository root's, else the working directory's.
Variables already set in the environment are never overridden: the real environment wins.
"""

from __future__ import annotations

from pathlib import Path

from dotenv import load_dotenv

ENV_FILE_NAME = ".env"


def find_env_file(repo_root: Path, cwd: Path | None = None) -> Path | None:
    """The ``.env`` that would be loaded: the repository root's, else the working directory's."""
    cwd = (cwd or Path.cwd()).resolve()
    for folder in (repo_root.resolve(), cwd):
        path = folder / ENV_FILE_NAME
        if path.is_file():
            return path
    return None


def load_env_file(repo_root: Path, cwd: Path | None = None) -> Path | None:
    """Load the first ``.env`` (see ``find_env_file``) into ``os.environ`` without overriding
    anything already set. Returns the file loaded, or None when there was none."""
    path = find_env_file(repo_root, cwd)
    if path is not None:
        load_dotenv(path, override=False, encoding="utf-8")
    return path
