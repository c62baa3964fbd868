"""US dollars in JSON are rounded to ``USD_DIGITS`` (10) places: a sum of prices prints as
people write it (0.01007), never with a float's noise (0.010069999999999999)."""

from __future__ import annotations

import json

from agentv.results.record import USD_DIGITS, usd
from agentv.results.summary import Spend
from agentv.run.estimate import Line

NOISY = 0.00257 + 0.0075  # 0.010069999999999999 as a float


def test_dollars_are_rounded_to_ten_places() -> None:
    assert USD_DIGITS == 10
    assert json.dumps(NOISY) == "0.010069999999999999"
    assert json.dumps(usd(NOISY)) == "0.01007"
    assert usd(None) is None
    assert usd(1.23456789012345) == 1.2345678901


def test_the_estimate_and_the_summary_write_rounded_dollars() -> None:
    line = Line("default", "target", "gpt-4o-mini", requests=2, usd=NOISY)
    assert json.dumps(line.to_dict()["usd"]) == "0.01007"
    assert Spend(usd=NOISY, reused_usd=NOISY).to_dict() == {"usd": 0.01007, "reused_usd": 0.01007}
