"""``agentv estimate`` takes each answer at most as long as its target lets it be (its
``max_output_tokens``), the carried answers of a conversation too, and a judge's verdict at
most its judge's: a target capped at 40 tokens is not estimated at 500 an answer. Through
the real command line on real files; nothing is sent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.cli import agentv_cli
from support.files import write
from support.targets import openai_target, write_targets

#: every test here starts agentv (or a script) as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

#: nothing listens there: an estimate sends no request
NOWHERE = "http://127.0.0.1:9"
TARGETS = (
    openai_target(
        NOWHERE,
        max_output_tokens=40,
        judge_target="judge",
        price={"input_per_mtok": 0, "output_per_mtok": 1000000},
    ),
    openai_target(
        NOWHERE,
        name="judge",
        model="j",
        max_output_tokens=30,
        price={"input_per_mtok": 0, "output_per_mtok": 0},
    ),
)
SUITE = """\
$schema: agentv-eval-v2
evalcases:
  - id: one
    outcome: Answers.
    input_messages: [{role: user, content: hi}]
  - id: talk
    outcome: Talks.
    input_messages: [{role: system, content: Talk.}]
    turns:
      - content: first
        evaluators: [{type: contains, value: a}]
      - content: second
        evaluators: [{type: contains, value: a}]
"""


def test_the_estimate_keeps_to_each_targets_output_limit(repo: Path) -> None:
    write_targets(repo, *TARGETS)
    write(repo, "evals/s.yaml", SUITE)
    proc = agentv_cli(repo, "estimate", "evals/s.yaml", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout)
    lines = {line["role"]: line for line in found["lines"]}
    # three answers (one, and two turns) of 40 tokens, not 500: $1 a token
    assert (lines["target"]["requests"], lines["target"]["output_tokens"]) == (3, 120)
    assert lines["target"]["usd"] == 120.0
    # the one judge's verdict at most 30 tokens
    assert (lines["judge"]["requests"], lines["judge"]["output_tokens"]) == (1, 30)
    table = agentv_cli(repo, "estimate", "evals/s.yaml")
    assert "each answer 500 tokens (--answer-tokens), at most its target's " in table.stdout
    assert "max_output_tokens" in table.stdout
