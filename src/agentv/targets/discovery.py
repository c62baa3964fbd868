"""Finding the targets file of an eval file, and the folder its relative paths start from."""

from __future__ import annotations

from pathlib import Path

from agentv.errors import ConfigError
from agentv.system.readfile import resolved, special

#: Looked for in each folder, in this order.
CANDIDATE_NAMES: tuple[str, ...] = (
    ".agentv/targets.yaml",
    ".agentv/targets.yml",
    "targets.yaml",
    "targets.yml",
)


def discover_targets_file(
    eval_file: Path, repo_root: Path, cwd: Path, explicit: Path | None = None
) -> Path:
    """``explicit`` if given, else ``.agentv/targets.yaml`` (or ``targets.yaml``) searched from
    the eval file's folder up to the repository root, then the working directory."""
    if explicit is not None:
        return explicit_targets_file(explicit, cwd)
    found = find_targets_file(eval_file, repo_root, cwd)
    if found is None:
        raise no_targets_file(eval_file, repo_root, cwd)
    return found


def explicit_targets_file(explicit: Path, cwd: Path) -> Path:
    """The targets file ``--targets`` names: the file itself, or one in the folder given."""
    path = resolved(explicit if explicit.is_absolute() else cwd / explicit)
    if path.is_file() or special(path):  # a FIFO or a device is refused when it is read
        return path
    if path.is_dir():
        found = _first_candidate(path)
        if found is not None:
            return found
        raise ConfigError(
            f"no targets file in {path} (looked for {', '.join(CANDIDATE_NAMES)}); "
            "pass the file itself with --targets"
        )
    raise ConfigError(f"targets file not found: {path}; check the path given to --targets")


def find_targets_file(eval_file: Path, repo_root: Path, cwd: Path) -> Path | None:
    """The targets file found from the eval file's folder up to the repository root, then in
    the working directory; None when there is none."""
    for folder in _search_folders(eval_file, repo_root, cwd):
        found = _first_candidate(folder)
        if found is not None:
            return found
    return None


def no_targets_file(eval_file: Path, repo_root: Path, cwd: Path) -> ConfigError:
    """The error for an eval file without a targets file, saying where agentv looked."""
    start = _search_folders(eval_file, repo_root, cwd)[0]
    return ConfigError(
        f"no targets file found for {eval_file}: looked for .agentv/targets.yaml and "
        f"targets.yaml from {start} up to {repo_root.resolve()}, and in {cwd.resolve()}; "
        "create one (`agentv init` writes an example) or pass --targets PATH"
    )


def _search_folders(eval_file: Path, repo_root: Path, cwd: Path) -> list[Path]:
    start = eval_file.resolve()
    start = start if start.is_dir() else start.parent
    repo_root = repo_root.resolve()
    folders: list[Path] = [start]
    if repo_root == start or repo_root in start.parents:
        for folder in start.parents:
            folders.append(folder)
            if folder == repo_root:
                break
    cwd = cwd.resolve()
    if cwd not in folders:
        folders.append(cwd)
    return folders


def _first_candidate(folder: Path) -> Path | None:
    for name in CANDIDATE_NAMES:
        path = folder / name
        if path.is_file() or special(path):  # refused, in words, when it is read
            return path
    return None


def project_dir(targets_file: Path) -> Path:
    """The folder a targets file's relative paths start from.

    For ``<project>/.agentv/targets.yaml`` that is ``<project>``; for a targets file
    anywhere else, its own folder. So ``cwd: scripts`` means the same wherever agentv runs.
    """
    folder = resolved(targets_file).parent
    return folder.parent if folder.name == ".agentv" else folder
