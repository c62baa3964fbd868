"""A seeded noisy judge behind a real API (the loopback fake, through the OpenAI SDK): its
scores drawn from known distributions, every sample it sent recorded as it sent it,
uncertain verdicts exactly where the samples disagree, adaptive samples that stop as their
rule says, every sample its own cache entry, and the noise split between target and judge."""

from __future__ import annotations

import hashlib
import json
import math
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentv
from support.fakes.llm_server import FakeLLMServer, RecordedRequest
from support.files import write

THRESHOLD = 0.8
#: each case's answer names its distribution of judge scores
DISTRIBUTIONS = {
    "steady": (0.95, 1.0),  # always passes
    "poor": (0.1, 0.3),  # always fails
    "coin": (0.7, 0.9),  # passes half the time
    "edge": (0.75, 0.85, 0.95),  # passes two thirds of the time
}
CASES = ["steady", "poor", "coin", "edge", "coin-2", "edge-2"]


class NoisyJudge:
    """Answers judge requests with a score drawn from the answer's distribution, by a
    generator seeded with the request's prompt: the n-th request with a given prompt
    always gets the same score. Remembers what it sent per prompt, in order."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.sent: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def __call__(self, rec: RecordedRequest) -> str:
        messages = (rec.body or {}).get("messages", [])
        prompt = messages[-1]["content"]
        answer = prompt.rsplit("[[ ## candidate_answer ## ]]\n", 1)[1]
        kind = answer.split(":", 1)[0].split("-")[0]
        with self._lock:
            sent = self.sent.setdefault(prompt, [])
            digest = hashlib.sha256(f"{self.seed}\0{prompt}\0{len(sent)}".encode()).digest()
            score = random.Random(digest).choice(DISTRIBUTIONS[kind])
            sent.append(score)
        return json.dumps({"score": score, "hits": [], "misses": [], "reasoning": kind})


@pytest.fixture
def judge() -> Iterator[tuple[FakeLLMServer, NoisyJudge]]:
    noisy = NoisyJudge(seed=2024)
    with FakeLLMServer(reply=noisy) as server:
        yield server, noisy


def _project(root: Path, url: str, samples: str | None, *, cases: list[str] = CASES) -> None:
    write(root, ".git/HEAD", "ref: refs/heads/main\n")
    write(
        root,
        ".agentv/targets.yaml",
        f"""$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: mock
    judge_target: judge
  - name: judge
    provider: openai
    base_url: {url}/v1
    api_key: sk-test-0123456789
    model: judge-model
    max_retries: 0
""",
    )
    entries = []
    for case in cases:
        entries.append(
            f"""  - id: {case}
    outcome: Grade it.
    input_messages: [{{role: user, content: "Say {case}."}}]
    execution:
      target: {case}
      evaluators:
        - {{name: judge, type: llm_judge{f", samples: {samples}" if samples else ""}}}
"""
        )
    write(root, "evals/noisy.yaml", "$schema: agentv-eval-v2\nevalcases:\n" + "".join(entries))
    # one mock target per case, answering its own name (the judge's distribution)
    targets = (root / ".agentv/targets.yaml").read_text()
    for case in cases:
        targets += f"""  - name: {case}
    provider: mock
    response: "{case}: the answer."
    judge_target: judge
