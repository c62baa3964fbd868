"""JSONL writer: one valid line per record, on disk the moment it is written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agentv.results.writers import JsonlWriter, ResultsFileError, dumps_line, open_writer


def _read_lines(path: Path) -> list[dict]:
    # A separate handle: sees only what reached the file, not a writer's buffer.
    with path.open("rb") as fh:
        data = fh.read()
    assert data == b"" or data.endswith(b"\n")
    return [json.loads(line) for line in data.splitlines()]


def test_each_record_is_on_disk_before_close(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "er" / "results.jsonl"
    writer = open_writer(path, "jsonl")
    assert path.exists() and path.read_bytes() == b""  # created at open, parents too

    records = [
        {"eval_id": "a", "score": 1.0, "hits": ["x"], "candidate_answer": "line1\nline2"},
        {"eval_id": "b", "score": 0.25, "misses": [], "target": "t", "note": "café ✓"},
        {"eval_id": "c", "score": 0, "error": "boom"},
    ]
    for i, record in enumerate(records, 1):
        writer.write(record)
        assert _read_lines(path) == records[:i]
    writer.close()
    assert _read_lines(path) == records


def test_lines_are_compact_utf8_and_keep_key_order(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with open_writer(path) as writer:
        writer.write({"z": 1, "a": {"y": [1, 2], "b": "é"}})
    assert path.read_bytes() == '{"z":1,"a":{"y":[1,2],"b":"é"}}\n'.encode()


def test_values_json_lacks_are_written_not_lost(tmp_path: Path) -> None:
    line = dumps_line(
        {"path": Path("a/b.txt"), "tags": {"b", "a"}, "t": (1, 2), "nan": float("nan")}
    )
    assert json.loads(line) == {"path": "a/b.txt", "tags": ["a", "b"], "t": [1, 2], "nan": None}


def test_values_orjson_rejects_fall_back_to_strict_json() -> None:
    record = {"big": 2**70, "by_int": {1: "one"}, "inf": float("inf"), "p": Path("x")}
    line = dumps_line(record)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {"big": 2**70, "by_int": {"1": "one"}, "inf": None, "p": "x"}


def test_open_truncates_an_old_file(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"old": true}\n')
    open_writer(path).close()
    assert path.read_bytes() == b""


def test_write_after_close_is_a_clear_error(tmp_path: Path) -> None:
    writer = JsonlWriter(tmp_path / "r.jsonl")
    writer.write({"eval_id": "a"})
    writer.close()
    writer.close()  # closing twice is harmless
    with pytest.raises(ResultsFileError, match="Cannot write to closed JSONL writer"):
        writer.write({"eval_id": "b"})
    assert _read_lines(writer.path) == [{"eval_id": "a"}]


_CHILD = """
import sys, time
from pathlib import Path
from agentv.results.writers import open_writer
writer = open_writer(Path(sys.argv[1]), "jsonl")
for i in range(50):
    writer.write({"eval_id": f"case-{i}", "candidate_answer": "x" * 5000})
print("written", flush=True)
time.sleep(60)
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_killed_run_keeps_every_written_record(tmp_path: Path) -> None:
    path = tmp_path / "killed.jsonl"
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "written"
        os.kill(child.pid, signal.SIGKILL)  # no close, no exit handlers
    finally:
        child.wait(timeout=30)
        if child.stdout:
            child.stdout.close()
    rows = _read_lines(path)
    assert [r["eval_id"] for r in rows] == [f"case-{i}" for i in range(50)]
