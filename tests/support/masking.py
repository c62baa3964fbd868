"""A key across a cut: text that agentv shortens with a key planted where it is cut, to show
that masking comes before shortening (no piece of the key survives on either side)."""

from __future__ import annotations

#: a key as a test plants it in text that agentv shortens
KEY = "sk-SECRETKEY-9F8E7D6C5B4A3210ZYXW"
#: what fills that text: it shares no character with KEY
FILL = "."
#: each offset at which a key crosses a cut (1 .. len - 1 characters before it)
OFFSETS = range(1, len(KEY))


def fragments(text: str, key: str = KEY) -> list[str]:
    """The parts of ``key`` (4 characters or more) found in ``text``."""
    return sorted({key[i : i + 4] for i in range(len(key) - 3) if key[i : i + 4] in text})


def across(size: int, cuts: list[int], offset: int, key: str = KEY) -> str:
    """``size`` characters of filler with ``key`` starting ``offset`` characters before
    each cut (``cuts`` ascending, far enough apart)."""
    text = list(FILL * size)
    for cut in cuts:
        start = cut - offset
        text[start : start + len(key)] = key
    return "".join(text)


def middle_cuts(size: int, limit: int) -> list[int]:
    """Where a text of ``size`` characters shortened to ``limit`` from the middle is cut
    (``agentv.system.masking.cut``): after two thirds of the limit, and before its last third."""
    head = limit * 2 // 3
    return [head, size - (limit - head)]


def clean(part: str) -> bool:
    """``part`` (a shortened text of ``FILL`` and keys) holds no character of a key: only
    filler, masks (``***``) and the cut's mark."""
    return set(part) <= {FILL, "*", " ", "…"}
