"""The script file a shell command runs (``python3 check.py`` runs ``check.py``), and
whether it is there: a code evaluator's or a mock tool's script that is missing would fail on
every call, after the answers were paid for, so the loader looks before the run.

Only words that name a file are looked at: the command itself (``./check.sh``) or the
script given to a known runner (``uv run grade.py``); a program found on ``PATH``, inline
code and anything after a shell operator are the shell's to find.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

from agentv.errors import Problem

# Words after which the rest of a command is code or a module name, not a script file.
_INLINE_CODE_OPTIONS = {"-c", "-e", "-m", "-p", "--eval", "--print", "--command"}
# Programs that run the script file named after them (`python3 check.py`, `uv run x.py`).
_RUNNERS = re.compile(
    r"(python|py|pypy|node|nodejs|bun|deno|ruby|perl|php|bash|sh|zsh|dash|ksh|fish|pwsh|"
    r"powershell|rscript|lua|tsx|ts-node|uv|uvx|poetry|pipenv|hatch|npx|pnpm|yarn|"
    r"dotnet|java|julia|elixir|groovy|swift|kotlin)"
    r"(\d+(\.\d+)*)?(\.exe)?",
    re.IGNORECASE,
)
# Words that may stand between a runner and its script (`uv run`, `npx tsx`, `deno run`).
_PASS_THROUGH = {"run", "exec", "x", "tsx", "ts-node", "python", "python3", "node"}
SCRIPT_SUFFIXES = (
    ".py", ".sh", ".bash", ".zsh", ".js", ".mjs", ".cjs", ".ts", ".mts", ".cts",
    ".rb", ".pl", ".php", ".r", ".ps1", ".lua", ".jl",
)  # fmt: skip
_SHELL_OPERATORS = {"|", "||", "&", "&&", ";", ">", ">>", "<", "2>", "2>&1", "(", ")"}


def _looks_like_path(word: str) -> bool:
    """A word that names a file: it has a folder part or a script's extension."""
    if not word or word.startswith("-") or any(c in word for c in " \t$*?`{}[]<>|;&="):
        return False
    if "://" in word:
        return False  # a URL
    return "/" in word or word.lower().endswith(SCRIPT_SUFFIXES)


def script_words(script: str) -> list[str]:
    """The words of a command as the shell splits them, without leading ``VAR=value``."""
    try:
        words = shlex.split(script, comments=False, posix=True)
    except ValueError:
        return []  # unbalanced quotes: left to the shell, which says it better
    # `VAR=value cmd ...`: the assignments are not the command
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        words.pop(0)
    return words


def script_file(script: str) -> str | None:
    """The file a ``code`` evaluator's command runs, when it names one; else None.

    Only words that look like file paths are returned: the command itself
    (``./check.sh``, ``scripts/grade``) or the script given to a known runner
    (``python3 check.py``, ``uv run grade.py``, ``node dist/check.js``). A program found on
    PATH, inline code (``python -c ...``) and anything after a shell operator are never
    checked: the shell would find them, not agentv.
    """
    words = script_words(script)
    if not words or words[0] in _SHELL_OPERATORS:
        return None
    program = words[0]
    if _looks_like_path(program):
        return program
    if not _RUNNERS.fullmatch(program):
        return None
    for word in words[1:]:
        if word in _SHELL_OPERATORS or word in _INLINE_CODE_OPTIONS:
            return None
        if word.startswith("-"):
            continue  # an option of the runner
        if _looks_like_path(word):
            return word
        if word not in _PASS_THROUGH:
            return None  # an argument we cannot interpret: do not guess
    return None


def script_problem(script: str, cwd: Path, what: str = "code evaluator") -> Problem | None:
    """Why a script file (a ``code`` evaluator's, or ``what``'s) cannot be run from ``cwd``,
    or None."""
    word = script_file(script)
    if word is None:
        return None
    path = Path(word).expanduser()
    if not path.is_absolute():
        path = cwd / path
    if path.exists():
        return None
    if word == script_words(script)[0] and "/" not in word and shutil.which(word):
        return None  # a program on PATH that merely ends like a script (`tool.py`)
    return Problem(
        "script",
        f"{what} script not found: {word}",
        f"the command runs in {cwd}, where {word} does not exist; create it, fix the "
        f"path, or set `cwd` on the {what.split()[-1]} to the folder that holds it",
    )
