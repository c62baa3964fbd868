"""The folder an agent works in, made for each run of a case (docs/eval-files.md,
"Workspaces").

``WorkspaceManager.lease`` gives one run of a case its workspace (a ``Lease``), and takes
it back afterwards, whatever happened:

- ``temp``: a new folder for the run: the case's repositories checked out from the cache
  at their commits (``agentv.system.git``), then its template copied over them. Removed
  afterwards, unless ``keep`` says to keep it (``always``, or ``on_failure``: a run that
  did not pass).
- ``pooled``: a slot of a pool kept between runs (one slot per run at once, each locked
  while in use; a new slot when every one is taken). Reset in place before each run:
  ``git reset --hard`` and ``git clean -ffdx`` in each repository, everything else removed,
  the template copied again; a slot that cannot be reset is made again.
- ``static``: an existing folder, used as it is, by one run at a time.

Then, for every mode: the ``before_each`` hook, and a snapshot of the starting state. After
the agent's answer the lease is settled (``settle``): its changes since the start (the
files added, modified and deleted, binary ones named, the diff cut at its limit), which the
record keeps and the workspace graders read. After grading: ``after_each``. Every hook's
command, exit code, time and output are recorded; a ``before_each`` that fails makes the
run an ``error`` that names it.

``before_all`` runs once per file and run, before the first of the file's cases is handed
out (wherever the cases run: the driver of a Ray run runs it); ``after_all`` once the run
ends. The run's workspaces together may take at most ``disk_limit_mb``: past it, a new
workspace is refused with the sizes in the error.

Where they live: ``AGENTV_WORKSPACE_ROOT`` (default ``~/.cache/agentv``, or under
``XDG_CACHE_HOME``): ``repos/`` (the repository cache), ``temp/``, ``pool/``, and ``meta/``
(snapshots, outside the workspaces so that no agent sees them). Outside the project on
purpose: an agent in a workspace must not find the project's own repository, instructions
or configuration above it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentv.cases import Hook, Workspace
from agentv.errors import WorkspaceError
from agentv.system.env import child_environment, run_environment
from agentv.system.filelock import FileLock
from agentv.system.git import Area, Changes, RepoCache, Snapshot, checkout, reset
from agentv.system.masking import shorten
from agentv.system.process import ProcessResult, run_process
from agentv.system.sandbox import Sandbox

ROOT_VARIABLE = "AGENTV_WORKSPACE_ROOT"
#: how long a hook may take unless it says otherwise (seconds)
HOOK_TIMEOUT_S = 600.0
#: characters of a hook's output a record keeps (the end: where a failure is explained)
HOOK_OUTPUT_CHARS = 4000
#: characters of a failed hook's output quoted in its error
HOOK_DETAIL_CHARS = 800


def workspace_root() -> Path:
    """Where workspaces and the repository cache live (``AGENTV_WORKSPACE_ROOT``, else
    ``$XDG_CACHE_HOME/agentv``, else ``~/.cache/agentv``)."""
    env = run_environment()
    if env.get(ROOT_VARIABLE):
        return Path(env[ROOT_VARIABLE]).expanduser().absolute()
    cache = env.get("XDG_CACHE_HOME")
    base = Path(cache).expanduser() if cache else Path.home() / ".cache"
    return (base / "agentv").absolute()


# --- hooks ----------------------------------------------------------------------------------


@dataclass(slots=True)
class HookRun:
    """One run of a hook: what ran, how it ended, what it printed."""

    name: str
    command: str
    exit_code: int | None
    duration_ms: float
    output: str
    timed_out: bool = False
    timeout: float | None = None
    error: str | None = None  # it could not start

    @property
    def ok(self) -> bool:
        return self.error is None and not self.timed_out and self.exit_code == 0

    def failure(self) -> str:
        """``workspace hook before_each (`make deps`) exited with code 2: <its output's end>``."""
        head = f"workspace hook {self.name} (`{self.command}`)"
        if self.error is not None:
            return f"{head} could not run: {self.error}"
        if self.timed_out:
            return f"{head} did not finish within {self.timeout:g} s and was stopped"
        detail = self.output[-HOOK_DETAIL_CHARS:].strip()
        return f"{head} exited with code {self.exit_code}" + (f": {detail}" if detail else "")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "hook": self.name,
            "command": self.command,
            "exit_code": self.exit_code,
            "duration_ms": round(self.duration_ms, 3),
            "output": self.output,
        }
        if self.timed_out:
            out["timed_out"] = True
        if self.error is not None:
            out["error"] = self.error
        return out


