"""When a case's verdict is settled by its runs (--repeat auto): clear runs that agree, or
votes a fair coin would rarely give (the exact sign test), against hand computations."""

from __future__ import annotations

import pytest

from agentv.results.settled import AutoRule, Outcome, unsettled_first, verdict

RULE = AutoRule(max=10, confidence=0.95, margin=0.1)


def _runs(*scores: float, threshold: float = 0.8) -> list[Outcome]:
    """Runs scored ``scores``, each ok at or above the threshold, failed below."""
    return [Outcome("ok" if s >= threshold else "failed", s, threshold) for s in scores]


def test_one_clear_run_settles() -> None:
    found = verdict(_runs(1.0), RULE)
    assert (found.state, found.clear, found.passed, found.failed) == ("settled", True, 1, 0)
    assert verdict(_runs(0.7), RULE).state == "settled"  # 0.7 is 0.1 below 0.8: clear
    assert verdict(_runs(0.9), RULE).state == "settled"  # exactly at the margin


def test_a_run_near_the_threshold_wants_more() -> None:
    found = verdict(_runs(0.85), RULE)
    assert (found.state, found.clear, found.p_value) == ("unsettled", False, 1.0)
    assert found.reason() == (
        "unsettled after 1 run(s): 1 passed, 0 failed (p = 1); not every run clear of the threshold"
    )


def test_clear_runs_that_disagree_are_a_coin_until_the_votes_decide() -> None:
    assert verdict(_runs(1.0, 0.0), RULE).state == "unsettled"
    # 5 passes of 5, one of them near the threshold: p = 2 / 2**5 = 0.0625 > 0.05
    near = _runs(0.85, 1.0, 1.0, 1.0, 1.0)
    assert verdict(near, RULE).p_value == pytest.approx(0.0625)
    assert verdict(near, RULE).state == "unsettled"
    # a sixth: p = 2 / 2**6 = 0.03125 <= 0.05, settled by the votes
    found = verdict([*near, *_runs(1.0)], RULE)
    assert (found.state, found.p_value) == ("settled", pytest.approx(0.03125))
    assert found.why() == "settled (the votes decide): 6 passed, 0 failed (p = 0.0312)"
    # 8 passes and 1 failure: p = 2 * (1 + 9) / 2**9 = 0.0390625
    found = verdict(_runs(*[1.0] * 8, 0.0), RULE)
    assert (found.state, found.p_value) == ("settled", pytest.approx(20 / 512))


def test_at_the_maximum_it_stops_unsettled() -> None:
    found = verdict(_runs(*[1.0, 0.0] * 5), RULE)
    assert (found.runs, found.state, found.p_value) == (10, "max", 1.0)
    assert not found.wants_more
    assert found.why() == "unsettled at the maximum: 5 passed, 5 failed (p = 1)"


def test_uncertain_runs_do_not_vote_and_errors_stop() -> None:
    runs = [Outcome("uncertain", 0.8, 0.8), *_runs(1.0)]
    found = verdict(runs, RULE)
    assert (found.passed, found.failed, found.uncertain, found.state) == (1, 0, 1, "unsettled")
    stopped = verdict([*_runs(0.85), Outcome("error", 0.0, 0.8)], RULE)
    assert stopped.state == "no_verdict" and not stopped.wants_more
    # a skipped run (the budget) is no run at all
    assert verdict([Outcome("skipped", 0.0, 0.8), *_runs(1.0)], RULE).runs == 1


def test_the_most_unsettled_come_first() -> None:
    cases = {
        "split": verdict(_runs(1.0, 0.0), RULE),  # p = 1, mean 0.5: 0.3 from the line
        "near": verdict(_runs(0.85), RULE),  # p = 1, 0.05 from the line, one run
        "leaning": verdict(_runs(0.85, 0.85, 0.85), RULE),  # p = 0.25
        "near-twice": verdict(_runs(0.85, 0.75), RULE),  # p = 1, 0.0 from the line
    }
    ordered = [name for name, _ in sorted(cases.items(), key=unsettled_first)]
    assert ordered == ["near-twice", "near", "split", "leaning"]


def test_the_rule_checks_its_numbers() -> None:
    with pytest.raises(ValueError, match="max_repeat is from 1 to 1000"):
        AutoRule(max=0)
    with pytest.raises(ValueError, match="the confidence is between 0 and 1"):
        AutoRule(confidence=1.0)
    assert AutoRule.from_record({"max": 5, "confidence": 0.9, "margin": 0.2}) == AutoRule(
        5, 0.9, 0.2
    )
    assert AutoRule.from_record({"max": "many"}) is None
