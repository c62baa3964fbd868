"""Names that are not files: a FIFO (opening it waits for ever), a link to /dev/zero (it
never ends), links that point at each other. Only regular files are read as eval, targets,
config, schema, cache or results files; anything else is named in words. Each case was
reproduced first (`validate` and `render` hung on a FIFO, passed 3 GB on /dev/zero and
crashed on a loop; a cache of FIFOs hung a run). Commands run in child processes: the
timeout is a hang guard only."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agentv.system.readfile import NotARegularFileError, open_input, read_input, special
from support.cli import agentv_cli
from support.files import write
from support.targets import mock_target, write_targets

CASES = "".join(
    f"  - {{id: c{i}, outcome: x, input_messages: [{{role: user, content: q{i}}}],"
    " evaluators: [{type: contains, value: '42'}]}\n"
    for i in range(3)
)
EVAL = "$schema: agentv-eval-v2\nevalcases:\n" + CASES
CAP_MB = 1024


def _project(root: Path) -> Path:
    (root / ".git").mkdir(parents=True, exist_ok=True)
    write_targets(root, mock_target(response="The answer is 42."))
    write(root, "evals/e.yaml", EVAL)
    return root


def _specials(folder: Path) -> None:
    """A FIFO, a link to /dev/zero and two links pointing at each other, named like YAML."""
    os.mkfifo(folder / "x.yaml")
    (folder / "z.yaml").symlink_to("/dev/zero")
    (folder / "a.yaml").symlink_to("b.yaml")
    (folder / "b.yaml").symlink_to("a.yaml")


def test_the_opener_names_what_a_name_stands_for(tmp_path: Path) -> None:
    _specials(tmp_path)
    write(tmp_path, "f.yaml", "a: 1\n")
    (tmp_path / "link.yaml").symlink_to("f.yaml")
    assert special(tmp_path / "x.yaml") == "a FIFO (named pipe)"
    assert special(tmp_path / "z.yaml") == "a character device"
    assert special(tmp_path / "a.yaml") == "a loop of symbolic links that never reaches a file"
    assert special(tmp_path / "f.yaml") is None and special(tmp_path / "missing") is None
    assert read_input(tmp_path / "link.yaml") == b"a: 1\n"  # a link to a file is a file
    with pytest.raises(NotARegularFileError, match="is a FIFO"):
        open_input(tmp_path / "x.yaml")  # and it returns: nothing waits for a writer
    with pytest.raises(NotARegularFileError, match="is a character device"):
        read_input(tmp_path / "z.yaml")
    with pytest.raises(OSError, match="loop of symbolic links"):
        open_input(tmp_path / "a.yaml")


@pytest.mark.slow
def test_validate_and_render_name_special_files(tmp_path: Path) -> None:
    project = _project(tmp_path)
    _specials(project / "evals")
    proc = agentv_cli(project, "validate", "evals", timeout=60, memory_mb=CAP_MB)
    assert proc.returncode == 1
    out = proc.stdout
    assert "✓ evals/e.yaml  (eval file, 3 cases)" in out
    for name, what in (
        ("x.yaml", "a FIFO (named pipe)"),
        ("z.yaml", "a character device"),
        ("a.yaml", "a loop of symbolic links that never reaches a file"),
        ("b.yaml", "a loop of symbolic links that never reaches a file"),
    ):
        assert f"✗ evals/{name}: not a file agentv can read: it is {what}" in out, name
    assert "Traceback" not in proc.stderr
    render = agentv_cli(project, "render", "evals/x.yaml", timeout=60)
    assert render.returncode == 1
    assert "evals/x.yaml: error: not a file agentv can read: it is a FIFO" in render.stderr
    # eval leaves them out of a folder (they are no eval files), and names one given itself
    run = agentv_cli(project, "eval", "evals", "--out", "r.jsonl", timeout=60)
    assert run.returncode == 0, run.stderr
    run = agentv_cli(project, "eval", "evals/z.yaml", timeout=60)
    assert run.returncode == 1
    assert "evals/z.yaml is a character device, not a regular file" in run.stderr


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_targets_config_and_schema_files_that_are_not_files(tmp_path: Path, kind: str) -> None:
    project = _project(tmp_path)
    write(
        project,
        "evals/s.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n  - id: s\n    outcome: x\n"
        "    input_messages: [{role: user, content: hi}]\n"
        "    evaluators: [{type: is_json, schema: answer.json}]\n",
    )
    (project / ".agentv/targets.yaml").unlink()
    for rel in (".agentv/targets.yaml", ".agentv/config.yaml", "evals/answer.json"):
        if kind == "fifo":
            os.mkfifo(project / rel)
        else:
            (project / rel).symlink_to("/dev/zero")
    proc = agentv_cli(project, "validate", "evals", ".agentv", timeout=60, memory_mb=CAP_MB)
    assert proc.returncode == 1
    what = "a FIFO (named pipe)" if kind == "fifo" else "a character device"
    assert f"✗ .agentv/targets.yaml: not a file agentv can read: it is {what}" in proc.stdout
    assert f"✗ .agentv/config.yaml: not a file agentv can read: it is {what}" in proc.stdout
    assert f"cannot read JSON Schema file answer.json: is {what}, not a regular file" in (
        proc.stdout
    )
    run = agentv_cli(project, "eval", "evals/e.yaml", timeout=60, memory_mb=CAP_MB)
    assert run.returncode == 1
    assert f"not a file agentv can read: it is {what}" in run.stderr


@pytest.mark.slow
def test_a_cache_of_fifos_and_devices_is_a_cache_of_misses(tmp_path: Path) -> None:
    # The cache cannot fail a case: entries that are FIFOs or links to /dev/zero are
    # misses, asked again and replaced.
    project = _project(tmp_path)
    first = agentv_cli(project, "eval", "evals", "--cache", "--out", "first.jsonl", timeout=60)
    assert first.returncode == 0, first.stderr
    entries = sorted((project / ".agentv/cache").rglob("*.json"))
    assert len(entries) == 3
    for i, entry in enumerate(entries):
        entry.unlink()
        if i % 2:
            entry.symlink_to("/dev/zero")
        else:
            os.mkfifo(entry)
    again = agentv_cli(
        project, "eval", "evals", "--cache", "--out", "again.jsonl", timeout=60, memory_mb=CAP_MB
    )
    assert again.returncode == 0, again.stderr
    rows = [json.loads(line) for line in (project / "again.jsonl").read_text().splitlines()]
    assert sorted(r["eval_id"] for r in rows) == ["c0", "c1", "c2"]
    assert not any(r.get("cached") for r in rows)  # asked again: nothing was reused
    for entry in entries:  # and the entries are files again
        assert entry.is_file() and not entry.is_symlink()
        assert json.loads(entry.read_text())["text"] == "The answer is 42."


@pytest.mark.slow
def test_results_files_that_are_not_files(tmp_path: Path) -> None:
    project = _project(tmp_path)
    os.mkfifo(project / "r.jsonl")
    (project / "z.jsonl").symlink_to("/dev/zero")
    for command in (
        ["report", "r.jsonl"],
        ["compare", "z.jsonl", "r.jsonl"],
        ["eval", "evals", "--resume", "r.jsonl"],
        ["eval", "evals", "--rerun-failed", "z.jsonl"],
        ["eval", "evals", "--out", "r.jsonl"],
    ):
        proc = agentv_cli(project, *command, timeout=60, memory_mb=CAP_MB)
        assert proc.returncode == 1, command
        assert (
            "is a FIFO (named pipe), not a" in proc.stderr
            or "is a character device, not a" in proc.stderr
        ), (command, proc.stderr)
        assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_outputs_never_replace_a_fifo_or_a_device(tmp_path: Path) -> None:
    project = _project(tmp_path)
    run = agentv_cli(project, "eval", "evals", "--out", "r.jsonl", timeout=60)
    assert run.returncode == 0, run.stderr
    os.mkfifo(project / "out.html")
    proc = agentv_cli(project, "report", "r.jsonl", "-o", "out.html", timeout=60)
    assert proc.returncode == 1
    assert "out.html: is a FIFO (named pipe), not a regular file" in proc.stderr
    assert special(project / "out.html") == "a FIFO (named pipe)"  # still the FIFO
    proc = agentv_cli(project, "eval", "evals", "--out", "s.jsonl", "--junit", "out.html")
    assert proc.returncode == 1
    assert special(project / "out.html") == "a FIFO (named pipe)"
