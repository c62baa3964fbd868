"""Trend charts drawn on the server as SVG: a line of one figure run after run (pass rate,
mean score, cost), its points titled with their run and value. Every text in a chart is
escaped; no style attribute is used (the page's Content-Security-Policy allows none), only
presentation attributes and the page's classes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

WIDTH, HEIGHT = 320, 120
PAD_LEFT, PAD_RIGHT, PAD_TOP, PAD_BOTTOM = 44, 10, 10, 22


@dataclass(frozen=True, slots=True)
class Point:
    """One run's value (None: the run has none, left out of the line) and its label."""

    label: str
    value: float | None
    href: str | None = None


def _f(value: float) -> str:
    return f"{value:.1f}"


def line_chart(
    points: Sequence[Point],
    *,
    title: str,
    top: float | None = None,
    shown: Callable[[float], str] = lambda v: f"{v:.3f}",
) -> Markup:
    """An SVG line chart of ``points`` in order; the y axis from 0 to ``top`` (default:
    the largest value). Points link to their run when they have an ``href``."""
    known = [p.value for p in points if p.value is not None]
    high = top if top is not None else max(known, default=0.0)
    if high <= 0:
        high = 1.0
    inner_w = WIDTH - PAD_LEFT - PAD_RIGHT
    inner_h = HEIGHT - PAD_TOP - PAD_BOTTOM
    step = inner_w / max(1, len(points) - 1)

    def x(i: int) -> float:
        return PAD_LEFT + (i * step if len(points) > 1 else inner_w / 2)

    def y(v: float) -> float:
        return PAD_TOP + inner_h - min(1.0, max(0.0, v / high)) * inner_h

    parts = [
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" '
        f'role="img" aria-label="{escape(title)}">',
        f"<title>{escape(title)}</title>",
        f'<line class="axis" x1="{PAD_LEFT}" y1="{_f(y(0))}" x2="{WIDTH - PAD_RIGHT}" '
        f'y2="{_f(y(0))}" stroke="#c8ccd4"/>',
        f'<line class="axis" x1="{PAD_LEFT}" y1="{_f(y(high))}" x2="{WIDTH - PAD_RIGHT}" '
        f'y2="{_f(y(high))}" stroke="#eceef2"/>',
        f'<text class="tick" x="{PAD_LEFT - 4}" y="{_f(y(high) + 4)}" text-anchor="end">'
        f"{escape(shown(high))}</text>",
        f'<text class="tick" x="{PAD_LEFT - 4}" y="{_f(y(0) + 4)}" text-anchor="end">'
        f"{escape(shown(0.0))}</text>",
    ]
    # the line is broken where a run has no value
    segment: list[str] = []
    segments: list[list[str]] = []
    for i, p in enumerate(points):
        if p.value is None:
            if segment:
                segments.append(segment)
            segment = []
            continue
        segment.append(f"{_f(x(i))},{_f(y(p.value))}")
    if segment:
        segments.append(segment)
    for line in segments:
        if len(line) > 1:
            parts.append(
                f'<polyline class="series" fill="none" stroke="#2456c6" stroke-width="2" '
                f'points="{" ".join(line)}"/>'
            )
    for i, p in enumerate(points):
        if p.value is None:
            continue
        label = f"{p.label}: {shown(p.value)}"
        dot = (
            f'<circle class="dot" cx="{_f(x(i))}" cy="{_f(y(p.value))}" r="3.5" fill="#2456c6">'
            f"<title>{escape(label)}</title></circle>"
        )
        if p.href:
            dot = f'<a href="{escape(p.href)}">{dot}</a>'
        parts.append(dot)
    if points:
        parts.append(
            f'<text class="tick" x="{_f(x(0))}" y="{HEIGHT - 6}" text-anchor="start">'
            f"{escape(points[0].label)}</text>"
        )
        if len(points) > 1:
            parts.append(
                f'<text class="tick" x="{_f(x(len(points) - 1))}" y="{HEIGHT - 6}" '
                f'text-anchor="end">{escape(points[-1].label)}</text>'
            )
    parts.append("</svg>")
    return Markup("".join(parts))
