"""Where a project's run store is, and what the machine says about a run: the git commit,
whether the tree was dirty, who is reviewing.

The store is ``.agentv/runs.sqlite`` in the project: the folder of the nearest
``.agentv/config.yaml`` from the working directory up to the repository root (its
``run_store`` names another path, relative to that folder; ``register_runs: false`` turns
registration off), else the working directory.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

DEFAULT_STORE = Path(".agentv") / "runs.sqlite"
#: git is asked only briefly: a hung git never holds up a run
_GIT_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class StoreSettings:
    """Where the store is, and whether ``agentv eval`` registers its runs there."""

    path: Path
    register: bool = True


def store_settings(cwd: Path, store: Path | None = None) -> StoreSettings:
    """The store of the project ``cwd`` is in (``store``, when given, wins; relative to
    ``cwd``)."""
    from agentv.evalfile.files import find_repo_root
    from agentv.evalfile.guidelines import GuidelineResolver

    cwd = cwd.resolve()
    config, _ = GuidelineResolver().for_eval_dir(cwd, find_repo_root(cwd, cwd))
    register = config.register_runs
    if store is not None:
        return StoreSettings(cwd / store, register)
    if config.source is None:
        return StoreSettings(cwd / DEFAULT_STORE, register)
    project = config.source.parent.parent  # PROJECT/.agentv/config.yaml
    return StoreSettings(project / (config.run_store or DEFAULT_STORE), register)


@dataclass(frozen=True, slots=True)
class GitState:
    """The commit checked out (None: not a git repository, or no git) and whether tracked
    files differ from it."""

    commit: str | None = None
    dirty: bool | None = None


def _git(cwd: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=_GIT_SECONDS,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},  # a status never takes git's lock
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def git_state(cwd: Path) -> GitState:
    """The repository's state at ``cwd``."""
    commit = _git(cwd, "rev-parse", "HEAD")
    if commit is None:
        return GitState()
    status = _git(cwd, "status", "--porcelain", "--untracked-files=no")
    return GitState(commit.strip(), None if status is None else bool(status.strip()))


def git_user(cwd: Path) -> str | None:
    """git's ``user.name`` (None when unset)."""
    name = _git(cwd, "config", "user.name")
    return name.strip() or None if name is not None else None
