"""A run never looks better than it was: every broken case and evaluator is on screen, in
the summary, in the results file and in the exit code; what can be checked before the
first request is checked before it. Real CLI processes against the loopback fake API."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from support.cli import agentv_cli
from support.fakes import FakeLLMServer, Fault, RecordedRequest
from support.files import write
from support.paths import EXAMPLES
from support.targets import openai_target, write_targets

#: every test here runs agentv as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

KEY = "sk-truth-test-key-0123456789"
VERDICT = {"score": 0.9, "hits": ["right"], "misses": [], "reasoning": "Good."}


def _reply(rec: RecordedRequest) -> str:
    system = rec.body["messages"][0]["content"]
    if system.startswith("You are an expert evaluator"):
        return json.dumps(VERDICT)
    return "The answer is 42."


@pytest.fixture
def server():
    with FakeLLMServer(reply=_reply) as srv:
        yield srv


#: the target's fields besides its address: the key from the environment, no retry
KEYED = {
    "api_key": "${{ TRUTH_KEY }}",
    "model": "fake-model",
    "max_retries": 0,
    "retry_initial_delay_ms": 1,
}
ENV = {"TRUTH_KEY": KEY}


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


MIXED = """$schema: agentv-eval-v2
evalcases:
  - id: good
    outcome: Says 42.
    input_messages: [{role: user, content: "What is 6 times 7?"}]
    execution: {evaluators: [{type: contains, value: "42"}]}
  - id: crash
    outcome: Says 42.
    input_messages: [{role: user, content: "And 7 times 6?"}]
    execution:
      evaluators:
        - {name: crasher, type: code, script: python3 crash.py}
        - {type: contains, value: "42"}
  - id: bad-regex
    outcome: Says 42.
    input_messages: [{role: user, content: "Again?"}]
    execution: {evaluators: [{name: rx, type: regex, value: "(["}]}
  - id: missing-file
    outcome: Reads the file.
    input_messages:
      - role: user
        content: [{type: file, value: missing.md}]
    execution: {evaluators: [{type: contains, value: "42"}]}
  - id: typo
    outcom: Says 42.
    input_messages: [{role: user, content: "Hm?"}]
