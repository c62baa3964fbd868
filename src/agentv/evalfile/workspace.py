"""A case's ``workspace:`` block, from its mapping to a ``Workspace`` (docs/eval-files.md,
"Workspaces").

The file's block holds the defaults of every case; a case's own block is merged over it key
by key (``hooks`` hook by hook), so that twenty tasks share their template, hooks and
sandbox and each pins its own commit. What can be known before the run is checked here and
reported at the key it is about: folders that do not exist or lie outside the repository
root, local repositories without the commit a case names, settings that do not go
together, and, once per file, a workspace that runs its agent without a sandbox.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Protocol, TypeVar

from agentv.cases import HOOK_NAMES, Hook, Isolation, Repo, Workspace
from agentv.errors import Diagnostic
from agentv.evalfile import schema as sc
from agentv.system.git import git_environment
from agentv.yaml.source import PathKey, YamlSource

T = TypeVar("T")

#: a repository named by URL (``https://``, ``ssh://``, ``git@host:path``); anything else
#: is a folder on this machine (``file://`` included)
_URL = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|[\w.-]+@[\w.-]+:)", re.IGNORECASE)
#: how long the check of a local repository's commit may take
GIT_CHECK_TIMEOUT_S = 30.0


def is_url(repo: str) -> bool:
    """Whether ``repo`` names a repository by URL rather than as a folder here."""
    return bool(_URL.match(repo)) and not repo.lower().startswith("file://")


class _Builder(Protocol):
    """What this module reads of the case builder (``agentv.evalfile.build``)."""

    @property
    def src(self) -> YamlSource: ...

    def memo(self, key: Hashable, make: Callable[[], T]) -> T: ...

    def folder(
        self, raw: str | None, key: PathKey, diags: list[Diagnostic], what: str
    ) -> Path | None: ...


def merged(file_block: Mapping[str, Any] | None, own: Mapping[str, Any]) -> dict[str, Any]:
    """A case's block merged over the file's: key by key, ``hooks`` hook by hook."""
    out = dict(file_block or {})
    for key, value in own.items():
        if key == "hooks" and isinstance(value, dict) and isinstance(out.get("hooks"), dict):
            out["hooks"] = {**out["hooks"], **value}
        else:
            out[key] = value
    return out


class WorkspaceReader:
    """Builds the ``Workspace`` of a block, reporting its problems at their keys.

    ``places`` says where each top-level key was written (the case's block, or the
    file's); a problem about keys written only in the file's block is said once, with the
    file's block, and not again for every case that merges it.
    """

    def __init__(self, builder: _Builder, eval_file: Path) -> None:
        self.builder = builder
        self.eval_file = eval_file

    def read(
        self,
        raw: sc.RawWorkspace,
        places: Mapping[str, PathKey],
        diags: list[Diagnostic],
        *,
        file_keys: frozenset[str] = frozenset(),
    ) -> Workspace | None:
        """The workspace ``raw`` describes, or None when it has an error (said in
        ``diags``). ``file_keys``: keys that came from the file's block, whose own problems
        were said with it."""
        found: list[Diagnostic] = []

        def problem(key: str, sub: PathKey, message: str, hint: str, *, warn: bool = False) -> None:
            if key in file_keys:
                return  # the file's block said it
            where = (*places.get(key, ()), key, *sub)
            severity = "warning" if warn else "error"
            found.append(self.builder.src.diagnostic(where, message, hint=hint, severity=severity))

        def folder(key: str, sub: PathKey, value: str, what: str) -> Path | None:
            where = (*places.get(key, ()), key, *sub)
            out: list[Diagnostic] = []
            resolved = self.builder.folder(value, where, out, what)
            if key not in file_keys:
                found.extend(out)
            return resolved

        mode = raw.mode or ("static" if raw.path is not None else "temp")
        template = None
        if raw.template is not None:
            template = folder("template", (), raw.template, "workspace template")
        path = None
        if raw.path is not None:
            path = folder("path", (), raw.path, "workspace folder")
        if mode == "static":
            if raw.path is None:
                problem(
                    "mode",
                    (),
                    "a static workspace needs `path`: the folder the agent works in",
                    "add `path:` with an existing folder, or use `mode: temp`",
                )
            for key in ("template", "repos"):
                if getattr(raw, key) is not None:
                    problem(
                        key,
                        (),
                        f"a static workspace is used as it is: `{key}` has no effect",
                        "leave it out, or use `mode: temp` or `mode: pooled` to make a "
                        "workspace from it",
                    )
        elif raw.path is not None:
            problem(
                "path",
                (),
                f"`path` names a static workspace's folder, but the mode is {mode!r}",
                "use `template:` for a folder to copy into each workspace, or `mode: static`",
            )
        if raw.keep not in (None, "never") and mode != "temp":
            problem(
                "keep",
                (),
                f"`keep` is for temp workspaces (this one is {mode})",
                "a pooled or static workspace stays where it is: leave `keep` out",
            )
        repos = self._repos(raw, places, problem, folder)
        hooks = {
            name: _hook(value)
            for name in HOOK_NAMES
            if raw.hooks is not None and (value := getattr(raw.hooks, name)) is not None
        }
        isolation = self._isolation(raw, places, problem)
        diags.extend(found)
        if any(d.severity == "error" for d in found):
            return None
        if repos is None or (raw.template is not None and template is None):
            return None
        if raw.path is not None and path is None:
            return None
        if isolation is None:
            return None
        return Workspace(
            mode=mode,
            template=template,
            repos=repos,
            path=path,
            keep=raw.keep or "never",
            hooks=hooks,
            isolation=isolation,
            max_diff_bytes=(
                raw.max_diff_bytes
                if raw.max_diff_bytes is not None
                else Workspace.__dataclass_fields__["max_diff_bytes"].default
            ),
            disk_limit=int(raw.disk_limit_mb * 1024 * 1024) if raw.disk_limit_mb else None,
            eval_file=self.eval_file,
        )

    def _repos(
        self,
        raw: sc.RawWorkspace,
        places: Mapping[str, PathKey],
        problem: Callable[..., None],
        folder: Callable[[str, PathKey, str, str], Path | None],
    ) -> tuple[Repo, ...] | None:
        out: list[Repo] = []
        broken = False
        seen: dict[str, int] = {}
        for i, entry in enumerate(raw.repos or ()):
            if entry.commit is not None and entry.base_commit is not None:
                problem(
                    "repos",
                    (i, "base_commit"),
                    "`commit` and `base_commit` both name the commit",
                    "keep one of them (`base_commit` is accepted for SWE-bench-style data)",
                )
                broken = True
                continue
            commit = entry.commit or entry.base_commit or "HEAD"
            where = _inside(entry.path)
            if where is None:
                problem(
                    "repos",
                    (i, "path"),
                    f"repository path {entry.path!r} is not a folder inside the workspace",
                    "give a relative path without `..` (`.`: the workspace itself)",
                )
                broken = True
                continue
            clash = next((p for p in seen if _nested(p, where)), None)
            if clash is not None:
                what = "twice" if clash == where else f"inside {clash!r}, another one's"
                problem(
                    "repos",
                    (i, "path"),
                    f"repository path {where!r} is used {what}",
                    "give each repository a folder of its own, none inside another",
                )
                broken = True
                continue
            seen[where] = i
            repo = entry.repo
            if not is_url(repo):
                local = repo.removeprefix("file://") if repo.lower().startswith("file://") else repo
                found = folder("repos", (i, "repo"), local, "repository")
                if found is None:
                    broken = True
                    continue
                reason = self.builder.memo(
                    ("git-commit", found, commit), lambda f=found, c=commit: _commit_problem(f, c)
                )
                if reason is not None:
                    message, hint, warn = reason
                    problem("repos", (i, "commit"), message, hint, warn=warn)
                    if not warn:
                        broken = True
                        continue
                repo = str(found)
            out.append(Repo(path=where, repo=repo, commit=commit, sparse=tuple(entry.sparse or ())))
        return None if broken else tuple(out)

    def _isolation(
        self, raw: sc.RawWorkspace, places: Mapping[str, PathKey], problem: Callable[..., None]
    ) -> Isolation | None:
        kind = raw.isolation or "none"
        if kind == "docker" and not raw.image:
            problem(
                "isolation",
                (),
                "`isolation: docker` needs `image`: the container image the agent runs in",
                "add `image:` (one that has the agent's program installed)",
            )
            return None
        if raw.image is not None and kind != "docker":
            problem(
                "image",
                (),
                "`image` is for `isolation: docker`",
                "set `isolation: docker`, or leave `image` out",
            )
        writable = []
        for value in raw.writable or ():
            path = Path(value).expanduser()
            if not path.is_absolute():
                path = self.eval_file.parent / path
            writable.append(Path(path).absolute())
        if raw.writable and kind == "none":
            problem(
                "writable",
                (),
                "`writable` is for a sandbox (`isolation: bwrap` or `docker`): without one "
                "the agent can write anywhere",
                "set `isolation:`, or leave `writable` out",
                warn=True,
            )
        return Isolation(
            kind=kind, network=bool(raw.network), image=raw.image, writable=tuple(writable)
        )


def _hook(value: str | sc.RawHook) -> Hook:
    if isinstance(value, str):
        return Hook(value)
    return Hook(value.command, value.timeout_seconds)


def _inside(path: str) -> str | None:
    """``path`` as a normalised relative folder of the workspace (``.`` for the workspace
    itself), or None when it leaves it."""
    pure = PurePosixPath(path.replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts:
        return None
    text = pure.as_posix()
    return text or "."


def _nested(a: str, b: str) -> bool:
    """Whether one of two workspace folders is the other or holds it."""
    if a == b or a == "." or b == ".":
        return True
    return b.startswith(a + "/") or a.startswith(b + "/")


def _commit_problem(repo: Path, commit: str) -> tuple[str, str, bool] | None:
    """Why ``commit`` cannot be checked out of the local repository ``repo`` (message,
    hint, only a warning), or None."""
    git = shutil.which("git", path=git_environment().get("PATH"))
    if git is None:
        return (
            "git is not installed: the repository cannot be checked out",
            "install git (apt-get install git)",
            True,
        )

    def ask(*args: str) -> subprocess.CompletedProcess[str]:
        # the loader is synchronous; git answers these from the repository at once
        return subprocess.run(
            [git, "-C", str(repo), *args],
            capture_output=True,
            text=True,
            timeout=GIT_CHECK_TIMEOUT_S,
            check=False,
            env=git_environment(),
        )

    try:
        if ask("rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}").returncode == 0:
            return None
        is_repo = ask("rev-parse", "--git-dir").returncode == 0
    except (OSError, subprocess.TimeoutExpired) as exc:
        return (f"could not ask git about {repo}: {exc}", "check the repository", True)
    if not is_repo:
        return (
            f"{repo} is not a git repository",
            "point `repo` at a git repository (a folder holding .git, or a bare one)",
            False,
        )
    return (
        f"commit {commit!r} is not in the repository {repo}",
        "give a commit, tag or branch the repository has (`git -C REPO log` lists them)",
        False,
    )
