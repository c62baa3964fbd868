"""Faults around a run (issue 16), each against the real thing: `agentv eval` as a process,
the loopback fake API, real files, real limits and signals.

- a damaged cache entry is a miss, rewritten, and never fails a case;
- an empty answer is an error and is not cached;
- a target's `timeout_seconds` bounds each LM request inside a run;
- a cli agent's answer is capped (output file and stdout);
- the results file is locked for the run and written one whole record at a time;
- agents die with agentv, even after SIGKILL, and setsid grandchildren at a timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agentv.providers.base import ProviderResponse, Usage
from agentv.run.cache import ResponseCache
from support.cli import agentv_cli, start_agentv
from support.fakes import FakeLLMServer, Fault
from support.files import write
from support.targets import openai_target, write_targets

KEY = "sk-fault-test-key-0123456789"
ENV = {"FAULT_KEY": KEY}
#: the target's fields besides its address: the key from the environment
TARGET = {"api_key": "${{ FAULT_KEY }}", "model": "fake-model", "retry_initial_delay_ms": 1}

ONE_CASE = (
    "$schema: agentv-eval-v2\nevalcases:\n"
    "  - id: one\n    outcome: Says 42.\n"
    "    input_messages: [{role: user, content: What is 6 times 7?}]\n"
    "    execution: {evaluators: [{type: contains, value: '42'}]}\n"
)


@pytest.fixture
def server():
    with FakeLLMServer(reply="The answer is 42.") as srv:
        yield srv


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def cache_entries(repo: Path) -> list[Path]:
    return sorted((repo / ".agentv" / "cache").glob("*/*.json"))


# --- the cache ------------------------------------------------------------------------------

DAMAGE = {
    "a list": b"[]",
    "null": b"null",
    "a number": b"42",
    "text of the wrong type": b'{"text": 42}',
    "usage of the wrong type": b'{"text": "x", "usage": [1, 2]}',
    "usage with wrong field types": b'{"text": "x", "usage": {"input_tokens": "many"}}',
    "usage with unknown fields": b'{"text": "x", "usage": {"tokens": 1}}',
    "sent of the wrong type": b'{"text": "x", "sent": "everything"}',
    "reasoning of the wrong type": b'{"text": "x", "reasoning": {"a": 1}}',
    "latency of the wrong type": b'{"text": "x", "latency_ms": "fast"}',
    "an empty answer": b'{"text": ""}',
    "not JSON": b"{not json",
    "not UTF-8": b"\xff\xfe\x00",
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_cache_entry_is_a_miss_and_is_rewritten(tmp_path: Path, damage: str) -> None:
    cache = ResponseCache(tmp_path)
    key = "ab" + "0" * 62
    entry = tmp_path / "ab" / f"{key}.json"
    entry.parent.mkdir()
    entry.write_bytes(DAMAGE[damage])
    assert cache.get(key) is None
    cache.put(key, ProviderResponse(text="42", usage=Usage(1, 2, 3)))
    hit = cache.get(key)
    assert hit is not None and hit.text == "42" and hit.usage == Usage(1, 2, 3)
    assert [p.name for p in entry.parent.iterdir()] == [entry.name]  # no .tmp left


def test_a_folder_where_an_entry_goes_is_a_miss_and_is_replaced(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    key = "cd" + "1" * 62
    folder = tmp_path / "cd" / f"{key}.json"
    (folder / "inside").mkdir(parents=True)
    (folder / "inside" / "file").write_text("x")
    assert cache.get(key) is None
    cache.put(key, ProviderResponse(text="42"))
    assert cache.get(key) is not None
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]


@pytest.mark.skipif(os.geteuid() == 0, reason="root removes read-only folders anyway")
def test_a_folder_that_cannot_be_removed_is_left_and_nothing_is_cached(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    key = "ef" + "2" * 62
    shard = tmp_path / "ef"
    folder = shard / f"{key}.json"
    (folder / "locked").mkdir(parents=True)
    (folder / "locked" / "file").write_text("x")
    (folder / "locked").chmod(0o500)  # its content cannot be removed
    try:
        cache.put(key, ProviderResponse(text="42"))  # must not raise
        assert cache.get(key) is None
        assert not [p for p in shard.iterdir() if p.name.endswith(".tmp")]
    finally:
        (folder / "locked").chmod(0o700)


PUT_UNDER_A_FILE_SIZE_LIMIT = """
import resource, sys
from pathlib import Path
from agentv.run.cache import ResponseCache
from agentv.providers.base import ProviderResponse
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
cache = ResponseCache(Path(sys.argv[1]))
cache.put("ab" + "5" * 62, ProviderResponse(text="x" * 100_000))  # must not raise
cache.put("ab" + "6" * 62, ProviderResponse(text="small"))
print(cache.get("ab" + "5" * 62), cache.get("ab" + "6" * 62).text)
"""


@pytest.mark.slow
def test_an_entry_that_cannot_be_written_is_not_cached_and_leaves_no_temp_file(
    tmp_path: Path,
) -> None:
    # A real failed write: the file size limit stops the temporary file part-way.
    proc = subprocess.run(
        [sys.executable, "-c", PUT_UNDER_A_FILE_SIZE_LIMIT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["None", "small"]
    assert sorted(p.name for p in (tmp_path / "ab").iterdir()) == ["ab" + "6" * 62 + ".json"]


def test_a_cache_that_cannot_be_written_at_all_is_just_not_used() -> None:
    cache = ResponseCache(Path("/proc/self/agentv-cache"))  # no folder can be made here
    cache.put("ab" + "7" * 62, ProviderResponse(text="42"))
    assert cache.get("ab" + "7" * 62) is None


def test_a_file_where_a_cache_shard_folder_goes_is_replaced(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    key = "12" + "3" * 62
    (tmp_path / "12").write_text("not a folder")
    assert cache.get(key) is None
    cache.put(key, ProviderResponse(text="42"))
    assert cache.get(key) is not None


def test_an_empty_answer_is_never_cached(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path)
    cache.put("ab" + "4" * 62, ProviderResponse(text=""))
    assert not list(tmp_path.rglob("*"))


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["[]", "null", '{"text": 1}', "folder"])
def test_a_run_with_a_damaged_cache_entry_sends_again_and_passes(
    repo: Path, server: FakeLLMServer, damage: str
) -> None:
    write_targets(repo, openai_target(server.url, **TARGET))
    write(repo, "evals/one.yaml", ONE_CASE)
    first = agentv_cli(repo, "eval", "evals/one.yaml", "--cache", "--out", "a.jsonl", env=ENV)
    assert first.returncode == 0, first.stderr
    (entry,) = cache_entries(repo)
    entry.unlink()
    if damage == "folder":
        (entry / "sub").mkdir(parents=True)
    else:
        entry.write_text(damage)
    second = agentv_cli(repo, "eval", "evals/one.yaml", "--cache", "--out", "b.jsonl", env=ENV)
    assert second.returncode == 0, second.stderr
    (record,) = rows(repo / "b.jsonl")
    assert record["status"] == "ok" and record["candidate_answer"] == "The answer is 42."
    assert len(server.requests) == 2  # the damaged entry was a miss
    assert json.loads(entry.read_text())["text"] == "The answer is 42."  # rewritten
    assert not list((repo / ".agentv" / "cache").rglob("*.tmp"))
    third = agentv_cli(repo, "eval", "evals/one.yaml", "--cache", "--out", "c.jsonl", env=ENV)
    assert third.returncode == 0 and len(server.requests) == 2  # and used again


# --- empty answers ------------------------------------------------------------------------


@pytest.mark.slow
def test_an_empty_answer_is_an_error_and_a_rerun_asks_again(
    repo: Path, server: FakeLLMServer
) -> None:
    write_targets(repo, openai_target(server.url, **TARGET, max_retries=3))
    write(repo, "evals/one.yaml", ONE_CASE)
    server.script(Fault.empty_answer(), Fault.empty_answer())
    first = agentv_cli(repo, "eval", "evals/one.yaml", "--cache", "--out", "a.jsonl", env=ENV)
    assert first.returncode == 3, first.stderr
    (record,) = rows(repo / "a.jsonl")
    assert record["status"] == "error"
    assert record["error"] == (
        "target 'default' (openai): the API returned an empty answer (gave up after 2 attempts)"
    )
    assert record["attempts"] == 2
    assert len(server.requests) == 2  # retried once, not max_retries times
    assert not cache_entries(repo)
    second = agentv_cli(repo, "eval", "evals/one.yaml", "--cache", "--out", "b.jsonl", env=ENV)
    assert second.returncode == 0, second.stderr
    (record,) = rows(repo / "b.jsonl")
    assert record["status"] == "ok" and record["candidate_answer"] == "The answer is 42."
    assert len(server.requests) == 3


# --- the results file -------------------------------------------------------------------------


def many_cases(n: int, answer_size: int = 0) -> str:
    cases = "".join(
        f"  - id: case-{i}\n    outcome: Says 42.\n"
        f"    input_messages: [{{role: user, content: 'Question {i}: what is 6 times 7?'}}]\n"
        "    execution: {evaluators: [{type: contains, value: '42'}]}\n"
        for i in range(n)
    )
    return f"$schema: agentv-eval-v2\nevalcases:\n{cases}"


@pytest.mark.slow
def test_a_second_run_on_the_same_out_stops_at_once_and_the_first_is_intact(
    repo: Path, server: FakeLLMServer
) -> None:
    server.hold = threading.Event()  # the first run's answers wait until the second ended
    write_targets(repo, openai_target(server.url, **TARGET))
    write(repo, "evals/many.yaml", many_cases(12))
    first = start_agentv(
        repo, "eval", "evals/many.yaml", "--out", "same.jsonl", "--workers", "2", env=ENV
    )
    try:
        assert first.stdout is not None
        assert first.stdout.readline().startswith("Output path: ")  # the file is held now
        started = time.monotonic()
        second = agentv_cli(repo, "eval", "evals/many.yaml", "--out", "same.jsonl", env=ENV)
        took = time.monotonic() - started
        assert second.returncode == 1
        assert second.stderr.strip().endswith(
            "same.jsonl: another agentv run is writing it. Wait for that run to finish, "
            "or choose another file with --out."
        )
        assert "error: Cannot write the results file " in second.stderr
        assert "Results written to" not in second.stdout
        assert took < 30
        assert first.poll() is None, "the second run must not have waited for the first"
        server.hold.set()
        _, err = first.communicate(timeout=120)
    finally:
        server.hold.set()
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == 0, err
    records = rows(repo / "same.jsonl")
    assert sorted(r["eval_id"] for r in records) == sorted(f"case-{i}" for i in range(12))
    assert len(server.requests) == 12  # the second run sent nothing


@pytest.mark.slow
def test_a_run_after_a_finished_run_may_reuse_its_out(repo: Path, server: FakeLLMServer) -> None:
    write_targets(repo, openai_target(server.url, **TARGET))
    write(repo, "evals/one.yaml", ONE_CASE)
    for _ in range(2):
        proc = agentv_cli(repo, "eval", "evals/one.yaml", "--out", "again.jsonl", env=ENV)
        assert proc.returncode == 0, proc.stderr
        assert len(rows(repo / "again.jsonl")) == 1


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["jsonl", "yaml"])
def test_a_write_that_fails_part_way_is_cut_back_to_the_last_whole_record(
    repo: Path, server: FakeLLMServer, fmt: str
) -> None:
    server.reply = "The answer is 42. " + "x" * 1500  # records of about 3 KB
    write_targets(repo, openai_target(server.url, **TARGET))
    write(repo, "evals/many.yaml", many_cases(6))
    out = repo / f"r.{fmt}"
    limit = 8000  # two or three whole records, then a record cut by the limit
    proc = agentv_cli(
        repo,
        *("eval", "evals/many.yaml", "--out", out.name, "--output-format", fmt),
        file_size=limit,
        env=ENV,
    )
    data = out.read_bytes()
    # whole records only (they may fill the limit exactly, as the temporary path decides)
    assert 0 < len(data) <= limit and data.endswith(b"\n"), data[-80:]
    assert proc.returncode == 1, proc.stderr
    assert f"error: Cannot write to the results file {out}: File too large" in proc.stderr
    assert "(the file keeps every whole record written before)" in proc.stderr
    if fmt == "jsonl":
        records = [json.loads(line) for line in data.decode().splitlines()]
    else:
        import yaml

        records = list(yaml.safe_load_all(data.decode()))
    assert records and all(r["status"] == "ok" for r in records)
    assert all(r["candidate_answer"].startswith("The answer is 42.") for r in records)


# --- timeouts of LM targets in a run ------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["hanging", "hang_after_headers", "stall_mid_body"])
def test_a_targets_timeout_seconds_bounds_each_request_of_a_run(
    repo: Path, server: FakeLLMServer, fault: str
) -> None:
    write_targets(repo, openai_target(server.url, **TARGET, timeout_seconds=1, max_retries=0))
    write(repo, "evals/one.yaml", ONE_CASE)
    server.script(*[getattr(Fault, fault)()] * 2)
    started = time.monotonic()
    # --agent-timeout stays at its 120 s: the target's own, shorter limit wins
    proc = agentv_cli(
        repo, "eval", "evals/one.yaml", "--out", "r.jsonl", "--max-retries", "1", env=ENV
    )
    took = time.monotonic() - started
    assert proc.returncode == 3, proc.stderr
    (record,) = rows(repo / "r.jsonl")
    assert record["status"] == "error"
    assert record["error"] == (
        f"target 'default' (openai): no answer within 1 s from {server.url}/v1 (after 2 attempts)"
    )
    assert record["attempts"] == 2
    assert took < 20, f"two 1 s attempts took {took:.0f} s"