"""


def _located(text: str, mark: str) -> set[tuple[str, str]]:
    """``(file:line:column, message)`` of every problem printed in ``text``."""
    pattern = rf"^\s*{mark}(evals/mixed\.yaml:\d+:\d+): (?:error: )?(.+)$"
    return {(m.group(1), m.group(2)) for m in re.finditer(pattern, text, re.MULTILINE)}


def test_broken_cases_are_on_screen_in_the_results_and_in_the_exit_code(
    repo: Path, server: FakeLLMServer
) -> None:
    write_targets(repo, openai_target(server.url, **KEYED))
    write(repo, "evals/mixed.yaml", MIXED)
    write(repo, "evals/crash.py", "raise SystemExit('boom: checker crashed')\n")
    out = repo / "r.jsonl"
    proc = agentv_cli(
        repo, "eval", "evals/mixed.yaml", "--out", str(out), env=ENV, unset=["MISSING_JUDGE_KEY"]
    )

    # only the two runnable cases reached the API
    assert len(server.requests) == 2
    assert proc.returncode == 3, proc.stderr
    by_id = {r.get("eval_id"): r for r in rows(out)}
    assert set(by_id) == {"good", "crash", "bad-regex", "missing-file", "typo"}
    assert {k: r["status"] for k, r in by_id.items()} == {
        "good": "ok",
        "crash": "error",
        "bad-regex": "invalid",
        "missing-file": "invalid",
        "typo": "invalid",
    }
    assert by_id["good"]["passed"] is True
    assert all(r["passed"] is False for k, r in by_id.items() if k != "good")
    assert by_id["crash"]["error"].startswith("evaluator 'crasher' could not grade: ")
    assert by_id["bad-regex"]["error"].startswith(
        "case 'bad-regex': invalid regular expression \"([\""
    )
    assert by_id["missing-file"]["error"].startswith(
        "case 'missing-file': referenced file not found: missing.md"
    )
    assert by_id["typo"]["error"].startswith("case 'typo': unknown key 'outcom'")
    for key in ("bad-regex", "missing-file", "typo"):
        assert by_id[key]["attempts"] == 0 and by_id[key]["line"] > 0

    # the console names each broken case, and the evaluator that broke
    assert "✓ good | default [provider=openai] score=1.000" in proc.stdout
    assert "! crash | default [provider=openai] error: evaluator 'crasher' could not grade" in (
        proc.stdout
    )
    for key in ("bad-regex", "missing-file", "typo"):
        assert f"! {key} | mixed.yaml invalid: " in proc.stdout
    assert "Passed: 1  Failed: 0  Errors: 1  Invalid: 3" in proc.stdout
    assert "Evaluator errors: crasher x1" in proc.stdout
    assert "1 run(s) errored, 3 invalid: exit code 3" in proc.stderr

    # --allow-errors: the same run, exit 0
    allowed = agentv_cli(
        repo,
        "eval",
        "evals/mixed.yaml",
        "--out",
        "r2.jsonl",
        "--allow-errors",
        env=ENV,
        unset=["MISSING_JUDGE_KEY"],
    )
    assert allowed.returncode == 0, allowed.stderr

    # validate reports the same problems at the same places
    checked = agentv_cli(repo, "validate", "evals/mixed.yaml", env=ENV)
    assert checked.returncode == 1
    from_eval = _located(proc.stderr, "")
    assert len(from_eval) == 3
    assert _located(checked.stdout, "✗ ") == from_eval
    assert KEY not in out.read_text() + proc.stdout + proc.stderr


def test_a_missing_judge_key_is_reported_before_any_request(
    repo: Path, server: FakeLLMServer
) -> None:
    judge = {"api_key": "${{ MISSING_JUDGE_KEY }}", "model": "judge-model"}
    write_targets(
        repo,
        openai_target(server.url, **KEYED, judge_target="judge"),
        openai_target(server.url, "judge", **judge),
    )
    write(
        repo,
        "evals/judged.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        "  - id: judged\n    outcome: Explains.\n"
        "    input_messages: [{role: user, content: Explain.}]\n"
        "  - id: judged-too\n    outcome: Explains.\n"
        "    input_messages: [{role: user, content: Explain again.}]\n",
    )
    proc = agentv_cli(
        repo, "eval", "evals/judged.yaml", "--out", "r.jsonl", env=ENV, unset=["MISSING_JUDGE_KEY"]
    )
    assert server.requests == []  # nothing was spent
    assert proc.returncode == 3
    records = rows(repo / "r.jsonl")
    assert [r["status"] for r in records] == ["invalid", "invalid"]
    for r in records:
        assert "MISSING_JUDGE_KEY" in r["error"] and "cannot be judged" in r["error"]


def test_a_dry_run_of_the_examples_is_clean(tmp_path: Path) -> None:
    examples = EXAMPLES
    proc = agentv_cli(tmp_path, "eval", str(examples), "--dry-run", "--out", "r.jsonl")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Judge failures" not in proc.stdout and "Evaluator errors" not in proc.stdout
    assert "(dry run: no target or judge was called)" in proc.stdout
    records = rows(tmp_path / "r.jsonl")
    assert len(records) == 5 and all(r["status"] in ("ok", "failed") for r in records)


def test_cache_covers_the_judge_too(repo: Path, server: FakeLLMServer) -> None:
    write_targets(repo, openai_target(server.url, **KEYED))
    write(
        repo,
        "evals/judged.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        "  - id: judged\n    outcome: Says 42.\n"
        "    input_messages: [{role: user, content: What is 6 times 7?}]\n"
        "    execution:\n      evaluators:\n"
        "        - {type: llm_judge}\n        - {type: contains, value: '42'}\n",
    )
    first = agentv_cli(
        repo,
        "eval",
        "evals/judged.yaml",
        "--cache",
        "--out",
        "a.jsonl",
        env=ENV,
        unset=["MISSING_JUDGE_KEY"],
    )
    assert first.returncode == 0, first.stderr
    assert len(server.requests) == 2  # the candidate and the judge
    second = agentv_cli(
        repo,
        "eval",
        "evals/judged.yaml",
        "--cache",
        "--out",
        "b.jsonl",
        env=ENV,
        unset=["MISSING_JUDGE_KEY"],
    )
    assert second.returncode == 0, second.stderr
    assert len(server.requests) == 2  # neither was asked again
    assert (
        "Cache: 1 target answer and 1 judge answer reused, 0 target requests sent" in second.stdout
    )
    (a,), (b,) = rows(repo / "a.jsonl"), rows(repo / "b.jsonl")
    assert a["score"] == b["score"] == pytest.approx(0.95)


def test_rate_limits_are_retried_visibly_and_counted(repo: Path, server: FakeLLMServer) -> None:
    write_targets(repo, openai_target(server.url, **{**KEYED, "max_retries": 4}))
    server.script(*[Fault.rate_limited(retry_after=0.2)] * 3)
    write(
        repo,
        "evals/one.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        "  - id: one\n    outcome: Says 42.\n"
        "    input_messages: [{role: user, content: What is 6 times 7?}]\n"
        "    execution: {evaluators: [{type: contains, value: '42'}]}\n",
    )
    proc = agentv_cli(
        repo, "eval", "evals/one.yaml", "--out", "r.jsonl", env=ENV, unset=["MISSING_JUDGE_KEY"]
    )
    assert proc.returncode == 0, proc.stderr
    (record,) = rows(repo / "r.jsonl")
    assert record["attempts"] == 4 and record["status"] == "ok"
    assert len(server.requests) == 4
    # one line on screen (later retries within a few seconds are counted, not shown); the
    # target is paced from then on, its requests at once left alone (its one answer came
    # in milliseconds: three at once are more than its pace needs)
    lines = [x for x in proc.stdout.splitlines() if "rate-limited" in x]
    assert lines == ["default: 1 request rate-limited (429), retrying after 0.2 s"]
    assert "Retries:\n  default: 3 (429 x3)" in proc.stdout
    assert (
        "Throttled targets:\n  default: 4 requests, 3 throttled (429/503), "
        "paused 0.6 s, down to 3 at once"
    ) in proc.stdout
