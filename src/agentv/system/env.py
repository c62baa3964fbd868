"""A run's environment: the process's variables over the ``.env`` file the run found.

The first ``.env`` found is read: the repository root's, else the working directory's.
Variables already set in the process environment win over the file. The file is read
into the run's own mapping and never into ``os.environ``: several runs in one process (the
Python API, ``asyncio.gather`` of two projects) each see their own values, never another
run's, and ``os.environ`` is never a channel between them.

While a run prepares and runs, its environment is the current one (``environment_scope``:
a context variable, inherited by the tasks and threads it starts). Everything that reads
variables for a run reads ``run_environment()``: ``${{ VAR }}`` in targets files, the
vendors' key variables, the secrets to mask, and what agents and code evaluators inherit
(``child_environment``).

What a child process inherits: the run's environment without the vendors' key variables
(``OPENAI_API_KEY``...), unless the program needs one (a Codex target needs OpenAI's) or
its settings name it. With an allow-list (``inherit_env``, opt-in), only the variables it
names (names or ``*`` patterns) and those any program needs to start (``BASE_VARIABLES``:
``PATH``, ``HOME``, the locale...) are inherited; a vendor key only when named exactly.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

ENV_FILE_NAME = ".env"
#: what every program inherits, also with an allow-list: what it needs to start and to find
#: its tools, its home folder and its locale
BASE_VARIABLES = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "TZ",
    "TMPDIR",
    "TMP",
    "TEMP",
    "LANG",
    "LANGUAGE",
    "LC_*",
    "SYSTEMROOT",
    "COMSPEC",
    "PATHEXT",
    "WINDIR",
)
#: the variables the LM API providers take a key from when a target has no ``api_key``:
#: withheld from child processes, and masked as secrets (``agentv.system.masking``)
VENDOR_KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
)


def find_env_file(repo_root: Path, cwd: Path | None = None) -> Path | None:
    """The ``.env`` that would be read: the repository root's, else the working directory's."""
    cwd = (cwd or Path.cwd()).resolve()
    for folder in (repo_root.resolve(), cwd):
        path = folder / ENV_FILE_NAME
        if path.is_file():
            return path
    return None


def read_environment(
    repo_root: Path, cwd: Path | None = None
) -> tuple[dict[str, str], Path | None]:
    """A run's environment: the process's variables over the first ``.env`` found (see
    ``find_env_file``), and that file (None: there was none). ``os.environ`` is not
    changed."""
    from dotenv import dotenv_values

    path = find_env_file(repo_root, cwd)
    env: dict[str, str] = {}
    if path is not None:
        values = dotenv_values(path, encoding="utf-8")
        env = {name: value for name, value in values.items() if value is not None}
    env.update(os.environ)
    return env, path


_current: ContextVar[Mapping[str, str] | None] = ContextVar("agentv_environment", default=None)


def run_environment() -> Mapping[str, str]:
    """The variables of the run being prepared or run here (``environment_scope``); outside
    any run, the process environment."""
    env = _current.get()
    return os.environ if env is None else env


@contextmanager
def environment_scope(env: Mapping[str, str]) -> Iterator[None]:
    """Within the block (and the tasks and threads it starts), ``run_environment()`` is
    ``env``."""
    token = _current.set(env)
    try:
        yield
    finally:
        _current.reset(token)


def vendor_keys(env: Mapping[str, str] | None = None) -> list[str]:
    """The values of the vendors' key variables that are set (in ``env``, else the run's
    environment)."""
    if env is None:
        env = run_environment()
    return [value.strip() for name in VENDOR_KEY_VARIABLES if (value := env.get(name, ""))]


def child_environment(
    *,
    inherit: Sequence[str] | None = None,
    extra: Mapping[str, str] | None = None,
    keys: Iterable[str] = (),
) -> dict[str, str]:
    """The environment of an agent or a code evaluator: the run's variables (see the
    module's docstring) without the vendors' key variables but those in ``keys`` (what the
    program needs); with ``inherit``, only the variables it names, ``BASE_VARIABLES`` and
    ``keys``. ``extra`` (a target's own ``env``) is added last."""
    needed = list(keys)
    withheld = set(VENDOR_KEY_VARIABLES) - set(needed)
    if inherit is not None:
        withheld -= set(inherit)  # a key named exactly is asked for
        patterns = [*BASE_VARIABLES, *inherit, *needed]
    out: dict[str, str] = {}
    for name, value in run_environment().items():
        if name in withheld:
            continue
        if inherit is not None and not any(_matches(name, p) for p in patterns):
            continue
        out[name] = value
    if extra:
        out.update(extra)
    return out


def _matches(name: str, pattern: str) -> bool:
    if "*" in pattern or "?" in pattern or "[" in pattern:
        return fnmatch.fnmatchcase(name, pattern)
    return name == pattern
