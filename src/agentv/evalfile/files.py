"""Finding the files an eval file refers to, and reading each of them once per run.

Resolution follows the original AgentV: a reference is looked up in the eval file's folder,
then in each parent up to the repository root, then in the repository root and the working
directory. The first candidate that exists wins. A reference that resolves outside the
repository root is refused unless the run allows it: an eval file from an untrusted change
must not be able to attach, say, ``~/.ssh/id_rsa`` to a prompt sent to a third-party API.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from agentv.system.readfile import resolved
from agentv.yaml.source import read_text


def find_repo_root(start: Path, cwd: Path | None = None) -> Path:
    """The project's root: the nearest folder at or above ``start`` holding ``.git`` (a
    folder or a file).

    Outside any repository, the nearest folder at or above ``start`` holding ``.agentv/``
    (the project ``agentv init`` set up, its ``.env`` beside it); without one either, the
    working directory when ``start`` lies inside it, else ``start`` itself, so that files
    beside an eval file outside any project still resolve.
    """
    start = start.resolve()
    folders = (start, *start.parents)
    for folder in folders:
        if (folder / ".git").exists():
            return folder
    for folder in folders:
        if (folder / ".agentv").is_dir():
            return folder
    cwd = (cwd or Path.cwd()).resolve()
    return cwd if start == cwd or cwd in start.parents else start


def search_roots(eval_dir: Path, repo_root: Path, cwd: Path) -> list[Path]:
    """Ordered, de-duplicated folders in which references are looked up."""
    roots: list[Path] = []
    for folder in (eval_dir, *eval_dir.parents):
        roots.append(folder)
        if folder == repo_root:
            break
    for extra in (repo_root, cwd):
        if extra not in roots:
            roots.append(extra)
    return roots


def is_within(path: Path, root: Path) -> bool:
    """Whether ``path`` is ``root`` or lies below it."""
    return path == root or root in path.parents


@dataclass(slots=True)
class Resolution:
    """Where a reference pointed to: ``resolved`` is None when nothing was found."""

    display: str
    resolved: Path | None
    tried: list[Path]


@dataclass
class FileStore:
    """Per-run cache of reference resolutions and file texts.

    A guideline or attachment shared by a thousand cases is looked up and read once.
    ``reads`` counts actual disk reads (tests and benchmarks check it).
    """

    cwd: Path = field(default_factory=lambda: Path.cwd().resolve())
    reads: int = 0
    _texts: dict[Path, str] = field(default_factory=dict)
    _resolutions: dict[tuple[str, tuple[Path, ...]], Resolution] = field(default_factory=dict)

    def resolve(self, raw: str, roots: list[Path]) -> Resolution:
        """Resolve ``raw`` against ``roots`` (absolute paths are tried as they are first)."""
        key = (raw, tuple(roots))
        hit = self._resolutions.get(key)
        if hit is not None:
            return hit
        display = raw.lstrip("/\\") or raw
        candidates: list[Path] = []
        if os.path.isabs(raw):
            candidates.append(Path(raw))
        candidates.extend(root / display for root in roots)
        tried: list[Path] = []
        found: Path | None = None
        for cand in candidates:
            cand = Path(os.path.normpath(cand))
            if cand in tried:
                continue
            tried.append(cand)
            if cand.exists():
                found = cand.resolve()
                break
        res = Resolution(display=display, resolved=found, tried=tried)
        self._resolutions[key] = res
        return res

    def text(self, path: Path) -> str:
        """The file's text (UTF-8, CRLF normalised), read from disk at most once per run.

        Raises ``OSError`` when unreadable and ``UnicodeDecodeError`` when not UTF-8 text.
        """
        cached = self._texts.get(path)
        if cached is None:
            cached = read_text(path, strict=True)
            self.reads += 1
            self._texts[path] = cached
        return cached


def display_path(path: Path | str | None, cwd: Path | None = None) -> str:
    """``path`` relative to the working directory when it lies inside it, else absolute."""
    if path is None:
        return "<input>"
    path = Path(path)
    base = (cwd or Path.cwd()).resolve()
    for candidate in (resolved(path), path.absolute()):  # a link shows where it is
        try:
            return candidate.relative_to(base).as_posix()
        except ValueError:
            pass
    return str(path)
