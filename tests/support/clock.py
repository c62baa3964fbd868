"""A clock the test moves by hand, for the code that takes one (``clock=``)."""

from __future__ import annotations


class Clock:
    """Seconds that move only when a test sets ``now`` (it starts at 100.0)."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now
