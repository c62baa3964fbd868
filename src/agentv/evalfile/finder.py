"""Finding eval files: the one set of rules ``eval`` and ``validate`` share.

A folder is searched recursively for ``.yaml`` / ``.yml`` files, skipping dot-folders and
``node_modules`` (dependencies); of a ``.agentv`` folder only agentv's own inputs are
taken (``config.yaml``, ``targets.yaml``: the rest is agentv's output). ``eval`` then keeps
the files that declare the eval schema; ``validate`` checks every file it found.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from wcmatch import glob

from agentv.errors import ConfigError
from agentv.system.readfile import open_input, special

YAML_SUFFIXES = (".yaml", ".yml")
#: folders never searched: dependencies (dot-folders are skipped too)
SKIPPED_FOLDERS = frozenset({"node_modules"})
#: the files agentv reads from a `.agentv/` folder
AGENTV_FILES = ("config.yaml", "targets.yaml")
EVAL_SCHEMA_MARK = "agentv-eval-v2"


def is_yaml(path: Path | str) -> bool:
    """Whether the name ends in ``.yaml`` or ``.yml`` (any case)."""
    return str(path).lower().endswith(YAML_SUFFIXES)


def yaml_files(folder: Path, *, on_error: Callable[[OSError], None] | None = None) -> list[Path]:
    """Every YAML file under ``folder`` by the rules above, in a stable order. A folder that
    cannot be read is passed to ``on_error`` (and skipped)."""
    if folder.name == ".agentv":
        return [folder / f for f in AGENTV_FILES if (folder / f).is_file()]
    out: list[Path] = []
    for current, dirs, files in os.walk(folder, onerror=on_error):
        here = Path(current)
        kept = []
        for name in sorted(dirs):
            if name == ".agentv":
                out.extend(here / name / f for f in AGENTV_FILES if (here / name / f).is_file())
            elif not name.startswith(".") and name not in SKIPPED_FOLDERS:
                kept.append(name)
        dirs[:] = kept
        out.extend(here / f for f in sorted(files) if is_yaml(f))
    return out


def declares_eval_schema(path: Path) -> bool:
    """Whether the file's first 4 KiB name the eval schema (a cheap look, no parsing)."""
    try:
        with open_input(path) as fh:  # a FIFO or a device is no eval file
            head = fh.read(4096).decode("utf-8", errors="replace")
    except OSError:
        return False
    return EVAL_SCHEMA_MARK in head


def expand_eval_paths(args: list[str], cwd: Path) -> list[Path]:
    """Files, folders (searched as above, eval files only) or globs -> sorted, de-duplicated
    eval files; ``ConfigError`` saying, for each argument that gave none, why: a path that
    does not exist, a folder without eval files, a glob that matches nothing."""
    found: dict[Path, None] = {}
    problems: list[str] = []
    for arg in (a.strip() for a in args):
        if not arg:
            continue
        path = (cwd / arg) if not os.path.isabs(arg) else Path(arg)
        if path.is_file():
            found.setdefault(path.resolve(), None)
            continue
        what = special(path)
        if what is not None:  # named like an eval file, but never read as one
            problems.append(f"{arg} is {what}, not a regular file")
            continue
        if path.is_dir():
            yamls = [p for p in yaml_files(path) if p.is_file()]
            matches = [p for p in yamls if declares_eval_schema(p)]
            if not matches:
                problems.append(_no_eval_files(arg, len(yamls)))
        elif not glob.is_magic(arg.replace("\\", "/"), flags=glob.GLOBSTAR):
            problems.append(f"{arg}: no such file or folder")
            continue
        else:
            pattern = arg.replace("\\", "/")
            matches = [
                Path(p) if os.path.isabs(p) else cwd / p
                for p in glob.glob(pattern, flags=glob.GLOBSTAR | glob.DOTGLOB, root_dir=cwd)
                if is_yaml(p)
            ]
            matches = [m for m in matches if m.is_file()]
            if not matches:
                problems.append(f"{arg}: no YAML file matches this pattern")
        for m in matches:
            found.setdefault(m.resolve(), None)
    if problems:
        raise ConfigError(
            "no eval files found: "
            + "; ".join(problems)
            + '. Give eval files, folders holding them, or globs (e.g. "evals/**/*.yaml"); '
            "`agentv init` writes an example in evals/."
        )
    if not found:
        raise ConfigError("no eval paths given. Usage: agentv eval EVAL_FILE_OR_GLOB...")
    return sorted(found)


def _no_eval_files(folder: str, yaml_count: int) -> str:
    if not yaml_count:
        return f"the folder {folder} holds no YAML files"
    files = "file" if yaml_count == 1 else "files"
    return (
        f"the folder {folder} holds {yaml_count} YAML {files}, none of them an eval file "
        f"(an eval file starts with `$schema: {EVAL_SCHEMA_MARK}`)"
    )
