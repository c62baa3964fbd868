"""``agentv estimate`` takes each answer at most as long as its target lets it be (its
``max_output_tokens``), the carried answers of a conversation too, and a judge's verdict at
most its judge's: a target capped at 40 tokens is not estimated at 500 an answer. Through
the real command line on real files; nothing is sent."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli_run import agentv_cli
from support.helpers import write

TARGETS = """\
$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: openai
    model: m
    api_key: k-12345678
    base_url: http://127.0.0.1:9/v1
    max_output_tokens: 40
    judge_target: judge
    price: {input_per_mtok: 0, output_per_mtok: 1000000}
  - name: judge
    provider: openai
    model: j
    api_key: k-12345678
    base_url: http://127.0.0.1:9/v1
    max_output_tokens: 30
    price: {input_per_mtok: 0, output_per_mtok: 0}
"""
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
    write(repo, ".agentv/targets.yaml", TARGETS)
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
