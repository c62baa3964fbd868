"""A large attachment is stored once per record: the question, the messages and the judge
prompt refer to it, so a record stays near the size of what was sent; putting the text back
gives the request exactly as sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentv.results.record import large_content_ref
from support.cli import agentv_cli
from support.fakes import FakeLLMServer
from support.files import write

#: every test here runs agentv as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

VERDICT = '{"score": 1, "hits": [], "misses": [], "reasoning": "ok"}'


def _put_back(value: Any, store: dict[str, str]) -> Any:
    if isinstance(value, str):
        for digest, text in store.items():
            value = value.replace(large_content_ref(digest), text)
        return value
    if isinstance(value, dict):
        return {k: _put_back(v, store) for k, v in value.items()}
    if isinstance(value, list):
        return [_put_back(v, store) for v in value]
    return value


def test_a_large_attachment_is_stored_once_and_the_request_rebuilds_exactly(repo: Path) -> None:
    big = "".join(f"line {i}: {'x' * 90}\n" for i in range(3000))  # about 300 KB
    write(repo, "evals/big.log", big)
    with FakeLLMServer(reply=lambda rec: VERDICT) as server:
        write(
            repo,
            ".agentv/targets.yaml",
            "$schema: agentv-targets-v2.2\ntargets:\n"
            f"  - {{name: default, provider: openai, base_url: '{server.url}/v1',"
            " api_key: k-12345678, model: m}\n",
        )
        write(
            repo,
            "evals/e.yaml",
            "$schema: agentv-eval-v2\nevalcases:\n  - id: big\n    outcome: reads the log\n"
            "    input_messages:\n      - role: user\n        content:\n"
            "          - {type: text, value: Summarise this log.}\n"
            "          - {type: file, value: big.log}\n",
        )
        proc = agentv_cli(repo, "eval", "evals/e.yaml", "--out", "r.jsonl")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        line = (repo / "r.jsonl").read_text(encoding="utf-8")
        sent = server.requests[0].body["messages"]  # the candidate's request (the judge's is [1])

    record = json.loads(line)
    store = record["large_content"]
    assert list(store.values()) == [big.rstrip()]
    # once in the record, though the question, the messages (twice: the original AgentV's
    # record and raw_request) and the judge prompt all hold it
    assert len(line) < len(big) * 1.2
    assert line.count(large_content_ref(next(iter(store)))) >= 4
    rebuilt = _put_back(record["raw_request"]["chat_prompt"], store)
    assert rebuilt == [{"role": m["role"], "content": m["content"]} for m in sent]
    question = _put_back(record["raw_request"]["question"], store)
    assert question == f'Summarise this log.\n<file path="big.log">\n{big.rstrip()}\n</file>'


def test_small_attachments_stay_in_place(repo: Path) -> None:
    write(repo, "evals/small.txt", "tiny\n")
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n"
        "  - {name: default, provider: mock, response: ok}\n",
    )
    write(
        repo,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n  - id: s\n    outcome: ok\n"
        "    input_messages: [{role: user, content: [{type: file, value: small.txt}]}]\n"
        "    evaluators: [{type: contains, value: ok}]\n",
    )
    proc = agentv_cli(repo, "eval", "evals/e.yaml", "--out", "r.jsonl")
    assert proc.returncode == 0, proc.stderr
    record = json.loads((repo / "r.jsonl").read_text(encoding="utf-8"))
    assert "large_content" not in record
    assert record["raw_request"]["chat_prompt"][1]["content"] == "=== small.txt ===\ntiny"


def test_a_very_large_attachment_is_warned_about_once(repo: Path) -> None:
    write(repo, "evals/huge.txt", "y" * (10 * 2**20 + 10))
    write(
        repo,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        + "".join(
            f"  - id: c{i}\n    outcome: ok\n"
            "    input_messages: [{role: user, content: [{type: file, value: huge.txt}]}]\n"
            for i in range(3)
        ),
    )
    proc = agentv_cli(repo, "validate", "evals/e.yaml")
    assert proc.returncode == 0, proc.stdout  # a warning, not an error
    warnings = [x for x in proc.stdout.splitlines() if "MiB of text" in x]
    assert warnings == [
        "  ⚠ evals/e.yaml:5:65: case 'c0': referenced file huge.txt is 10 MiB of text: "
        "it is sent whole "
        "with every request of the cases that attach it"
    ]