"""
    (root / ".agentv/targets.yaml").write_text(targets)


def _judge_entry(result: agentv.EvalResult) -> dict[str, Any]:
    (entry,) = result.evaluator_results or []
    return entry


def _sent_for(noisy: NoisyJudge, result: agentv.EvalResult) -> list[float]:
    prompt = _judge_entry(result)["evaluator_raw_request"]["prompt"]
    return noisy.sent[prompt]


def test_samples_are_recorded_as_sent_and_uncertain_where_they_disagree(
    tmp_path: Path, judge: tuple[FakeLLMServer, NoisyJudge]
) -> None:
    server, noisy = judge
    _project(tmp_path, server.url, "5")
    run = agentv.run_eval("evals", cwd=tmp_path, out=tmp_path / "r.jsonl")
    assert len(run.results) == len(CASES)
    assert len(server.requests) == 5 * len(CASES)  # every sample a request of its own
    uncertain = 0
    for result in run.results:
        sent = _sent_for(noisy, result)
        entry = _judge_entry(result)
        assert [s["score"] for s in entry["samples"]] == sent  # what the fake sent, in order
        assert entry["score"] == pytest.approx(math.fsum(sent) / len(sent))
        passed = sum(s >= THRESHOLD for s in sent)
        assert entry["votes"] == {"pass": passed, "fail": 5 - passed, "threshold": THRESHOLD}
        disagree = 0 < passed < 5
        assert entry.get("uncertain", False) is disagree
        expected = "uncertain" if disagree else ("ok" if passed else "failed")
        assert result.status == expected, result.eval_id
        assert (result.uncertain == ["judge"]) is disagree
        uncertain += disagree
    # the steady and the poor cases never disagree; with these seeds the others do
    by_id = {r.eval_id: r.status for r in run.results}
    assert (by_id["steady"], by_id["poor"]) == ("ok", "failed")
    assert uncertain == 4
    assert run.summary.uncertain == 4 and run.summary.graded == 6
    assert run.summary.pass_rate == pytest.approx(1 / 6)  # an uncertain run did not pass
    (evaluator,) = run.summary.evaluators
    assert (evaluator.sampled, evaluator.uncertain) == (6, 4)
    # the summary read back from the file says the same
    assert agentv.read_results(tmp_path / "r.jsonl").summary == run.summary


def test_adaptive_samples_stop_as_the_rule_says(
    tmp_path: Path, judge: tuple[FakeLLMServer, NoisyJudge]
) -> None:
    server, noisy = judge
    _project(tmp_path, server.url, "{min: 1, max: 6, margin: 0.1}")
    run = agentv.run_eval("evals", cwd=tmp_path)
    counts = {}
    for result in run.results:
        sent = _sent_for(noisy, result)
        assert [s["score"] for s in _judge_entry(result)["samples"]] == sent
        # the rule, written out: after each sample, another only while the mean so far is
        # within 0.1 of the threshold, six at most
        for k in range(1, len(sent) + 1):
            unsettled = abs(math.fsum(sent[:k]) / k - THRESHOLD) <= 0.1 + 1e-12
            if k < len(sent):
                assert unsettled, (result.eval_id, sent)
            else:
                assert k == 6 or not unsettled, (result.eval_id, sent)
        counts[result.eval_id] = len(sent)
    # far from the threshold: settled at once; the coin flips needed more
    assert counts["steady"] == 1 and counts["poor"] == 1
    assert counts["coin"] > 1 and counts["coin-2"] > 1
    assert len(server.requests) == sum(counts.values())


def test_every_sample_is_its_own_cache_entry(
    tmp_path: Path, judge: tuple[FakeLLMServer, NoisyJudge]
) -> None:
    server, _ = judge
    _project(tmp_path, server.url, "3", cases=["coin", "edge"])
    first = agentv.run_eval("evals", cwd=tmp_path, cache=True)
    asked = len(server.requests)
    assert asked == 6
    again = agentv.run_eval("evals", cwd=tmp_path, cache=True)
    assert len(server.requests) == asked  # nothing asked again
    assert again.judge_cache_hits == 6

    def samples(run: agentv.EvalRun) -> dict[str | None, list[float]]:
        return {r.eval_id: [s["score"] for s in _judge_entry(r)["samples"]] for r in run.results}

    assert samples(again) == samples(first)
    assert {r.eval_id: r.status for r in again.results} == {
        r.eval_id: r.status for r in first.results
    }


def test_repeats_split_the_noise_between_target_and_judge(
    tmp_path: Path, judge: tuple[FakeLLMServer, NoisyJudge]
) -> None:
    server, _ = judge
    _project(tmp_path, server.url, "4", cases=["steady", "coin", "edge"])
    said: dict[str, int] = {}
    lock = threading.Lock()

    def candidate(messages: list[dict[str, Any]]) -> str:
        # one target for every case, answering by its question; noisy itself on `steady`:
        # every other time it answers poorly
        case = messages[-1]["content"].removeprefix("Say ").removesuffix(".")
        with lock:
            said[case] = said.get(case, 0) + 1
            turn = said[case]
        if case == "steady" and turn % 2 == 0:
            return f"poor: answer {turn}."
        return f"{case}: answer {turn}."

    run = agentv.run_eval(
        "evals",
        cwd=tmp_path,
        target=agentv.PythonTarget(candidate, name="app", judge_target="judge"),
        repeat=4,
        out=tmp_path / "r.jsonl",
    )
    summary = run.summary
    # the figures by hand from the records: per case, the judge variance of each run's
    # score is its samples' variance over their number (one judge: its weight is all); the
    # target's is the variance of the runs' scores less that
    by_case: dict[str, list[agentv.EvalResult]] = {}
    for r in run.results:
        by_case.setdefault(r.eval_id or "", []).append(r)
    expected = {}
    for case, results in by_case.items():
        judge_vars = []
        for r in results:
            scores = [s["score"] for s in _judge_entry(r)["samples"]]
            m = sum(scores) / len(scores)
            judge_vars.append(sum((s - m) ** 2 for s in scores) / (len(scores) - 1) / len(scores))
        runs = [r.score for r in results]
        mean = sum(runs) / len(runs)
        observed = sum((s - mean) ** 2 for s in runs) / (len(runs) - 1)
        judge_part = sum(judge_vars) / len(judge_vars)
        expected[case] = (judge_part, max(0.0, observed - judge_part))
    (target,) = summary.targets
    noise = target.noise
    assert noise is not None and noise.cases == 3
    assert noise.judge_variance == pytest.approx(sum(j for j, _ in expected.values()) / 3)
    assert noise.target_variance == pytest.approx(sum(t for _, t in expected.values()) / 3)
    assert set(noise.judge_decided) == {c for c, (j, t) in expected.items() if j > t}
    # the target's own noise dominates where its answers differ; with these seeds the
    # judge's dominates on one of the flips
    assert "steady" not in noise.judge_decided
    assert noise.judge_decided == ("edge",)
    data = summary.to_dict()
    assert data["targets"][0]["noise"]["judge_decided"] == list(noise.judge_decided)
    cases = {c["eval_id"]: c["noise"] for c in data["cases"]}
    for case, (j, t) in expected.items():
        assert cases[case]["judge_variance"] == pytest.approx(j)
        assert cases[case]["target_variance"] == pytest.approx(t)


@pytest.mark.slow
def test_the_command_line_says_it_and_exits_6(
    tmp_path: Path, judge: tuple[FakeLLMServer, NoisyJudge]
) -> None:
    from support.cli import agentv_cli

    server, _ = judge
    _project(tmp_path, server.url, None, cases=["steady", "coin", "edge"])
    done = agentv_cli(tmp_path, "eval", "evals", "--judge-samples", "5", "--out", "r.jsonl")
    assert done.returncode == 6, done.stderr
    assert (
        "run(s) uncertain: a judge's samples disagreed about pass or fail (exit code 6); "
        "--on-uncertain fail or pass decides them"
    ) in done.stderr
    assert "Uncertain verdicts: 2 (a judge's samples disagreed about pass or fail):" in done.stdout
    assert "  coin: judge\n" in done.stdout and "  edge: judge\n" in done.stdout
    assert "Judge samples disagreed: judge 2 of 3 runs" in done.stdout
    # the run's choice decides them: passes, said as such
    done = agentv_cli(
        tmp_path, "eval", "evals", "--judge-samples", "5", "--on-uncertain", "pass", "--cache"
    )
    assert done.returncode == 0, done.stderr
    assert "Uncertain verdicts: 2 (a judge's samples disagreed about pass or fail; " in done.stdout
    assert "on_uncertain: 2 made ok):" in done.stdout
    assert "  coin: judge -> ok\n" in done.stdout
    done = agentv_cli(tmp_path, "eval", "evals", "--judge-samples", "1..x")
    assert done.returncode == 2
    said = " ".join(done.stderr.replace("│", " ").split())  # the panel's lines joined
    assert "a number of samples (3) or MIN..MAX (1..5), not '1..x'" in said


def test_the_estimate_and_the_budget_count_every_sample(tmp_path: Path) -> None:
    verdict = json.dumps({"score": 0.9, "hits": [], "misses": [], "reasoning": "fine"})
    with FakeLLMServer(reply=verdict) as server:
        _project(tmp_path, server.url, None, cases=["steady", "coin"])
        plain = agentv.estimate("evals", cwd=tmp_path)
        sampled = agentv.estimate("evals", cwd=tmp_path, judge_samples=3)
        adaptive = agentv.estimate("evals", cwd=tmp_path, judge_samples={"max": 4})

        def judged(found: agentv.Estimate) -> int:
            return sum(line.requests for line in found.lines if line.role == "judge")

        # two cases, one judge each: once, three times, at most four times
        assert (judged(plain), judged(sampled), judged(adaptive)) == (2, 6, 8)
        assert len(server.requests) == 0  # nothing sent
        # every judge answer costs $1 (its tokens are its words, at $1 a word); a budget of
        # $2.50 lets three samples out, the fourth is not sent and the case is skipped
        words = len(verdict.split())
        targets = (
            (tmp_path / ".agentv/targets.yaml")
            .read_text()
            .replace(
                "    model: judge-model\n",
                "    model: judge-model\n"
                f"    price: {{input_per_mtok: 0, output_per_mtok: {1_000_000 / words}}}\n",
            )
        )
        (tmp_path / ".agentv/targets.yaml").write_text(targets)
        run = agentv.run_eval(
            "evals", cwd=tmp_path, eval_id="coin", judge_samples=5, budget_usd=2.5
        )
        assert len(server.requests) == 3
    (result,) = run.results
    assert result.status == "skipped" and run.budget_reached
    assert run.spent_usd == pytest.approx(3.0)
