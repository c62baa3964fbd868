"""What a target's requests give up on, and say (docs/targets.md, "Errors";
docs/reliability.md, "Errors say why"): a refused connection (no server there) and an
HTTP 500 that says what is wrong with the request (how llama-cpp-python refuses one) are
tried again for a few seconds by default, not for a minute, and the error names the
cause, the attempts and why it stopped; a target's own retry settings still apply as
written. A body that is not UTF-8 is said to be so. Through the real command line, the
official OpenAI SDK and the loopback fake server (default retry settings: no test
shortcut)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.cli import agentv_cli
from support.fakes import Every, FakeLLMServer, Fault, refused
from support.files import write
from support.results import rows
from support.targets import openai_target, write_targets

#: every test here starts agentv (or a script) as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

SUITE = """\
$schema: agentv-eval-v2
evalcases:
  - id: a
    outcome: x
    input_messages: [{role: user, content: hi}]
    evaluators: [{type: contains, value: x}]
"""
#: how llama-cpp-python refuses a request it cannot take (its validation error, as a 500)
VALIDATION = (
    "1 validation error for CreateChatCompletionRequest\n"
    "max_tokens\n  Input should be greater than or equal to 1"
)


def _project(repo: Path, url: str, **fields: object) -> None:
    write_targets(repo, openai_target(url, **fields))
    write(repo, "evals/e.yaml", SUITE)


def _error(repo: Path) -> str:
    (record,) = rows(repo / "r.jsonl")
    assert record["status"] == "error"
    return record["error"]


def test_a_refused_connection_is_given_up_in_seconds(repo: Path) -> None:
    with refused() as url:
        _project(repo, url)
        # the hang guard (40 s) is below the minute the default schedule would take
        proc = agentv_cli(repo, "eval", "evals/e.yaml", "--out", "r.jsonl", timeout=40)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    error = _error(repo)
    assert f"cannot reach {url}/v1: connection refused (is the server running?)" in error
    found = re.search(r"gave up after (\d+) attempts over ([\d.]+) s: ", error)
    assert found is not None, error
    assert int(found.group(1)) >= 2
    assert "a refused connection is tried again for 5 s at most" in error
    assert "set max_retries on the target to try for longer" in error


def test_a_500_that_refuses_the_request_is_given_up_in_seconds(repo: Path) -> None:
    with FakeLLMServer(standing=(Every(1, Fault(500, VALIDATION)),)) as server:
        _project(repo, server.url)
        proc = agentv_cli(repo, "eval", "evals/e.yaml", "--out", "r.jsonl", timeout=40)
        sent = len(server.requests)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    error = _error(repo)
    assert "HTTP 500: 1 validation error for CreateChatCompletionRequest" in error
    assert f"gave up after {sent} attempts over " in error
    assert "an HTTP 500 is tried again for 5 s at most" in error
    assert 2 <= sent <= 4


def test_a_targets_own_retries_apply_as_written(repo: Path) -> None:
    with FakeLLMServer(standing=(Every(1, Fault(500, VALIDATION)),)) as server:
        _project(repo, server.url, max_retries=9, retry_initial_delay_ms=1, retry_max_delay_ms=5)
        proc = agentv_cli(repo, "eval", "evals/e.yaml", "--out", "r.jsonl", timeout=40)
        sent = len(server.requests)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert sent == 10
    assert "(gave up after 10 attempts)" in _error(repo)


def test_a_body_that_is_not_utf8_is_said_to_be_so(repo: Path) -> None:
    body = b'{"choices": [{"message": {"content": "caf\xe9"}}]}'
    with FakeLLMServer() as server:
        server.script(Fault.body(body, content_type="application/json"))
        _project(repo, server.url, max_retries=0)
        proc = agentv_cli(repo, "eval", "evals/e.yaml", "--out", "r.jsonl", timeout=40)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    error = _error(repo)
    assert "the API answered with a body that is not UTF-8 (byte 0xe9 at position 41)" in error
    assert "not JSON" not in error