async def run_hook(name: str, hook: Hook, cwd: Path, variables: Mapping[str, str]) -> HookRun:
    """Run one hook through the shell in ``cwd``, with the run's environment (the rule of
    what agents inherit) and ``variables``; never raises for the hook's own failure."""
    timeout = hook.timeout_seconds or HOOK_TIMEOUT_S
    started = time.monotonic()
    try:
        result = await run_process(
            hook.command,
            cwd=cwd,
            env=child_environment(extra=dict(variables)),
            timeout=timeout,
        )
    except OSError as exc:
        return HookRun(
            name,
            hook.command,
            None,
            (time.monotonic() - started) * 1000,
            "",
            error=exc.strerror or str(exc),
        )
    return HookRun(
        name,
        hook.command,
        result.exit_code,
        result.duration_s * 1000,
        _output(result),
        timed_out=result.timed_out,
        timeout=timeout,
    )


def _output(result: ProcessResult) -> str:
    """A hook's (or a grader's) stdout then stderr, the end kept, known secrets masked."""
    parts = [part for part in (result.stdout.strip(), result.stderr.strip()) if part]
    return shorten("\n".join(parts), HOOK_OUTPUT_CHARS, keep="tail")


# --- one run's workspace ------------------------------------------------------------------

#: the workspace of the case being run (set by ``CasePipeline`` for the case's task): what
#: the run's ``Sender`` gives the target and the evaluators
CASE_WORKSPACE: ContextVar[Lease | None] = ContextVar("agentv_case_workspace", default=None)


class Lease:
    """One run's workspace: its folder, its sandbox, its hooks and its changes."""

    def __init__(
        self,
        spec: Workspace,
        path: Path,
        meta: Path,
        *,
        repos: list[dict[str, str]],
        hooks: list[dict[str, Any]],
        variables: dict[str, str],
    ) -> None:
        self.spec = spec
        self.path = path
        self.meta = meta
        self.repos = repos
        self.hooks = hooks
        self.variables = variables
        iso = spec.isolation
        self.sandbox = Sandbox(
            iso.kind, path, network=iso.network, image=iso.image, writable=iso.writable
        )
        self._snapshot = Snapshot(meta, _rooted(_areas(spec), path))
        self._start: dict[str, str] | None = None
        self.changes: Changes | None = None
        self.diff_error: str | None = None
        self.kept = False
        self.notes: list[str] = []

    async def start(self) -> None:
        """Take the snapshot the changes are measured from."""
        self._start = await self._snapshot.take("start")

    async def settle(self) -> None:
        """Measure what changed since the start (after each of the agent's answers)."""
        if self._start is None:
            return
        try:
            now = await self._snapshot.take("now", after="start")
            self.changes = await self._snapshot.changes_between(
                self._start, now, max_diff_bytes=self.spec.max_diff_bytes
            )
            self.diff_error = None
        except WorkspaceError as exc:
            self.changes, self.diff_error = None, str(exc)

    async def run(
        self, command: str, *, cwd: Path | None, timeout: float | None, env: Mapping[str, str]
    ) -> ProcessResult:
        """Run ``command`` (a grader's) through the shell in the workspace, in its sandbox."""
        wrapped, inner = self.sandbox.wrap(command, cwd=cwd or self.path, env=env)
        try:
            return await run_process(wrapped.command, cwd=wrapped.cwd, env=inner, timeout=timeout)
        finally:
            await self.sandbox.finish(wrapped)

    def record(self) -> dict[str, Any]:
        """The record's ``workspace``."""
        out: dict[str, Any] = {"mode": self.spec.mode}
        if self.kept or self.spec.mode != "temp":
            out["path"] = str(self.path)
        if self.kept:
            out["kept"] = True
        if self.repos:
            out["repos"] = self.repos
        out.update(self.sandbox.describe())
        if self.hooks:
            out["hooks"] = self.hooks
        if self.changes is not None:
            out["changes"] = self.changes.to_dict()
        elif self.diff_error is not None:
            out["diff_error"] = self.diff_error
        if self.notes:
            out["notes"] = self.notes
        out["digest"] = self.spec.digest()
        return out


def _areas(spec: Workspace) -> list[Area]:
    """What a snapshot of the workspace covers: each repository, and the rest."""
    areas = [
        Area(root=Path("."), prefix="" if r.path == "." else f"{r.path}/", repo=True)
        for r in spec.repos
    ]
    if not any(r.path == "." for r in spec.repos):
        areas.append(Area(root=Path("."), exclude=tuple(r.path for r in spec.repos)))
    return areas


