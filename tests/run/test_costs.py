"""Cost (docs/results.md, "Cost"): prices from a target's `price:` over genai-prices' bundled
table (read without any network), each answer priced from the tokens the API reported and
kept by who spent it, cached answers counted as reused, the figures in the summary and
`--summary-json`; the latency and cost evaluators. The targets are the LM APIs through
their official SDKs against the loopback fake server, whose token counts are its words."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

import agentv
from agentv.providers.base import Usage
from agentv.providers.mock import MockProvider, MockSettings
from agentv.providers.pricing import Pricer, TargetPrice, usage_cost
from support.cli import agentv_cli
from support.fakes import FakeLLMServer, RecordedRequest
from support.files import write
from support.providers import provider_fields
from support.targets import write_targets

JUDGE_REPLY = '{"score": 0.9, "hits": ["fine"], "misses": [], "reasoning": "ok"}'
ANSWER = "one two three four five"  # 5 tokens, as the fake counts them


def _reply(rec: RecordedRequest) -> str:
    body = rec.body or {}
    text = json.dumps(body.get("messages") or body.get("system") or body.get("contents"))
    return JUDGE_REPLY if "expert evaluator" in text else ANSWER


def _priced(target: FakeLLMServer, judge: FakeLLMServer, **fields: Any) -> list[dict[str, Any]]:
    """``default`` at ``target`` (``fields`` added), graded by ``judge``, each with its price."""
    return [
        {
            "name": "default",
            "provider": "openai",
            **provider_fields("openai", target),
            "judge_target": "judge",
            "price": {"input_per_mtok": 1_000_000, "output_per_mtok": 2_000_000},
            **fields,
        },
        {
            "name": "judge",
            "provider": "openai",
            **provider_fields("openai", judge),
            "price": {"input_per_mtok": 10, "output_per_mtok": 20},
        },
    ]


def _suite(repo: Path, n: int = 2, evaluators: str = "[{type: contains, value: three}]") -> None:
    cases = "".join(
        f"  - id: c{i}\n    outcome: Counts.\n"
        f"    input_messages: [{{role: user, content: 'count for me {i}'}}]\n"
        f"    execution: {{evaluators: {evaluators}}}\n"
        for i in range(n)
    )
    write(repo, "evals/s.yaml", "$schema: agentv-eval-v2\nevalcases:\n" + cases)


def _words(value: Any) -> int:
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, dict):
        return sum(_words(v) for v in value.values())
    if isinstance(value, list):
        return sum(_words(v) for v in value)
    return 0


# --- the price of a usage -----------------------------------------------------------------


def test_a_usage_is_priced_per_million_tokens_cached_input_at_its_own_price() -> None:
    usage = Usage(input_tokens=1_000, output_tokens=500, cached_input_tokens=400)
    # 600 fresh input at 2, 400 cached at 0.5, 500 output at 8 (per million)
    assert usage_cost(usage, 2.0, 8.0, 0.5) == pytest.approx((600 * 2 + 400 * 0.5 + 500 * 8) / 1e6)
    assert usage_cost(Usage(), 2.0, 8.0, 0.5) is None  # no tokens reported: no price


def test_a_target_price_wins_over_the_table_and_cached_input_defaults_to_input() -> None:
    provider = MockProvider("m", MockSettings())
    pricer = Pricer()
    assert pricer.rates(provider) is None  # a mock is in no price table
    assert not pricer.cost(provider, Usage(10, 10, 20)).priced
    provider.price = TargetPrice(input_per_mtok=3, output_per_mtok=15)
    rates = pricer.rates(provider)
    assert rates is not None
    assert (rates.input, rates.output, rates.cached_input, rates.source) == (
        3,
        15,
        3,
        "targets.yaml",
    )
    cost = pricer.cost(provider, Usage(1_000_000, 100_000, None, 500_000))
    assert cost.priced and cost.usd == pytest.approx(3 + 1.5)


def test_the_price_table_is_read_without_any_network(monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[Any] = []

    def refuse(self: socket.socket, address: Any) -> None:
        tried.append(address)
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    from agentv.providers.openai import OpenAIProvider, OpenAISettings

    provider = OpenAIProvider("t", OpenAISettings(model="gpt-4o-mini", api_key="k"))
    rates = Pricer().rates(provider)
    assert rates is not None and rates.source.startswith("genai-prices ")
    assert rates.output > rates.input > rates.cached_input > 0
    assert (
        Pricer().rates(
            OpenAIProvider("t", OpenAISettings(model="no-such-model-anywhere", api_key="k"))
        )
        is None
    )
    assert tried == []


def test_a_bad_price_is_reported_with_its_line(repo: Path) -> None:
    write(
        repo,
        "targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n"
        "  - name: t\n    provider: mock\n    price: {input_per_mtok: -1, output: 3}\n",
    )
    found = agentv.validate(["targets.yaml"])
    messages = [(d.line, d.message) for d in found.errors]
    assert messages and all(line == 5 for line, _ in messages)
    text = " ".join(m for _, m in messages)
    assert "input_per_mtok" in text and "output" in text


# --- cost in records, the summary and --summary-json -------------------------------------


def test_records_and_summary_hold_the_cost_by_party_and_reused_answers_apart(repo: Path) -> None:
    with (
        FakeLLMServer(reply=_reply) as target,
        FakeLLMServer(reply=_reply) as judge,
    ):
        write_targets(repo, *_priced(target, judge))
        _suite(repo, 2, "[{type: llm_judge}, {type: contains, value: three}]")
        first = agentv.run_eval("evals/", out="a.jsonl", cache=True)
        second = agentv.run_eval("evals/", out="b.jsonl", cache=True)
        sent = [(r.body, _words(r.body["messages"])) for r in target.requests]
        judged = [_words(r.body["messages"]) for r in judge.requests]
    assert len(sent) == 2 and len(judged) == 2  # the second run sent nothing
    by_id = {r.eval_id: r for r in first.results}
    expected_target = {
        body["messages"][-1]["content"].split()[-1]: (words * 1 + 5 * 2) for body, words in sent
    }
    judge_prices = sorted((w * 10 + 5 * 0 + len(JUDGE_REPLY.split()) * 20) / 1e6 for w in judged)
    for i in range(2):
        cost = by_id[f"c{i}"].cost
        assert cost is not None
        assert cost["target"] == {"usd": pytest.approx(expected_target[str(i)])}
        assert "reused_usd" not in cost["judge"]
    assert sorted(by_id[f"c{i}"].cost["judge"]["usd"] for i in range(2)) == pytest.approx(
        judge_prices
    )
    entry = by_id["c0"].evaluator_results[0]
    assert entry["cost_usd"] == pytest.approx(by_id["c0"].cost["judge"]["usd"])
    total = sum(expected_target.values()) + sum(judge_prices)
    assert first.spent_usd == pytest.approx(total)
    assert first.summary.cost is not None
    assert first.summary.cost.total.usd == pytest.approx(total)
    assert first.summary.cost.party("judge").usd == pytest.approx(sum(judge_prices))
    assert first.summary.targets[0].cost_per_run == pytest.approx(
        total_target := sum(expected_target.values()) / 2
    )
    # the second run reused every answer: nothing spent, the same price counted as reused
    assert second.spent_usd == 0 and second.reused_usd == pytest.approx(total)
    again = {r.eval_id: r for r in second.results}
    for i in range(2):
        cost = again[f"c{i}"].cost
        assert cost["target"]["usd"] == 0
        assert cost["target"]["reused_usd"] == pytest.approx(expected_target[str(i)])
    reused = second.summary.cost
    assert reused is not None and reused.total.usd == 0
    assert reused.total.reused_usd == pytest.approx(total)
    data = second.summary.to_dict()
    assert data["cost"]["usd"] == 0 and data["cost"]["reused_usd"] == pytest.approx(total)
    assert data["targets"][0]["cost"]["per_run_usd"] == pytest.approx(total_target)
    # compare: what each run spent, and the same price per run (the same answers)
    compared = agentv.compare("a.jsonl", "b.jsonl")
    assert compared.base.cost["usd"] == pytest.approx(total)
    assert compared.new.cost == {
        "usd": 0.0,
        "reused_usd": pytest.approx(total),
        "per_run_usd": pytest.approx(total_target),
    }
    assert compared.to_dict()["cost"]["base"]["per_run_usd"] == pytest.approx(total_target)


def test_cached_input_tokens_are_read_from_each_api_and_priced_lower(repo: Path) -> None:
    with FakeLLMServer(reply=ANSWER, cached_prompt_tokens=2) as server:
        entries = []
        for kind in ("openai", "anthropic", "gemini"):
            price = {"input_per_mtok": 1_000_000, "output_per_mtok": 0, "cached_input_per_mtok": 0}
            entries.append(
                {"name": kind, "provider": kind, **provider_fields(kind, server), "price": price}
            )
        write_targets(repo, *entries)
        _suite(repo, 1)
        run = agentv.run_eval("evals/", target=["openai", "anthropic", "gemini"])
        sent = {r.api: r.body for r in server.requests}
    found = {r.target: r for r in run.results}
    for kind, result in found.items():
        usage = result.usage
        assert usage is not None and usage["cached_input_tokens"] == 2, kind
        # the cached tokens are within the input tokens, free at this price
        assert result.cost["target"]["usd"] == pytest.approx(usage["input_tokens"] - 2), kind
    # Anthropic counts cache reads apart from its input tokens: agentv adds them in
    words = _words(sent["anthropic"]["messages"]) + _words(sent["anthropic"]["system"])
    assert found["anthropic"].usage["input_tokens"] == words + 2
    assert found["openai"].usage["input_tokens"] == _words(sent["openai"]["messages"])


def test_a_target_without_a_price_is_unpriced_never_free(repo: Path) -> None:
    with FakeLLMServer(reply=ANSWER) as server:
        fields = provider_fields("openai", server)  # model gpt-test: in no price table
        write(
            repo,
            ".agentv/targets.yaml",
            "$schema: agentv-targets-v2.2\ntargets:\n"
            f"  - {json.dumps({'name': 'default', 'provider': 'openai', **fields})}\n",
        )
        _suite(repo, 2, "[{type: contains, value: three}, {type: cost, max_usd: 1}]")
        run = agentv.run_eval("evals/")
    for result in run.results:
        assert result.cost == {"target": {"unpriced": True}}
        assert result.status == "error"  # the cost evaluator cannot say: never a pass
        assert "cost is unknown" in (result.error or "")
    assert run.summary.cost is not None and run.summary.cost.unpriced_runs == 2
    assert run.summary.cost.total.usd == 0
    assert len(run.unpriced) == 1 and "price:" in run.unpriced[0]


# --- latency and cost evaluators ----------------------------------------------------------


def test_latency_and_cost_evaluators_hold_the_answer_to_its_limits(repo: Path) -> None:
    with FakeLLMServer(reply=ANSWER, delay_ms=150) as target, FakeLLMServer() as judge:
        write_targets(repo, *_priced(target, judge))
        # each request costs (prompt words) x $1 + 5 x $2: over $10 and far under $100
        write(
            repo,
            "evals/s.yaml",
            """$schema: agentv-eval-v2
