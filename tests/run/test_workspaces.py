"""Whole runs of cases in workspaces (docs/eval-files.md, "Workspaces"), on a local git
repository made in the test and a fake coding agent (a script) that edits it: what each run
starts from, what it leaves, the hooks, the sandbox, and the records."""

from __future__ import annotations

import hashlib
import json
import shlex
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentv.system.filelock import FileLock
from support.cli import agentv_cli
from support.files import write
from support.gitrepo import commit, git
from support.results import rows

pytestmark = pytest.mark.slow  # agentv, git and the agents run as processes

PY = shlex.quote(sys.executable)

# The fake coding agent: says what it started from (a digest of every file but git's own,
# and their names), then does what the prompt asks: fix calc.py, leave junk, try to
# escape its workspace.
AGENT = """\
import hashlib, os, socket, sys
from pathlib import Path

root = Path.cwd()
files = sorted(
    p for p in root.rglob("*") if p.is_file() and ".git" not in p.relative_to(root).parts
)
digest = hashlib.sha256()
for p in files:
    digest.update(p.relative_to(root).as_posix().encode() + b"\\0" + p.read_bytes() + b"\\0")
words = sys.argv[1].split()
if "fix" in words:
    calc = root / "calc.py"
    calc.write_text(calc.read_text().replace("a - b", "a + b"))
if "junk" in words:
    (root / "scratch.txt").write_text("scratch\\n")
    (root / "TASK.md").unlink()
if "escape" in words:
    outside, port = words[words.index("escape") + 1 :][:2]
    try:
        Path(outside).write_text("escaped\\n")
    except OSError as exc:
        print(f"write refused: {exc}", file=sys.stderr)
    try:
        socket.create_connection(("127.0.0.1", int(port)), timeout=10).close()
    except OSError as exc:
        print(f"connect refused: {exc}", file=sys.stderr)
names = ",".join(p.relative_to(root).as_posix() for p in files)
print(f"start={digest.hexdigest()[:16]} files={names} ws={root}")
"""

CALC = "def add(a, b):\n    return a - b\n"
FIXED = CALC.replace("a - b", "a + b")
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
TASK = "Make test_calc.py pass.\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AGENTV_WORKSPACE_ROOT", str(tmp_path / "workspaces"))
    (tmp_path / ".git").mkdir()
    write(tmp_path, "agent.py", AGENT)
    write(
        tmp_path,
        ".agentv/targets.yaml",
        f"""$schema: agentv-targets-v2.2
targets:
  - name: fixer
    provider: cli
    command_template: {PY} {tmp_path / "agent.py"} {{PROMPT}}
    workers: 1
  - name: other
    provider: cli
    command_template: {PY} {tmp_path / "agent.py"} {{PROMPT}}
    workers: 1
""",
    )
    commit(tmp_path / "calc", {"calc.py": CALC, "test_calc.py": TEST}, "one")
    git(tmp_path / "calc", "tag", "v1")
    write(tmp_path, "evals/template/TASK.md", "Make test_calc.py pass.\n")
    return tmp_path


def suite(project: Path, workspace: str, cases: str, name: str = "fix.yaml") -> Path:
    return write(
        project,
        f"evals/{name}",
        f"$schema: agentv-eval-v2\nworkspace:\n{workspace}evalcases:\n{cases}",
    )


def case(case_id: str, prompt: str, extra: str = "") -> str:
    if "evaluators:" not in extra:  # the agent answers; its answer is not what is graded
        extra += "    evaluators: [{type: contains, value: start=}]\n"
    return (
        f"  - id: {case_id}\n    outcome: fixed\n"
        f"    input_messages: [{{role: user, content: {prompt}}}]\n" + extra
    )


GRADERS = f"""\
    evaluators:
      - {{name: tests, type: command, command: {PY} -m pytest -q -p no:cacheprovider}}
      - {{name: changed, type: diff, must_change: [calc.py], must_not_change: [test_calc.py]}}
      - {{name: task, type: file_exists, path: TASK.md}}
"""


def run(project: Path, *args: str, out: str = "r.jsonl", code: int = 0) -> list[dict[str, Any]]:
    """The run's records, by case and repeat; ``code``: its exit code (7: a run failed;
    runs that errored are accepted)."""
    done = agentv_cli(project, "eval", *args, "--out", out, "--quiet", "--allow-errors")
    assert done.returncode == code, done.stdout + done.stderr
    return sorted(rows(project / out), key=lambda r: (r["eval_id"], r.get("repeat", 0)))


def start_of(record: dict[str, Any]) -> str:
    return record["candidate_answer"].split()[0]


def tree_digest(files: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + files[name].encode() + b"\0")
    return "start=" + digest.hexdigest()[:16]


#: what every run starts from: the commit's files and the template's
START = tree_digest({"TASK.md": TASK, "calc.py": CALC, "test_calc.py": TEST})


def workspace_root(project: Path) -> Path:
    return project / "workspaces"


