"""Loading ``.env`` files, so that ``${{ VAR }}`` in ``targets.yaml`` can come from one.

The first ``.env`` found is loaded: the repository root's, else the working directory's.
Variables already set in the environment are never overridden: the real environment wins.
Within one process (the Python API: a notebook, a service running several projects), each
load first takes back what the previous one set, so a run sees the real environment and
its own ``.env``, never an earlier project's or an earlier version of the file.
"""

from __future__ import annotations

import os
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


#: what the last load put into ``os.environ``: variable -> the value it set
_loaded: dict[str, str] = {}


def load_env_file(repo_root: Path, cwd: Path | None = None) -> Path | None:
    """Load the first ``.env`` (see ``find_env_file``) into ``os.environ`` without overriding
    anything already set, after taking back what the previous load set (unless it was
    changed since). Returns the file loaded, or None when there was none."""
    for name, value in _loaded.items():
        if os.environ.get(name) == value:
            del os.environ[name]
    _loaded.clear()
    path = find_env_file(repo_root, cwd)
    if path is not None:
        before = set(os.environ)
        load_dotenv(path, override=False, encoding="utf-8")
        _loaded.update({name: os.environ[name] for name in set(os.environ) - before})
    return path