evalcases:
  - id: cheap-enough
    outcome: Counts.
    input_messages: [{role: user, content: count}]
    execution:
      evaluators: [{type: cost, max_usd: 100}, {type: latency, max_ms: 60000}]
  - id: too-dear-too-slow
    outcome: Counts.
    input_messages: [{role: user, content: count}]
    execution:
      evaluators: [{type: cost, max_usd: 10}, {type: latency, max_ms: 100}]
""",
        )
        run = agentv.run_eval("evals/")
    found = {r.eval_id: r for r in run.results}
    assert found["cheap-enough"].score == 1.0 and found["cheap-enough"].status == "ok"
    low = found["too-dear-too-slow"]
    assert low.score == 0.0 and low.status == "failed"
    price = low.cost["target"]["usd"]
    assert 10 < price < 100
    assert any(m.startswith(f"cost ${price:.6f}, over $10") for m in low.misses)
    assert any("over 100 ms" in m for m in low.misses), low.misses
    assert low.latency_ms >= 150


# --- through the command line --------------------------------------------------------------


@pytest.mark.slow
def test_the_summary_prints_the_cost_and_summary_json_holds_it(repo: Path) -> None:
    with FakeLLMServer(reply=_reply) as target, FakeLLMServer(reply=_reply) as judge:
        write_targets(repo, *_priced(target, judge))
        _suite(repo, 2, "[{type: llm_judge}]")
        proc = agentv_cli(repo, "eval", "evals/", "--out", "r.jsonl", "--summary-json", "s.json")
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in (repo / "r.jsonl").read_text().splitlines()]
    spent = sum(r["cost"]["target"]["usd"] + r["cost"]["judge"]["usd"] for r in rows)
    data = json.loads((repo / "s.json").read_text())
    assert data["cost"]["usd"] == pytest.approx(spent)
    assert set(data["cost"]["by_party"]) == {"target", "judge"}
    assert f"Cost: ${spent:,.2f} spent (target $" in proc.stdout