def test_runs_start_from_identical_trees_and_their_tests_grade_the_change(
    project: Path,
) -> None:
    sha = git(project / "calc", "rev-parse", "v1")
    path = suite(
        project,
        "  template: template\n  repos: [{path: ., repo: ../calc, commit: v1}]\n"
        "  isolation: none\n",
        case("fix", "please fix", "    repeat: 2\n" + GRADERS) + case("idle", "look around"),
    )
    records = run(project, str(path.relative_to(project)), "--target", "fixer")
    fix1, fix2, idle = records
    expected_start = START
    # every run, whatever it then did, started from the same bytes: the commit and template
    assert [start_of(r) for r in records] == [expected_start] * 3
    for record in (fix1, fix2):
        assert record["status"] == "ok", record
        assert [(e["name"], e["score"]) for e in record["evaluator_results"]] == [
            ("tests", 1.0),
            ("changed", 1.0),
            ("task", 1.0),
        ]
        ws = record["workspace"]
        assert ws["repos"] == [
            {"path": ".", "repo": str(project / "calc"), "commit": sha, "ref": "v1"}
        ]
        assert ws["changes"] == {
            "added": [],
            "modified": ["calc.py"],
            "deleted": [],
            "diff": (
                "diff --git a/calc.py b/calc.py\n"
                f"index {blob(project, 'v1:calc.py')}..{blob(project, FIXED)} 100644\n"
                "--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
                "-    return a - b\n+    return a + b\n"
            ),
        }
        assert (ws["mode"], ws["isolation"]) == ("temp", "none")
        assert "path" not in ws  # removed after the run: no path to give
    # the idle agent's tests fail, and nothing changed
    assert idle["workspace"]["changes"] == {"added": [], "modified": [], "deleted": [], "diff": ""}
    # nothing of the run's temp workspaces is left
    assert not (workspace_root(project) / "temp").exists() or not any(
        (workspace_root(project) / "temp").iterdir()
    )


def blob(project: Path, what: str) -> str:
    """The short id of a blob: an object of the calc repository, or a text's."""
    if ":" in what and "\n" not in what:
        return git(project / "calc", "rev-parse", "--short=7", what)
    file = project / "blob.tmp"
    file.write_text(what)
    try:
        return git(project / "calc", "hash-object", str(file))[:7]
    finally:
        file.unlink()


def test_pooled_slots_are_reset_between_runs(project: Path) -> None:
    path = suite(
        project,
        "  mode: pooled\n  template: template\n"
        "  repos: [{path: ., repo: ../calc, commit: v1}]\n  isolation: none\n",
        case("junk", "fix junk", "    repeat: 3\n"),
    )
    records = run(project, str(path.relative_to(project)), "--target", "fixer")
    assert len(records) == 3
    # one worker (two cases in flight: the next one's workspace is made while an agent
    # works): at most two slots, so one was reused; each run found its slot as new,
    # whatever the last one did there
    assert len({r["workspace"]["path"] for r in records}) == 2
    assert {r["candidate_answer"].split(" ws=")[0] for r in records} == {
        f"{START} files=TASK.md,calc.py,test_calc.py"
    }
    for record in records:
        assert record["workspace"]["changes"] | {"diff": ""} == {
            "added": ["scratch.txt"],
            "modified": ["calc.py"],
            "deleted": ["TASK.md"],
            "diff": "",
        }
    for slot in {Path(r["workspace"]["path"]) for r in records}:
        assert slot.is_dir()  # a pooled slot stays for the next run
        lock = FileLock(slot.with_name(slot.name + ".lock"))
        assert lock.try_acquire()  # and is not left locked
        lock.release()


def test_hooks_run_around_the_runs_and_a_failing_one_names_itself(project: Path) -> None:
    log = project / "hooks.log"
    path = suite(
        project,
        "  isolation: none\n  hooks:\n"
        f"    before_all: echo before_all >> {log}\n"
        f"    after_all: echo after_all >> {log}\n"
        f"    after_each: echo after_each $AGENTV_EVAL_ID >> {log}\n",
        case(
            "good",
            "look",
            f"    workspace:\n      hooks: {{before_each: echo ready $AGENTV_EVAL_ID >> {log}}}\n",
        )
        + case(
            "bad", "look", "    workspace:\n      hooks: {before_each: 'echo preparing; exit 4'}\n"
        ),
    )
    bad, good = run(project, str(path.relative_to(project)), "--target", "fixer")
    assert good["status"] == "ok", good["error"]
    assert bad["status"] == "error"
    assert bad["error"] == (
        "workspace hook before_each (`echo preparing; exit 4`) exited with code 4: preparing"
    )
    hooks = [(h["hook"], h["exit_code"], h["output"]) for h in bad["workspace"]["hooks"]]
    assert hooks == [("before_all", 0, ""), ("before_each", 4, "preparing")]
    assert [h["hook"] for h in good["workspace"]["hooks"]] == [
        "before_all",
        "before_each",
        "after_each",
    ]
    assert all(h["duration_ms"] >= 0 for h in good["workspace"]["hooks"])
    # before_all once, before the first case; after_all once, after the last
    lines = log.read_text().splitlines()
    assert lines[0] == "before_all" and lines[-1] == "after_all"
    assert sorted(lines[1:-1]) == ["after_each good", "ready good"]


