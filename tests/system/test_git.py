"""The repository cache, checkouts, resets and snapshot diffs, on local repositories made in
the test (no network)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from agentv.errors import WorkspaceError
from agentv.system.git import Area, RepoCache, Snapshot, checkout, reset
from support.gitrepo import commit, git

pytestmark = pytest.mark.slow  # git makes and reads every repository


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    repo = tmp_path / "origin"
    commit(repo, {"README.md": "one\n", "src/app.py": "x = 1\n", "docs/guide.md": "g\n"}, "one")
    git(repo, "tag", "v1")
    return repo


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` but git's own, by path."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(folder).parts
    }


async def test_a_commit_the_cache_has_is_checked_out_without_its_origin(
    origin: Path, tmp_path: Path
) -> None:
    cache_root = tmp_path / "cache"
    sha = git(origin, "rev-parse", "v1")
    mirror, found = await RepoCache(cache_root).resolve(str(origin), "v1")
    assert found == sha and mirror.parent == cache_root
    later = commit(origin, {"src/app.py": "x = 2\n"}, "two")
    shutil.rmtree(origin)  # the network is gone: the cache alone must do
    again = RepoCache(cache_root)
    assert await again.resolve(str(origin), sha) == (mirror, sha)
    # a name is looked up again (once per cache object); offline, the cached answer stands
    assert await again.resolve(str(origin), "main") == (mirror, sha)
    with pytest.raises(WorkspaceError) as caught:
        await again.resolve(str(origin), later)  # made after the cache was filled
    assert str(caught.value).startswith(f"could not fetch '{later}' into the repository cache")


async def test_a_moved_branch_is_fetched_once_per_cache_and_then_kept(
    origin: Path, tmp_path: Path
) -> None:
    cache = RepoCache(tmp_path / "cache")
    _, first = await cache.resolve(str(origin), "main")
    second = commit(origin, {"src/app.py": "x = 2\n"}, "two")
    # one run, one answer for a name: whatever is pushed meanwhile
    assert (await cache.resolve(str(origin), "main"))[1] == first
    # the next run asks again
    assert (await RepoCache(tmp_path / "cache").resolve(str(origin), "main"))[1] == second


async def test_an_unknown_commit_is_an_error_naming_it(origin: Path, tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError) as caught:
        await RepoCache(tmp_path / "cache").resolve(str(origin), "no-such-branch")
    assert str(caught.value) == (
        f"commit 'no-such-branch' is not in the repository {origin}; give a commit, tag or "
        "branch it has"
    )
    with pytest.raises(WorkspaceError) as caught:
        await RepoCache(tmp_path / "cache").resolve(str(tmp_path / "nowhere"), "main")
    assert str(caught.value).startswith(f"git could not clone {tmp_path / 'nowhere'}: git exited")


async def test_checkout_reset_and_sparse(origin: Path, tmp_path: Path) -> None:
    cache = RepoCache(tmp_path / "cache")
    mirror, sha = await cache.resolve(str(origin), "v1")
    commit(origin, {"src/app.py": "x = 2\n"}, "two")
    dest = tmp_path / "ws"
    await checkout(mirror, sha, dest, origin=str(origin))
    assert _tree(dest) == {
        "README.md": b"one\n",
        "docs/guide.md": b"g\n",
        "src/app.py": b"x = 1\n",
    }
    assert git(dest, "rev-parse", "HEAD") == sha
    assert git(dest, "remote", "get-url", "origin") == str(origin)
    # the agent's changes, tracked, untracked and ignored, are all undone
    (dest / ".gitignore").write_text("*.log\n")
    (dest / "src" / "app.py").write_text("broken\n")
    (dest / "new.txt").write_text("added\n")
    (dest / "debug.log").write_text("ignored\n")
    (dest / "docs" / "guide.md").unlink()
    assert await reset(dest, sha)
    assert _tree(dest) == {
        "README.md": b"one\n",
        "docs/guide.md": b"g\n",
        "src/app.py": b"x = 1\n",
    }
    assert not await reset(tmp_path / "not-a-checkout", sha)

    sparse = tmp_path / "sparse"
    await checkout(mirror, sha, sparse, origin=str(origin), sparse=["src"])
    assert set(_tree(sparse)) == {"README.md", "src/app.py"}  # top-level files come too


async def test_changes_between_snapshots(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    commit(ws / "app", {"main.py": "a\nb\n", "gone.py": "x\n", "logo.png": b"\x89PNG\0\1"})
    (ws / "notes.md").write_text("start\n")
    areas = [
        Area(root=ws / "app", prefix="app/", repo=True),
        Area(root=ws, exclude=("app",)),
    ]
    snapshot = Snapshot(tmp_path / "meta", areas)
    start = await snapshot.take("start")
    (ws / "app" / "main.py").write_text("a\nc\n")
    (ws / "app" / "gone.py").unlink()
    (ws / "app" / "logo.png").write_bytes(b"\x89PNG\0\2")
    (ws / "notes.md").write_text("start\nmore\n")
    (ws / "made.txt").write_text("new\n")
    now = await snapshot.take("now", after="start")
    changes = await snapshot.changes_between(start, now, max_diff_bytes=1 << 20)
    assert changes.to_dict() | {"diff": None} == {
        "added": ["made.txt"],
        "modified": ["app/logo.png", "app/main.py", "notes.md"],
        "deleted": ["app/gone.py"],
        "binary": ["app/logo.png"],
        "diff": None,
    }
    assert "--- a/app/main.py\n+++ b/app/main.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n" in changes.diff
    assert "Binary files a/app/logo.png and b/app/logo.png differ" in changes.diff
    assert "+++ b/made.txt\n@@ -0,0 +1 @@\n+new\n" in changes.diff
    # the repository's own index and objects are not touched: the changes are unstaged,
    # and the new content's object is in the snapshot's store only
    assert git(ws / "app", "status", "--porcelain").splitlines() == [
        " D gone.py",
        " M logo.png",
        " M main.py",
    ]
    blob = git(ws / "app", "hash-object", "main.py")
    assert subprocess.run(["git", "-C", str(ws / "app"), "cat-file", "-e", blob]).returncode != 0
    assert not (ws / ".git").exists()

    cut = await snapshot.changes_between(start, now, max_diff_bytes=40)
    assert cut.diff_cut and len(cut.diff.encode()) <= 40
    assert cut.paths == changes.paths
    same = await snapshot.changes_between(start, start, max_diff_bytes=1 << 20)
    assert same.paths == [] and same.diff == ""


async def test_a_file_changed_at_once_to_the_same_size_is_seen(tmp_path: Path) -> None:
    # git trusts a file whose size and time match its index entry unless that time is as
    # new as the index itself: a snapshot must keep its index's time for that to hold
    ws = tmp_path / "ws"
    commit(ws, {"calc.py": "a - b\n"})
    for n in range(20):
        snapshot = Snapshot(tmp_path / f"meta-{n}", [Area(root=ws, repo=True)])
        before = await snapshot.take("start")
        text = (ws / "calc.py").read_text()
        (ws / "calc.py").write_text(
            text.replace("-", "+") if "-" in text else text.replace("+", "-")
        )
        after = await snapshot.take("now", after="start")
        changes = await snapshot.changes_between(before, after, max_diff_bytes=1000)
        assert changes.modified == ["calc.py"], n