def _rooted(areas: list[Area], path: Path) -> list[Area]:
    return [
        Area(
            root=path / area.prefix if area.prefix else path,
            prefix=area.prefix,
            repo=area.repo,
            exclude=area.exclude,
        )
        for area in areas
    ]


# --- the manager ----------------------------------------------------------------------------


@dataclass
class _Setup:
    """A file's ``before_all``: run once (under a lock), its outcome kept."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    run: HookRun | None = None
    workspace: Workspace | None = None


class WorkspaceManager:
    """The workspaces of one run in one process (the driver, or a Ray worker)."""

    def __init__(self, root: Path | None = None) -> None:
        self._root = root
        self._cache: RepoCache | None = None
        self._sizes: dict[Path, int] = {}  # every workspace of this run still on disk
        self._setups: dict[tuple[str, str], _Setup] = {}
        self._used: dict[tuple[str, str], Workspace] = {}  # files whose after_all is due
        self._making = asyncio.Lock()  # one workspace made at a time under a disk limit
        self.run_id = datetime.now(UTC).strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]

    @property
    def root(self) -> Path:
        if self._root is None:
            self._root = workspace_root()
        return self._root

    @property
    def cache(self) -> RepoCache:
        if self._cache is None:
            self._cache = RepoCache(self.root / "repos")
        return self._cache

    # --- before_all / after_all --------------------------------------------------------

    async def before_all(self, spec: Workspace) -> HookRun | None:
        """The file's ``before_all``, run the first time it is asked for in this run (None:
        the file has none). Every case of the file gets its outcome."""
        self._due(spec)
        hook = spec.hooks.get("before_all")
        if hook is None:
            return None
        setup = self._setups.setdefault(_file_key(spec, "before_all"), _Setup(workspace=spec))
        async with setup.lock:
            if setup.run is None:
                folder = spec.eval_file.parent if spec.eval_file else Path.cwd()
                setup.run = await run_hook(
                    "before_all", hook, folder, _file_variables(spec, self.root)
                )
        return setup.run

    def _due(self, spec: Workspace) -> None:
        """Note that a case of ``spec``'s file ran here: its ``after_all`` is due (once
        for each file and command, whatever the cases' own hooks)."""
        if "after_all" in spec.hooks:
            self._used.setdefault(_file_key(spec, "after_all"), spec)

    async def after_all(self) -> list[HookRun]:
        """Every ``after_all`` of the files whose cases ran (once each)."""
        done = []
        for spec in self._used.values():
            hook = spec.hooks.get("after_all")
            if hook is None:
                continue
            folder = spec.eval_file.parent if spec.eval_file else Path.cwd()
            done.append(await run_hook("after_all", hook, folder, _file_variables(spec, self.root)))
        self._used.clear()
        return done

    def close(self) -> None:
        """The run's own folders of temp workspaces and snapshots, once empty (kept
        workspaces stay, and their folder with them)."""
        for part in ("temp", "meta"):
            with contextlib.suppress(OSError):
                (self.root / part / self.run_id).rmdir()

    # --- a run's workspace -------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lease(
        self,
        spec: Workspace,
        *,
        eval_id: str,
        target: str,
        repeat: int,
        setup: tuple[dict[str, Any], ...] = (),
    ) -> AsyncIterator[Lease]:
        """The workspace of one run of a case, taken back when the block ends (removed,
        kept or unlocked), however it ends: Ctrl-C included.

        Raises:
            WorkspaceError: It could not be made, or its ``before_each`` failed (what it
                got to is the error's ``record``).
        """
        self._due(spec)
        variables = {
            "AGENTV_EVAL_ID": eval_id,
            "AGENTV_TARGET": target,
            "AGENTV_REPEAT": str(repeat),
        }
        lock: FileLock | None = None
        lease: Lease | None = None
        try:
            if spec.mode == "static":
                assert spec.path is not None
                path = spec.path
                digest = _digest(str(path))
                lock = FileLock(self.root / "locks" / f"static-{digest}.lock")
                await lock.acquire()  # one run at a time
                meta = self.root / "meta" / f"static-{digest}"
                lease = self._lease(spec, path, meta, setup, variables)
            else:
                # under a disk limit, one workspace is made at a time: each is measured
                # before the next is counted against the limit
                limited = spec.disk_limit is not None
                async with self._making if limited else contextlib.nullcontext():
                    self._check_disk(spec)
                    if spec.mode == "pooled":
                        path, meta, lock = await self._pooled(spec)
                    else:
                        label = _label(eval_id, target, repeat)
                        path = self.root / "temp" / self.run_id / label
                        meta = self.root / "meta" / self.run_id / label
                    lease = self._lease(spec, path, meta, setup, variables)
                    if spec.mode == "temp":
                        self._sizes[path] = 0  # on disk from now on (removed unless kept)
                        await self._make(spec, path, lease)
                    else:
                        await self._reset(spec, path, lease)
                    self._sizes[path] = await asyncio.to_thread(_size, path)
                    self._check_disk(spec, made=path)
            await self._before_each(spec, lease)
            await lease.start()
            token = CASE_WORKSPACE.set(lease)
            try:
                yield lease
            finally:
                CASE_WORKSPACE.reset(token)
        except WorkspaceError as exc:
            if lease is not None and exc.record is None:
                exc.record = lease.record()  # its hooks, for the run's record
            raise
        finally:
            self._release(spec, lease, lock)

    def _lease(
        self,
        spec: Workspace,
        path: Path,
        meta: Path,
        setup: tuple[dict[str, Any], ...],
        variables: dict[str, str],
    ) -> Lease:
        """The lease of the workspace at ``path``, its snapshots kept in ``meta`` (new)."""
        shutil.rmtree(meta, ignore_errors=True)
        meta.mkdir(parents=True, exist_ok=True)
        variables["AGENTV_WORKSPACE"] = str(path)
        lease = Lease(spec, path, meta, repos=[], hooks=list(setup), variables=variables)
        lease.sandbox.check()
        return lease

    async def finish(self, lease: Lease, *, passed: bool) -> None:
        """After grading: ``after_each``, and whether a temp workspace is kept."""
        hook = lease.spec.hooks.get("after_each")
        if hook is not None:
            run = await run_hook("after_each", hook, lease.path, lease.variables)
            lease.hooks.append(run.to_dict())
            if not run.ok:
                lease.notes.append(run.failure())
        keep = lease.spec.keep
        lease.kept = lease.spec.mode == "temp" and (
            keep == "always" or (keep == "on_failure" and not passed)
        )
        if lease.spec.mode != "static":
            self._sizes[lease.path] = await asyncio.to_thread(_size, lease.path)

    def _release(self, spec: Workspace, lease: Lease | None, lock: FileLock | None) -> None:
        """Take a workspace back: a temp one removed unless kept, a slot unlocked. Runs on
        cancellation too: nothing here awaits."""
        if lease is not None:
            lease.sandbox.close()
            shutil.rmtree(lease.meta, ignore_errors=True)
            if spec.mode == "temp" and not lease.kept:
                shutil.rmtree(lease.path, ignore_errors=True)
                self._sizes.pop(lease.path, None)
        if lock is not None:
            lock.release()

    def _check_disk(self, spec: Workspace, made: Path | None = None) -> None:
        """``WorkspaceError`` when the run's workspaces take the disk limit (before a new
        one is made), or more (``made``: counting the one just made, then removed)."""
        limit = spec.disk_limit
        if limit is None:
            return
        used = sum(self._sizes.values())
        if used < limit or (made is not None and used == limit):
            return
        what = f"with this one ({_human(self._sizes[made])}), " if made is not None else ""
        relation = "over" if made is not None else "at or over"
        raise WorkspaceError(
            f"the run's workspaces take {_human(used)} of disk ({what}{len(self._sizes)} on "
            f"disk), {relation} their limit of {_human(limit)} (workspace `disk_limit_mb`): "
            "no workspace is made for this run. Keep fewer workspaces (`keep`), remove kept "
            f"ones under {self.root / 'temp'}, or raise the limit"
        )

    async def _repos(self, spec: Workspace, lease: Lease) -> list[tuple[Any, Path, str]]:
        found = []
        for repo in spec.repos:
            mirror, sha = await self.cache.resolve(repo.repo, repo.commit)
            lease.repos.append(
                {"path": repo.path, "repo": repo.repo, "commit": sha, "ref": repo.commit}
            )
            found.append((repo, mirror, sha))
        return found

    async def _make(self, spec: Workspace, path: Path, lease: Lease) -> None:
        """A new workspace at ``path``: the repositories, then the template over them."""
        resolved = await self._repos(spec, lease)
        if path.exists():
            shutil.rmtree(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        for repo, mirror, sha in sorted(resolved, key=lambda r: r[0].path != "."):
            dest = path if repo.path == "." else path / repo.path
            await checkout(mirror, sha, dest, origin=repo.repo, sparse=repo.sparse)
        path.mkdir(parents=True, exist_ok=True)
        self._copy_template(spec, path)

    def _copy_template(self, spec: Workspace, path: Path) -> None:
        if spec.template is None:
            return
        try:
            shutil.copytree(spec.template, path, symlinks=True, dirs_exist_ok=True)
        except (OSError, shutil.Error) as exc:
            raise WorkspaceError(
                f"could not copy the workspace template {spec.template}: {exc}"
            ) from None

    async def _pooled(self, spec: Workspace) -> tuple[Path, Path, FileLock]:
        """A free slot of the spec's pool, locked (a new one when every slot is taken)."""
        pool = self.root / "pool" / _pool_key(spec)
        n = 0
        while True:
            lock = FileLock(pool / f"slot-{n}.lock")
            if lock.try_acquire():
                return pool / f"slot-{n}", pool / f"slot-{n}.meta", lock
            n += 1

    async def _reset(self, spec: Workspace, path: Path, lease: Lease) -> None:
        """A slot as a new workspace would be: reset in place, or made again."""
        state = path.with_name(path.name + ".json")
        resolved = await self._repos(spec, lease)
        shape = _pool_key(spec)
        try:  # a slot made whole before (not one a killed run left half made)
            fresh = json.loads(state.read_text(encoding="utf-8")) == {"pool": shape}
        except (OSError, ValueError):
            fresh = False
        if fresh and path.is_dir():
            for repo, _mirror, sha in resolved:
                dest = path if repo.path == "." else path / repo.path
                if not await reset(dest, sha):
                    fresh = False
                    break
        if fresh:
            _clear_except(path, [r.path for r in spec.repos])
            self._copy_template(spec, path)
            return
        with contextlib.suppress(OSError):
            state.unlink()
        await self._make(spec, path, lease)
        state.write_text(json.dumps({"pool": shape}), encoding="utf-8")

    async def _before_each(self, spec: Workspace, lease: Lease) -> None:
        hook = spec.hooks.get("before_each")
        if hook is None:
            return
        run = await run_hook("before_each", hook, lease.path, lease.variables)
        lease.hooks.append(run.to_dict())
        if not run.ok:
            raise WorkspaceError(run.failure())


def _clear_except(root: Path, keep: list[str]) -> None:
    """Remove everything under ``root`` but the folders ``keep`` names (and the folders
    on their way)."""
    if "." in keep:
        return
    wanted = [tuple(p.split("/")) for p in keep]

    def clear(folder: Path, depth: tuple[str, ...]) -> None:
        for entry in os.scandir(folder):
            here = (*depth, entry.name)
            if any(w == here for w in wanted):
                continue
            if any(w[: len(here)] == here for w in wanted) and entry.is_dir(follow_symlinks=False):
                clear(Path(entry.path), here)
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)

    clear(root, ())


