"""A run's budget, its estimate and regrading (docs/running.md, docs/after-the-run.md),
against the loopback fake server through the official OpenAI SDK: the server counts what
it got. A budget stops a run mid-way (nothing beyond it but the requests in flight, the rest
recorded skipped, exit code 4, `--resume` going on with them); the estimate sends nothing;
a regrade with a changed evaluator asks no target, and reports a changed prompt."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import xmlschema

import agentv
from support.cli import agentv_cli
from support.fakes import FakeLLMServer, RecordedRequest
from support.files import write
from support.paths import DATA
from support.providers import provider_fields
from support.targets import write_targets

VERDICT = {"score": 0.5, "hits": ["counts"], "misses": ["slowly"], "reasoning": "half"}
ANSWER = "one two three four five"


def _reply(rec: RecordedRequest) -> str:
    text = json.dumps((rec.body or {}).get("messages"))
    return json.dumps(VERDICT) if "expert evaluator" in text else ANSWER


def _priced(target: FakeLLMServer, judge: FakeLLMServer, **fields: Any) -> list[dict[str, Any]]:
    """``default`` at ``target`` (``fields`` added), graded by ``judge``, each with its price."""
    return [
        {
            "name": "default",
            "provider": "openai",
            **provider_fields("openai", target),
            "judge_target": "judge",
            # every answer of the fake to these cases costs exactly $1: its tokens are its
            # words, output at $1 per token, input free
            "price": {"input_per_mtok": 0, "output_per_mtok": 200_000},
            **fields,
        },
        {
            "name": "judge",
            "provider": "openai",
            **provider_fields("openai", judge),
            "price": {"input_per_mtok": 0, "output_per_mtok": 0},
        },
    ]


def _suite(repo: Path, n: int, evaluators: str = "[{type: contains, value: three}]") -> None:
    cases = "".join(
        f"  - id: c{i}\n    outcome: Counts to five.\n"
        f"    input_messages: [{{role: user, content: 'count for me, case {i}'}}]\n"
        f"    execution: {{evaluators: {evaluators}}}\n"
        for i in range(n)
    )
    write(repo, "evals/s.yaml", "$schema: agentv-eval-v2\nevalcases:\n" + cases)


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --- the budget ----------------------------------------------------------------------------


@pytest.mark.slow
def test_a_budget_stops_the_run_mid_way_and_resume_goes_on(repo: Path) -> None:
    with FakeLLMServer(reply=_reply) as target, FakeLLMServer(reply=_reply) as judge:
        write_targets(repo, *_priced(target, judge))
        _suite(repo, 10)
        # one at a time: $1 a request, so the 4th brings the spend to the budget
        proc = agentv_cli(
            repo, "eval", "evals/", "--workers", "1", "--budget-usd", "3.5", "--out", "r.jsonl"
        )
        assert proc.returncode == 4, proc.stderr
        assert len(target.requests) == 4
        rows = _rows(repo / "r.jsonl")
        assert len(rows) == 10
        done = [r for r in rows if r["status"] != "skipped"]
        skipped = [r for r in rows if r["status"] == "skipped"]
        assert len(done) == 4 and len(skipped) == 6
        assert sum(r["cost"]["target"]["usd"] for r in done) == pytest.approx(4.0)
        for r in skipped:  # not run: no answer, no score that counts, the reason said
            assert r["attempts"] == 0 and r["candidate_answer"] == "" and not r["passed"]
            assert "budget" in r["skip_reason"] and "cost" not in r
        assert "Skipped: 6" in proc.stdout and "Budget: $4.00 of $3.50" in proc.stdout
        assert "6 run(s) not run: the budget was reached (exit code 4)" in proc.stderr
        # the summary's scores are over the runs that ran
        summary = agentv.read_results(repo / "r.jsonl").summary
        assert (summary.skipped, summary.graded, summary.mean) == (6, 4, 1.0)
        junit = agentv.write_junit(repo / "r.jsonl", repo / "j.xml").read_text()
        assert 'skipped="6"' in junit and junit.count("<skipped ") == 6
        xmlschema.XMLSchema(DATA / "junit.xsd").validate(junit)

        again = agentv_cli(repo, "eval", "evals/", "--resume", "r.jsonl", "--budget-usd", "100")
        assert again.returncode == 0, again.stderr
        assert "6 run(s) to do" in again.stdout
        assert len(target.requests) == 10  # each case asked exactly once in all
    latest = agentv.read_results(repo / "r.jsonl").summary
    assert (latest.ok, latest.skipped) == (10, 0)


def test_requests_in_flight_finish_and_nothing_more_is_sent(repo: Path) -> None:
    with FakeLLMServer(reply=_reply, delay_ms=100) as target, FakeLLMServer() as judge:
        write_targets(repo, *_priced(target, judge))
        _suite(repo, 30)
        run = agentv.run_eval("evals/", workers=3, budget_usd=5)
        sent = len(target.requests)
    ran = [r for r in run.results if r.status != "skipped"]
    # spend reaches $5 at the 5th answer; at most the 2 other requests in flight follow
    assert 5 <= sent <= 5 + 2
    assert len(ran) == sent and run.summary.skipped == 30 - sent
    assert run.budget_reached and run.spent_usd == pytest.approx(sent)
    assert not run.clean


def test_a_budget_reached_before_the_judge_keeps_the_answer_for_a_regrade(repo: Path) -> None:
    with FakeLLMServer(reply=_reply) as target, FakeLLMServer(reply=_reply) as judge:
        write_targets(repo, *_priced(target, judge))
        _suite(repo, 1, "[{type: llm_judge}]")
        run = agentv.run_eval("evals/", budget_usd=1, out="r.jsonl")
        assert (len(target.requests), len(judge.requests)) == (1, 0)
        (result,) = run.results
        assert result.status == "skipped" and result.candidate_answer == ANSWER
        assert result.cost == {"target": {"usd": 1.0}}
        regraded = agentv.regrade("r.jsonl")
        assert (len(target.requests), len(judge.requests)) == (1, 1)
    (graded,) = agentv.read_results(regraded.out).results
    assert (graded.status, graded.score, graded.candidate_answer) == ("failed", 0.5, ANSWER)
    assert graded.cost["target"] == {"usd": 0.0, "reused_usd": 1.0}


def test_the_budget_is_checked_as_an_option() -> None:
    with pytest.raises(
        agentv.ConfigError, match="budget_usd must be a number of US dollars above 0"
    ):
        agentv.prepare_run("evals/", budget_usd=0)


# --- the estimate ----------------------------------------------------------------------------


@pytest.mark.slow
def test_the_estimate_sends_nothing_and_counts_the_exact_prompts(repo: Path) -> None:
    with FakeLLMServer(reply=_reply) as target, FakeLLMServer(reply=_reply) as judge:
        write_targets(repo, *_priced(target, judge))
        _suite(repo, 3, "[{type: llm_judge}, {type: contains, value: three}]")
        found = agentv.estimate("evals/", answer_tokens=5, repeat=2)
        proc = agentv_cli(repo, "estimate", "evals/", "--answer-tokens", "5", "--format", "json")
        shown = agentv.render("evals/s.yaml", target="default")
        assert (len(target.requests), len(judge.requests)) == (0, 0)
    assert proc.returncode == 0, proc.stderr
    (candidate, judging) = found.lines
    assert (candidate.target, candidate.role, judging.target, judging.role) == (
        "default",
        "target",
        "judge",
        "judge",
    )
    # about 4 characters a token over the very messages a run sends, every repeat
    chars = [sum(len(m["content"]) for m in view["sent_messages"]) for view in shown]
    assert candidate.input_tokens == 2 * sum(c // 4 + 1 for c in chars)
    assert (candidate.requests, candidate.output_tokens) == (6, 30)
    assert candidate.usd == pytest.approx(30 * 0.2)  # $1 per 5 output tokens
    assert judging.requests == 6 and judging.usd == 0
    assert found.total_usd == pytest.approx(6.0) and found.unpriced == []
    data = json.loads(proc.stdout)
    assert data["requests"] == 6 and data["answer_tokens"] == 5
    assert data["total_usd"] == pytest.approx(3.0)


@pytest.mark.slow
def test_the_estimate_of_a_target_without_a_price_says_so(repo: Path) -> None:
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n"
        "  - {name: default, provider: openai, model: gpt-test, api_key: '${{ NOT_SET_KEY }}'}\n",
    )
    _suite(repo, 2)
    proc = agentv_cli(repo, "estimate", "evals/")  # the key is not set: nothing needs it
    assert proc.returncode == 0, proc.stderr
    assert "default" in proc.stdout and "?" in proc.stdout
    assert "without default: no price known" in proc.stdout
    assert "each answer 500 tokens" in proc.stdout


# --- regrading -----------------------------------------------------------------------------


@pytest.mark.slow
def test_regrade_asks_no_target_and_reports_a_changed_prompt(repo: Path) -> None:
    with FakeLLMServer(reply=_reply) as target, FakeLLMServer(reply=_reply) as judge:
        write_targets(repo, *_priced(target, judge))
        _suite(repo, 4)
        first = agentv_cli(repo, "eval", "evals/", "--out", "r.jsonl")
        assert first.returncode == 0, first.stderr
        assert (len(target.requests), len(judge.requests)) == (4, 0)
        before = {r["eval_id"]: r for r in _rows(repo / "r.jsonl")}
        # a changed evaluator for every case, and a changed prompt for c3
        text = (repo / "evals/s.yaml").read_text()
        text = text.replace("[{type: contains, value: three}]", "[{type: llm_judge}]")
        text = text.replace("case 3", "case three")
        write(repo, "evals/s.yaml", text)
        proc = agentv_cli(repo, "regrade", "r.jsonl", "--out", "new.jsonl")
        assert proc.returncode == 0, proc.stderr
        assert len(target.requests) == 4  # the target was asked nothing
        assert len(judge.requests) == 3
    assert "Regraded: 3 record(s)" in proc.stdout
    assert "their prompt changed" in proc.stdout and "  c3 [default]" in proc.stdout
    after = {r["eval_id"]: r for r in _rows(repo / "new.jsonl")}
    assert after["c3"] == before["c3"]  # copied as it was
    for i in range(3):
        old, new = before[f"c{i}"], after[f"c{i}"]
        assert (old["score"], new["score"]) == (1.0, 0.5)
        assert new["evaluator_results"][0]["type"] == "llm_judge"
        assert new["cached"] is True and new["attempts"] == 0
        for key in ("candidate_answer", "raw_request", "usage", "latency_ms"):
            assert new[key] == old[key], key
        assert new["cost"]["target"] == {"usd": 0.0, "reused_usd": old["cost"]["target"]["usd"]}
    # the new file resumed runs the changed case only
    with FakeLLMServer(reply=_reply) as target, FakeLLMServer(reply=_reply) as judge:
        write_targets(repo, *_priced(target, judge))
        resumed = agentv_cli(repo, "eval", "evals/", "--resume", "new.jsonl")
        assert resumed.returncode == 7, resumed.stderr
        assert len(target.requests) == 1


def test_regrade_through_the_api_with_the_cache(repo: Path) -> None:
    with FakeLLMServer(reply=_reply) as target, FakeLLMServer(reply=_reply) as judge:
        write_targets(repo, *_priced(target, judge))
        _suite(repo, 2, "[{type: llm_judge}]")
        agentv.run_eval("evals/", out="r.jsonl")
        assert len(judge.requests) == 2
        one = agentv.regrade("r.jsonl", out="one.jsonl", cache=True)
        two = agentv.regrade("r.jsonl", out="two.jsonl", cache=True)
        assert (len(target.requests), len(judge.requests)) == (2, 4)  # the second: cached
    assert (one.regraded, two.regraded, two.judge_cache_hits) == (2, 2, 2)
    assert one.summary.mean == two.summary.mean == 0.5
    assert one.prompt_changed == [] and one.not_regraded == []
    with pytest.raises(agentv.ConfigError, match="new results file"):
        agentv.regrade("r.jsonl", out="r.jsonl")


def test_regrade_reports_what_it_cannot_regrade(repo: Path) -> None:
    with FakeLLMServer(reply=_reply) as target, FakeLLMServer(reply=_reply) as judge:
        write_targets(repo, *_priced(target, judge))
        write(
            repo,
            "evals/s.yaml",
            """$schema: agentv-eval-v2
evalcases:
  - id: talk
    outcome: Counts.
    input_messages: [{role: system, content: You count.}]
    turns:
      - {content: count}
      - {content: again}
    execution: {evaluators: [{type: contains, value: three}]}
  - id: gone
    outcome: Counts.
    input_messages: [{role: user, content: count}]
    execution: {evaluators: [{type: contains, value: three}]}
""",
        )
        agentv.run_eval("evals/", out="r.jsonl")
        sent = len(target.requests)
        text = (repo / "evals/s.yaml").read_text()
        write(repo, "evals/s.yaml", text[: text.index("  - id: gone")])
        done = agentv.regrade("r.jsonl")
        assert len(target.requests) == sent
    why = {case: reason for case, _, reason in done.not_regraded}
    assert "live conversation" in why["talk"]
    assert "no longer in the eval files" in why["gone"]
    assert done.regraded == 0 and math.isclose(done.spent_usd, 0)
    assert len(agentv.read_results(done.out).results) == 2
