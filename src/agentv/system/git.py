"""What agentv runs of git: the cache of the repositories workspaces are made from, their
checkouts, and the snapshots a workspace's diff is taken between.

- ``RepoCache``: each repository is cloned once (a mirror) into the cache, and fetched
  again only when it lacks what a case asks for: a SHA the cache has is never fetched, a
  branch or tag name is looked up once per cache object (one fetch, then the cached answer
  when the network is gone). A file lock keeps two processes from filling one mirror at
  once.
- ``checkout`` makes a workspace's copy of a repository from its mirror without the network
  (``git clone --shared``: the mirror's objects are borrowed, not copied), at one commit,
  sparse when asked; ``reset`` brings a reused copy back to a commit (``git reset --hard``,
  ``git clean -ffdx``).
- ``Snapshot``: the tree of a folder at one moment, written with a private index into a
  private object store (the repository and its index are never touched), and
  ``changes_between`` two of them: the files added, modified and deleted, the binary ones,
  and the unified diff, as git shows it.

Every git command runs through the one process runner (``agentv.system.process``), with
prompts for credentials turned off, and a failure is a ``WorkspaceError`` saying what was
asked of which repository.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentv.errors import WorkspaceError
from agentv.system.env import run_environment
from agentv.system.filelock import FileLock
from agentv.system.process import ProcessResult, run_process

#: how long one git command may take (a first clone of a large repository takes minutes)
GIT_TIMEOUT_S = 1800.0
#: characters of git's own words quoted in an error
DETAIL = 600
#: variables that would point git at another repository than the one asked about
_GIT_LOCATION_VARIABLES = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
)
_FULL_SHA = re.compile(r"^[0-9a-f]{40}(?:[0-9a-f]{24})?$")


def git_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment git runs in: the run's, without what would point git elsewhere,
    never prompting for credentials (a run must not hang on a password)."""
    env = {k: v for k, v in run_environment().items() if k not in _GIT_LOCATION_VARIABLES}
    env["GIT_TERMINAL_PROMPT"] = "0"
    env.setdefault("GIT_SSH_COMMAND", "ssh -o BatchMode=yes")
    if extra:
        env.update(extra)
    return env


def git_executable() -> str:
    """The git program; ``WorkspaceError`` saying how to install it when it is missing."""
    found = shutil.which("git", path=run_environment().get("PATH"))
    if found is None:
        raise WorkspaceError(
            "git is not installed, and this case's workspace has repositories to check out; "
            "install git (apt-get install git, brew install git)"
        )
    return found


async def git(
    *args: str,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    what: str,
    stdout_head: int | None = None,
    check: bool = True,
) -> ProcessResult:
    """Run ``git args...``; ``what`` says what was asked, for the error when it fails."""
    command = [git_executable(), "-c", "core.quotePath=false", *args]
    try:
        result = await run_process(
            command,
            cwd=cwd,
            env=git_environment(env),
            timeout=GIT_TIMEOUT_S,
            stdout_head=stdout_head,
        )
    except OSError as exc:
        raise WorkspaceError(f"could not run git to {what}: {exc}") from None
    if check and not result.ok:
        detail = result.stderr_tail(DETAIL) or result.stdout_tail(DETAIL)
        raise WorkspaceError(
            f"git could not {what}: git {result.describe_exit()}"
            + (f": {detail}" if detail else "")
        )
    return result


def is_full_sha(commit: str) -> bool:
    """Whether ``commit`` is a whole SHA (never moves, so never fetched again)."""
    return bool(_FULL_SHA.match(commit.lower()))