def _size(path: Path) -> int:
    """The bytes of every file under ``path`` (links not followed)."""
    total = 0
    stack = [path]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                else:
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    return total


def _human(count: int) -> str:
    """A size as people read it: ``512.0 KiB``, ``1.5 GiB``."""
    size = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{count} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _pool_key(spec: Workspace) -> str:
    """Slots are shared by the workspaces made from the same template and repositories
    (commits aside: a slot is reset to each run's own)."""
    shape = {
        "template": str(spec.template) if spec.template else None,
        "repos": [(r.path, r.repo, list(r.sparse)) for r in spec.repos],
    }
    return _digest(json.dumps(shape, sort_keys=True))


def _file_key(spec: Workspace, hook: str) -> tuple[str, str]:
    """A file's hook ``hook``, as run once for it."""
    found = spec.hooks.get(hook)
    return (str(spec.eval_file), found.command if found else "")


def _file_variables(spec: Workspace, root: Path) -> dict[str, str]:
    return {
        "AGENTV_EVAL_FILE": str(spec.eval_file or ""),
        "AGENTV_WORKSPACE_ROOT": str(root),
    }


def _label(eval_id: str, target: str, repeat: int) -> str:
    safe = "".join(c if c.isalnum() or c in "._-" else "_" for c in f"{eval_id}_{target}")
    return f"{safe[:80]}_r{repeat}_{uuid.uuid4().hex[:8]}"
