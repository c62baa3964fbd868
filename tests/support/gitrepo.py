"""Local git repositories made in tests (no network): what workspaces are made from."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

#: an author and committer of its own, whatever git configuration the machine has
_IDENTITY = {
    "GIT_AUTHOR_NAME": "Test",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(repo: Path, *args: str) -> str:
    """``git -C repo args...``'s output (its end stripped); fails the test when git does."""
    done = subprocess.run(
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **_IDENTITY},
        timeout=60,
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout.rstrip()


def commit(repo: Path, files: Mapping[str, str | bytes | None], message: str = "change") -> str:
    """Write ``files`` into ``repo`` (None: delete it), commit them all, return the SHA.
    Makes the repository (branch ``main``) when it does not exist yet."""
    if not (repo / ".git").exists():
        repo.mkdir(parents=True, exist_ok=True)
        git(repo, "init", "--quiet", "--initial-branch", "main")
    for name, content in files.items():
        path = repo / name
        if content is None:
            path.unlink()
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    git(repo, "add", "--all")
    git(repo, "commit", "--quiet", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")