def _cache_name(repo: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", repo.rstrip("/").rsplit("/", 1)[-1])
    stem = stem.removesuffix(".git")[:40] or "repo"
    return f"{stem}-{hashlib.sha256(repo.encode('utf-8')).hexdigest()[:16]}.git"


class RepoCache:
    """Mirrors of the repositories workspaces are made from, under ``root``.

    ``resolve`` is memoised per object: within one run (one cache object per process) a
    branch name always gives the same commit, whatever is pushed meanwhile.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._resolved: dict[tuple[str, str], str] = {}
        self._fetched: set[str] = set()  # mirrors fetched by this object (names: once)

    def mirror(self, repo: str) -> Path:
        """Where the mirror of ``repo`` is kept."""
        return self.root / _cache_name(repo)

    async def resolve(self, repo: str, commit: str) -> tuple[Path, str]:
        """The mirror of ``repo`` (cloned when missing) and the whole SHA of ``commit``
        in it (fetched when the mirror lacks it).

        Raises:
            WorkspaceError: The repository cannot be cloned or fetched, or has no such
                commit.
        """
        key = (repo, commit)
        mirror = self.mirror(repo)
        found = self._resolved.get(key)
        if found is not None:
            return mirror, found
        async with FileLock(mirror.with_name(mirror.name + ".lock")):
            if not (mirror / "HEAD").is_file():
                await self._clone(repo, mirror)
                self._fetched.add(repo)
            sha = await self._rev(mirror, commit)
            if sha is None or (not is_full_sha(commit) and repo not in self._fetched):
                # a name may have moved since the mirror was made: ask once per run
                fetch = await self._fetch(mirror, commit, quiet_failure=sha is not None)
                self._fetched.add(repo)
                if fetch:
                    sha = await self._rev(mirror, commit) or sha
            if sha is None:
                raise WorkspaceError(
                    f"commit {commit!r} is not in the repository {repo}; give a commit, tag "
                    "or branch it has"
                )
        self._resolved[key] = sha
        return mirror, sha

    async def _clone(self, repo: str, mirror: Path) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        partial = mirror.with_name(mirror.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        await git("clone", "--mirror", "--quiet", "--", repo, str(partial), what=f"clone {repo}")
        os.replace(partial, mirror)

    async def _fetch(self, mirror: Path, commit: str, *, quiet_failure: bool) -> bool:
        """Fetch every ref (and ``commit`` itself when it is a SHA no ref reaches): True
        when the mirror was brought up to date. A failure matters only when the mirror has
        nothing for ``commit`` (``quiet_failure``: it has, offline is fine)."""
        done = await git(
            "-C", str(mirror), "fetch", "--quiet", "--prune", "origin", what="fetch", check=False
        )
        if done.ok and await self._rev(mirror, commit) is None and is_full_sha(commit):
            await git(
                "-C", str(mirror), "fetch", "--quiet", "origin", commit, what="fetch", check=False
            )
        if not done.ok and not quiet_failure:
            detail = done.stderr_tail(DETAIL)
            raise WorkspaceError(
                f"could not fetch {commit!r} into the repository cache ({mirror}): "
                f"git {done.describe_exit()}" + (f": {detail}" if detail else "")
            )
        return done.ok

    @staticmethod
    async def _rev(mirror: Path, commit: str) -> str | None:
        found = await git(
            "-C",
            str(mirror),
            "rev-parse",
            "--verify",
            "--quiet",
            f"{commit}^{{commit}}",
            what="look up a commit",
            check=False,
        )
        sha = found.stdout.strip()
        return sha if found.ok and sha else None


async def checkout(
    mirror: Path, sha: str, dest: Path, *, origin: str, sparse: Sequence[str] = ()
) -> None:
    """Make ``dest`` (a new or empty folder) a copy of the repository at ``sha``, from its
    mirror and without the network; its ``origin`` is the repository itself, as a clone of
    it would have."""
    await git(
        "clone",
        "--shared",
        "--no-checkout",
        "--quiet",
        "--",
        str(mirror),
        str(dest),
        what=f"copy {origin} into the workspace",
    )
    await git("-C", str(dest), "remote", "set-url", "origin", origin, what="set origin")
    if sparse:
        await git(
            "-C",
            str(dest),
            "sparse-checkout",
            "set",
            "--cone",
            "--",
            *sparse,
            what=f"limit {origin} to {', '.join(sparse)}",
        )
    await git(
        "-C",
        str(dest),
        "-c",
        "advice.detachedHead=false",
        "checkout",
        "--quiet",
        "--detach",
        sha,
        what=f"check out {sha[:12]} of {origin}",
    )


async def reset(dest: Path, sha: str) -> bool:
    """Bring the copy at ``dest`` back to ``sha``, as checked out: every change undone and
    every file git does not track removed (ignored ones too). False when it cannot (the
    copy is broken: make it again)."""
    if not (dest / ".git").exists():
        return False
    for args in (
        ("-c", "advice.detachedHead=false", "checkout", "--quiet", "--force", "--detach", sha),
        ("reset", "--quiet", "--hard", sha),
        ("clean", "-ffdxq"),
    ):
        done = await git("-C", str(dest), *args, what="reset", check=False)
        if not done.ok:
            return False
    return True


# --- snapshots and diffs ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Area:
    """One part of a workspace a snapshot covers: a repository copy (``repo``: its work
    tree, at ``prefix`` in the workspace), or the workspace's other files (``repo`` None:
    the whole folder but ``exclude``, the repositories' folders)."""

    root: Path
    prefix: str = ""  # "" or "app/": where it sits in the workspace
    repo: bool = False
    exclude: tuple[str, ...] = ()


@dataclass(slots=True)
class Changes:
    """What changed in a workspace between two snapshots."""

    added: list[str] = field(default_factory=list)
    modified: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    binary: list[str] = field(default_factory=list)
    diff: str = ""
    diff_cut: bool = False  # the diff was longer than its limit and was cut

    @property
    def paths(self) -> list[str]:
        """Every path that changed, in order."""
        return sorted({*self.added, *self.modified, *self.deleted})

    def to_dict(self) -> dict[str, object]:
        """What a record keeps of it."""
        out: dict[str, object] = {
            "added": self.added,
            "modified": self.modified,
            "deleted": self.deleted,
        }
        if self.binary:
            out["binary"] = self.binary
        out["diff"] = self.diff
        if self.diff_cut:
            out["diff_cut"] = True
        return out


class Snapshot:
    """Trees of a workspace's areas at moments of its life, kept in ``meta`` (a private
    folder outside the workspace: its own object store, and an index per area and moment)."""

    def __init__(self, meta: Path, areas: Sequence[Area]) -> None:
        self.meta = meta
        self.areas = tuple(areas)
        self._objects = meta / "objects"
        self._shadow = meta / "shadow.git"

    def _git_dir(self, area: Area) -> Path:
        return area.root / ".git" if area.repo else self._shadow

    def _env(self, area: Area, index: Path | None = None) -> dict[str, str]:
        env = {"GIT_OBJECT_DIRECTORY": str(self._objects)}
        if area.repo:
            env["GIT_ALTERNATE_OBJECT_DIRECTORIES"] = str(area.root / ".git" / "objects")
        if index is not None:
            env["GIT_INDEX_FILE"] = str(index)
        return env

    async def _prepare(self) -> None:
        self._objects.mkdir(parents=True, exist_ok=True)
        shadow = [a for a in self.areas if not a.repo]
        if shadow and not (self._shadow / "HEAD").is_file():
            await git("init", "--quiet", "--bare", str(self._shadow), what="start a snapshot")
            excludes = "".join(f"/{path}/\n" for area in shadow for path in area.exclude)
            (self._shadow / "info").mkdir(exist_ok=True)
            (self._shadow / "info" / "exclude").write_text(excludes, encoding="utf-8")

    async def take(self, moment: str, after: str | None = None) -> dict[str, str]:
        """The tree of every area now, named ``moment``: the index of ``after`` (an earlier
        moment) is reused, so that only what changed since is read again."""
        await self._prepare()
        trees: dict[str, str] = {}
        for n, area in enumerate(self.areas):
            index = self.meta / f"{n}-{moment}.index"
            start = self.meta / f"{n}-{after}.index" if after else None
            with contextlib.suppress(OSError):
                index.unlink()
            # copied with its times: git trusts an entry whose file has the size and time
            # it recorded only when that time is older than the index file's own ("racy
            # git"), so a copy dated now would hide a file changed within the same tick
            if start is not None and start.is_file():
                shutil.copy2(start, index)
            elif area.repo and (area.root / ".git" / "index").is_file():
                shutil.copy2(area.root / ".git" / "index", index)
            base = ["--git-dir", str(self._git_dir(area)), "--work-tree", str(area.root)]
            env = self._env(area, index)
            await git(*base, "add", "--all", "--", ".", env=env, what="take a snapshot")
            done = await git(*base, "write-tree", env=env, what="take a snapshot")
            trees[area.prefix] = done.stdout.strip()
        return trees

    async def changes_between(
        self, before: Mapping[str, str], after: Mapping[str, str], *, max_diff_bytes: int
    ) -> Changes:
        """What changed from ``before`` to ``after`` (two ``take``s): paths from the
        workspace's top, binary files named, the diff cut at ``max_diff_bytes``."""
        changes = Changes()
        parts: list[str] = []
        room = max_diff_bytes
        for area in self.areas:
            old, new = before.get(area.prefix), after.get(area.prefix)
            if old is None or new is None or old == new:
                continue
            base = ["--git-dir", str(self._git_dir(area))]
            env = self._env(area)
            status = await git(
                *base, "diff", "--no-renames", "--name-status", "-z", old, new, env=env, what="diff"
            )
            fields_ = status.stdout.split("\0")
            for kind, path in zip(fields_[::2], fields_[1::2], strict=False):
                where = area.prefix + path
                bucket = {"A": changes.added, "D": changes.deleted}.get(kind[:1], changes.modified)
                bucket.append(where)
            counts = await git(
                *base, "diff", "--no-renames", "--numstat", "-z", old, new, env=env, what="diff"
            )
            for entry in counts.stdout.split("\0"):
                numbers = entry.split("\t", 2)
                if len(numbers) == 3 and numbers[0] == "-" and numbers[1] == "-":
                    changes.binary.append(area.prefix + numbers[2])
            if room <= 0:
                changes.diff_cut = True
                continue
            text = await git(
                *base,
                "diff",
                "--no-color",
                "--no-ext-diff",
                "--no-renames",
                f"--src-prefix=a/{area.prefix}",
                f"--dst-prefix=b/{area.prefix}",
                old,
                new,
                env=env,
                what="diff",
                stdout_head=room,
            )
            piece = text.stdout
            if text.stdout_truncated:
                changes.diff_cut = True
            room -= len(piece.encode("utf-8", errors="replace"))
            parts.append(piece)
        for bucket in (changes.added, changes.modified, changes.deleted, changes.binary):
            bucket.sort()
        changes.diff = "".join(parts)
        return changes
