"""A judge asked several times: every sample recorded, the mean as the score, the spread and
the votes, uncertain verdicts where the samples disagree, and adaptive samples that stop as
their rule says."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from pydantic import ValidationError

from agentv.cases import EvaluatorConfig
from agentv.evaluators.base import EvaluationContext
from agentv.evaluators.grading import grade_case
from agentv.evaluators.llm_judge import LlmJudgeSpec
from agentv.evaluators.samples import SampleRule, sample_rule
from agentv.prompts.builder import PromptSettings, build_prompt
from agentv.results.outcome import grade_status, grading_fields, uncertain_fields
from support.evaluator_kit import FakeJudge, contains, make_case


def _verdict(score: float, word: str = "x") -> str:
    return json.dumps({"score": score, "hits": [f"hit {word}"], "misses": [], "reasoning": word})


def _judge(name: str = "judge", **settings: object) -> EvaluatorConfig:
    return EvaluatorConfig(name, LlmJudgeSpec.model_validate({"type": "llm_judge", **settings}))


def _ctx(tmp_path: Path, judge: FakeJudge, **extra: object) -> EvaluationContext:
    case = make_case(tmp_path)
    return EvaluationContext(
        case=case,
        prompt=build_prompt(case, PromptSettings("lm")),
        candidate="Paris.",
        target_name="t",
        judge=judge,
        **extra,  # type: ignore[arg-type]
    )


async def test_every_sample_is_asked_apart_and_recorded(tmp_path: Path) -> None:
    fake = FakeJudge(_verdict(0.9, "a"), _verdict(0.6, "b"), _verdict(0.75, "c"))
    ctx = _ctx(tmp_path, fake)
    grade = await grade_case(ctx, (_judge(samples=3),))
    (score,) = grade.scores
    # three requests, the same question, each its own sample (and so its own cache entry)
    assert [r.sample for r in fake.requests] == [0, 1, 2]
    assert len({r.question for r in fake.requests}) == 1
    entry = grading_fields(grade, 0.8)["evaluator_results"][0]
    assert [s["score"] for s in entry["samples"]] == [0.9, 0.6, 0.75]
    assert [s["reasoning"] for s in entry["samples"]] == ["a", "b", "c"]
    assert [s["hits"] for s in entry["samples"]] == [["hit a"], ["hit b"], ["hit c"]]
    assert entry["samples"][0]["usage"] == {
        "input_tokens": 10,
        "output_tokens": 5,
        "total_tokens": 15,
    }
    assert entry["score"] == pytest.approx(0.75)  # the mean
    # the sample closest to the mean speaks for the entry
    assert entry["reasoning"] == "c"
    assert entry["hits"] == ["hit c"]
    assert entry["spread"] == {"min": 0.6, "max": 0.9, "std_dev": pytest.approx(0.15)}
    assert entry["votes"] == {"pass": 1, "fail": 2, "threshold": 0.8}
    assert entry["uncertain"] is True
    assert entry["usage"] == {"input_tokens": 30, "output_tokens": 15, "total_tokens": 45}
    assert score.latency_ms == pytest.approx(36.0)


@pytest.mark.parametrize(
    ("scores", "status"),
    [
        ((0.9, 0.85, 1.0), "ok"),  # every sample passed
        ((0.1, 0.5, 0.79), "failed"),  # none did
        ((0.9, 0.79, 0.95), "uncertain"),  # they disagree: the mean (0.88) decides nothing
        ((0.8, 0.8, 0.8), "ok"),  # at the threshold is a pass
    ],
)
async def test_uncertain_exactly_where_the_samples_disagree(
    tmp_path: Path, scores: tuple[float, ...], status: str
) -> None:
    fake = FakeJudge(*(_verdict(s) for s in scores))
    grade = await grade_case(_ctx(tmp_path, fake), (_judge(samples=len(scores)),))
    assert grade_status(grade, 0.8) == status
    names, lines = uncertain_fields(grade, 0.8)
    if status == "uncertain":
        assert names == ["judge"]
        low, high = min(scores), max(scores)
        passed = sum(s >= 0.8 for s in scores)
        assert lines == [
            f"judge 'judge' is uncertain: {passed} of its 3 samples passed at 0.80 "
            f"(scores {low:.2f} to {high:.2f})"
        ]
    else:
        assert (names, lines) == ([], [])


@pytest.mark.parametrize(("choice", "status"), [("fail", "failed"), ("pass", "ok")])
async def test_on_uncertain_decides_the_status(tmp_path: Path, choice: str, status: str) -> None:
    fake = FakeJudge(_verdict(0.9), _verdict(0.5))
    grade = await grade_case(_ctx(tmp_path, fake), (_judge(samples=2, on_uncertain=choice),))
    assert grade_status(grade, 0.8) == status
    entry = grading_fields(grade, 0.8)["evaluator_results"][0]
    # the verdict still says it was noisy
    assert entry["uncertain"] is True and entry["on_uncertain"] == choice


async def test_the_run_option_is_the_default_of_every_judge(tmp_path: Path) -> None:
    fake = FakeJudge(_verdict(0.9), _verdict(0.5), _verdict(0.9), _verdict(0.95))
    ctx = _ctx(tmp_path, fake, judge_samples=SampleRule.fixed(2), on_uncertain="fail")
    # one judge takes the run's, one says its own
    grade = await grade_case(ctx, (_judge("a"), _judge("b", samples=2, on_uncertain="pass")))
    a, b = grade.scores
    assert (len(a.samples or ()), a.on_uncertain, a.uncertain) == (2, "fail", True)
    assert (len(b.samples or ()), b.uncertain) == (2, False)
    assert grade_status(grade, 0.8) == "failed"


async def test_a_verdict_that_does_not_hang_on_the_judge_is_not_uncertain(
    tmp_path: Path,
) -> None:
    # a required check fails the case whatever the judge says
    fake = FakeJudge(_verdict(0.9), _verdict(0.5))
    required = EvaluatorConfig("must", contains("Tokyo").spec.model_copy(update={"required": True}))
    grade = await grade_case(_ctx(tmp_path, fake), (_judge(samples=2), required))
    assert grade.scores[0].uncertain  # the judge itself disagreed with itself ...
    assert grade_status(grade, 0.8) == "failed"  # ... but the case failed anyway
    assert uncertain_fields(grade, 0.8) == ([], [])


async def test_the_default_judge_samples_too(tmp_path: Path) -> None:
    fake = FakeJudge(_verdict(0.9), _verdict(0.5))
    grade = await grade_case(_ctx(tmp_path, fake, judge_samples=SampleRule.fixed(2)))
    assert grade_status(grade, 0.8) == "uncertain"
    raw = grading_fields(grade, 0.8)["evaluator_raw_request"]
    assert [s["score"] for s in raw["samples"]] == [0.9, 0.5]
    assert raw["uncertain"] is True and raw["votes"] == {"pass": 1, "fail": 1, "threshold": 0.8}


async def test_one_sample_is_the_judge_as_before(tmp_path: Path) -> None:
    fake = FakeJudge(_verdict(0.7))
    grade = await grade_case(_ctx(tmp_path, fake), (_judge(samples=1),))
    entry = grading_fields(grade, 0.8)["evaluator_results"][0]
    assert "samples" not in entry and "uncertain" not in entry and "votes" not in entry
    assert entry["evaluator_raw_request"]["reply"] == _verdict(0.7)


async def test_a_sample_without_a_verdict_makes_the_judge_fail(tmp_path: Path) -> None:
    fake = FakeJudge(_verdict(0.9), "no verdict here", _verdict(0.9))
    grade = await grade_case(_ctx(tmp_path, fake), (_judge(samples=3),))
    (score,) = grade.scores
    assert len(fake.requests) == 2  # not asked again after a sample failed
    assert score.error == (
        "sample 2 of the judge failed: judge reply has no JSON verdict with a numeric "
        "score: 'no verdict here'"
    )
    assert grade_status(grade, 0.8) == "error"
    entry = grading_fields(grade, 0.8)["evaluator_results"][0]
    assert [s.get("error") is not None for s in entry["samples"]] == [False, True]
    assert entry["samples"][1]["reply"] == "no verdict here"


def _stops_as_the_rule_says(scores: list[float], rule: SampleRule, threshold: float) -> bool:
    """The adaptive rule, written out: ask at least ``min``; after that, another only while
    the mean so far is within ``margin`` of the threshold, never more than ``max``."""
    for k in range(1, len(scores) + 1):
        mean = sum(scores[:k]) / k
        unsettled = k < rule.min or abs(mean - threshold) <= rule.margin + 1e-12
        last = k == len(scores)
        if last:
            return k == rule.max or not unsettled
        if not unsettled or k >= rule.max:
            return False  # it should have stopped here
    return False


@pytest.mark.parametrize(
    "script",
    [
        [1.0],  # far above: settled at once
        [0.2],  # far below
        [0.85, 1.0],  # near, then the mean 0.925 is out of the margin
        [0.75, 0.85, 0.8, 0.79, 0.81],  # never settles: stops at max
        [0.85, 0.45],  # mean 0.65: settled below
    ],
)
async def test_adaptive_samples_stop_as_the_rule_says(tmp_path: Path, script: list[float]) -> None:
    rule = {"min": 1, "max": 5, "margin": 0.1}
    fake = FakeJudge(*(_verdict(s) for s in script), *(_verdict(0.5) for _ in range(5)))
    grade = await grade_case(_ctx(tmp_path, fake), (_judge(samples=rule),))
    (score,) = grade.scores
    # exactly the script: the extra replies were never asked for
    assert [r.sample for r in fake.requests] == list(range(len(script)))
    recorded = [s["score"] for s in score.samples or ()]
    assert recorded == script
    assert _stops_as_the_rule_says(recorded, SampleRule(**rule), 0.8)
    assert score.score == pytest.approx(math.fsum(script) / len(script))


async def test_adaptive_samples_use_the_judges_own_threshold(tmp_path: Path) -> None:
    fake = FakeJudge(_verdict(0.55), _verdict(0.7))
    grade = await grade_case(
        _ctx(tmp_path, fake), (_judge(samples={"max": 5, "margin": 0.1}, threshold=0.5),)
    )
    # 0.55 is within 0.1 of 0.5: asked again; the mean 0.625 is not: stop
    assert len(fake.requests) == 2
    assert grade.scores[0].spread is not None
    assert grade.scores[0].spread.threshold == 0.5


@pytest.mark.parametrize(
    ("written", "problem"),
    [
        (0, "samples is a number from 1 to 20"),
        (21, "samples is a number from 1 to 20"),
        (True, "samples is a number from 1 to 20"),
        ({"min": 3, "max": 2}, r"min \(3\) is more than max \(2\)"),
        ({"max": 3, "margins": 0.1}, "Extra inputs are not permitted"),
    ],
)
def test_bad_samples_are_refused(written: object, problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        LlmJudgeSpec.model_validate({"type": "llm_judge", "samples": written})


def test_samples_as_written() -> None:
    assert sample_rule(3) == SampleRule(min=3, max=3)
    assert sample_rule({"max": 4}) == SampleRule(min=1, max=4, margin=0.1)
    assert sample_rule(None) is None
    with pytest.raises(ValueError):
        sample_rule(True)  # type: ignore[arg-type]