def test_a_failing_before_all_makes_each_case_of_its_file_an_error(project: Path) -> None:
    path = suite(
        project,
        "  isolation: none\n  hooks: {before_all: 'echo no database >&2; exit 1'}\n",
        case("a", "look") + case("b", "look"),
    )
    records = run(project, str(path.relative_to(project)), "--target", "fixer")
    message = (
        "workspace hook before_all (`echo no database >&2; exit 1`) exited with code 1: no database"
    )
    assert [(r["eval_id"], r["status"], r["error"]) for r in records] == [
        ("a", "error", message),
        ("b", "error", message),
    ]


def test_keep_on_failure_keeps_only_the_failed_runs_workspace(project: Path) -> None:
    path = suite(
        project,
        "  template: template\n  repos: [{path: ., repo: ../calc, commit: v1}]\n"
        "  isolation: none\n  keep: on_failure\n",
        case("fix", "please fix", GRADERS) + case("idle", "look around", GRADERS),
    )
    fix, idle = run(project, str(path.relative_to(project)), "--target", "fixer", code=7)
    assert (fix["status"], idle["status"]) == ("ok", "failed")
    assert "path" not in fix["workspace"]
    kept = Path(idle["workspace"]["path"])
    assert idle["workspace"]["kept"] is True
    assert (kept / "calc.py").read_text() == CALC  # as the agent left it, for a look
    assert not (kept.parent / fix["candidate_answer"].split(" ws=")[1]).exists()


def test_a_static_workspace_is_the_folder_itself(project: Path) -> None:
    folder = write(project, "sandbox/calc.py", CALC).parent
    path = suite(
        project,
        "  mode: static\n  path: ../sandbox\n  isolation: none\n",
        case("fix", "please fix"),
    )
    (record,) = run(project, str(path.relative_to(project)), "--target", "fixer")
    assert record["workspace"]["path"] == str(folder)
    assert record["workspace"]["changes"]["modified"] == ["calc.py"]
    assert (folder / "calc.py").read_text() == FIXED


def test_the_disk_limit_refuses_a_workspace_past_it(project: Path) -> None:
    write(project, "evals/template/big.bin", "x" * 300_000)
    path = suite(
        project,
        "  template: template\n  isolation: none\n  keep: always\n  disk_limit_mb: 0.5\n",
        case("a", "look") + case("b", "look") + case("c", "look"),
    )
    records = run(project, str(path.relative_to(project)), "--target", "fixer")
    # the first workspace made fits; the second would pass the limit, and so would the
    # third: each is removed and its run is an error that says why
    made = [r for r in records if r["status"] != "error"]
    refused = [r for r in records if r["status"] == "error"]
    assert len(made) == 1 and len(refused) == 2
    assert made[0]["workspace"]["kept"] is True
    for record in refused:
        assert record["error"] == (
            "the run's workspaces take 586.0 KiB of disk (with this one (293.0 KiB), 2 on "
            "disk), over their limit of 512.0 KiB (workspace `disk_limit_mb`): no workspace "
            "is made for this run. Keep fewer workspaces (`keep`), remove kept ones under "
            f"{workspace_root(project) / 'temp'}, or raise the limit"
        )
    kept = list((workspace_root(project) / "temp").glob("*/*"))
    assert kept == [Path(made[0]["workspace"]["path"])]


@pytest.fixture
def listener() -> Iterator[tuple[int, list[str]]]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted: list[str] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append("connected")
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[1], accepted
    server.close()


def test_under_bwrap_the_agent_cannot_write_outside_or_connect_and_the_record_says_so(
    project: Path, listener: tuple[int, list[str]]
) -> None:
    port, accepted = listener
    outside = project / "escaped.txt"
    path = suite(
        project,
        "  template: template\n  repos: [{path: ., repo: ../calc, commit: v1}]\n"
        "  isolation: bwrap\n",
        case("escape", f"fix escape {outside} {port}", GRADERS),
    )
    (record,) = run(project, str(path.relative_to(project)), "--target", "fixer")
    assert not outside.exists()
    assert accepted == []
    ws = record["workspace"]
    assert (ws["isolation"], ws["network"]) == ("bwrap", False)
    assert ws["writes_refused"] == [f"write refused: [Errno 30] Read-only file system: '{outside}'"]
    assert ws["network_refused"] == ["connect refused: [Errno 111] Connection refused"]
    # its work inside the workspace stands, and its tests (run in the sandbox too) pass
    assert ws["changes"]["modified"] == ["calc.py"], record
    assert record["status"] == "ok"
    assert record["raw_request"]["sandbox"] == "bwrap"
    assert json.dumps(record).count(str(outside)) >= 1
