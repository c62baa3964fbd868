"""``agentv compare BASE NEW``: what changed between two runs, for people, tools and pull
requests."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from agentv.api import CaseDelta, Comparison, Side


class CompareFormat(StrEnum):
    """Output format of ``compare``."""

    table = "table"
    json = "json"
    markdown = "markdown"


def compare_command(
    base: Annotated[Path, typer.Argument(help="The results file to compare against.")],
    new: Annotated[Path, typer.Argument(help="The results file of the new run.")],
    output_format: Annotated[
        CompareFormat, typer.Option("--format", help="table, json, or markdown (for a PR).")
    ] = CompareFormat.table,
    fail_on_regression: Annotated[
        bool,
        typer.Option(
            "--fail-on-regression",
            help="Exit 1 when a case's score fell by more than --min-delta, or it went from "
            "ok to failed, error or invalid.",
        ),
    ] = False,
    min_delta: Annotated[
        float,
        typer.Option(min=0, max=1, help="A score change below this is no change."),
    ] = 0.05,
) -> None:
    """Compare two runs case by case: improved, regressed, unchanged, new and missing cases,
    the mean score change with a 95% interval, and the pass-rate change."""
    from agentv.api import compare
    from agentv.cli.common import printable
    from agentv.cli.console_text import printable_json
    from agentv.cli.diagnostics import print_diagnostics
    from agentv.errors import AgentVError

    try:
        comparison = compare(base, new, min_delta=min_delta)
    except AgentVError as exc:
        sys.stderr.write(f"error: {printable(str(exc))}\n")
        raise typer.Exit(1) from None
    print_diagnostics(comparison.notes, sys.stderr)
    if output_format is CompareFormat.json:
        sys.stdout.write(printable_json(json.dumps(comparison.to_dict(), indent=2)) + "\n")
    elif output_format is CompareFormat.markdown:
        sys.stdout.write(printable(markdown(comparison)) + "\n")
    else:
        sys.stdout.write(printable_table(table(comparison)) + "\n")
    if fail_on_regression and comparison.regressed:
        sys.stderr.write(f"{len(comparison.regressed)} case(s) regressed\n")
        raise typer.Exit(1)


def printable_table(text: str) -> str:
    """The table with terminal control characters from the files made visible."""
    from agentv.cli.common import printable

    return "\n".join(printable(line) for line in text.splitlines())


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _runs(side: Side, quote: Callable[[str], str] = str) -> str:
    """``12 runs (10 graded, 1 error, 1 invalid)``."""
    if not side.runs:
        return "no runs"
    parts = [f"{side.graded} graded"]
    parts += [
        f"{n} {quote(status)}"
        for status, n in side.statuses.items()
        if status not in ("ok", "failed")
    ]
    return f"{side.runs} runs ({', '.join(parts)})"


def _head(c: Comparison, quote: Callable[[str], str] = str) -> list[str]:
    counts = c.counts
    mean = "-" if c.mean_delta is None else f"{c.mean_delta:+.3f}"
    ci = "" if c.ci is None else f" (95% interval {c.ci[0]:+.3f} to {c.ci[1]:+.3f})"
    rate = _rate(c.base_pass_rate) + " -> " + _rate(c.new_pass_rate)
    lines = [
        f"Improved: {counts['improved']}  Regressed: {counts['regressed']}  "
        f"Unchanged: {counts['unchanged']}  New: {counts['new']}  Missing: {counts['missing']}",
    ]
    if c.base.runs or c.new.runs:
        lines.append(f"Runs: {_runs(c.base, quote)} -> {_runs(c.new, quote)}")
        lines.append(f"Mean score (graded runs): {_score(c.base.mean)} -> {_score(c.new.mean)}")
    lines += [
        f"Mean score change (cases graded in both): {mean}{ci}",
        f"Pass rate (graded runs): {rate}",
    ]
    if c.base.cost is not None or c.new.cost is not None:
        lines.append(f"Cost spent: {_usd(c.base.cost, 'usd')} -> {_usd(c.new.cost, 'usd')}")
        lines.append(
            f"Cost per run (the targets' answers): {_usd(c.base.cost, 'per_run_usd')} -> "
            f"{_usd(c.new.cost, 'per_run_usd')}"
        )
    for name, value, base, new in c.by_variable:
        shown = quote(f"{name}={value}")
        lines.append(
            f"Mean score with {shown}: {_score(base.mean if base else None)} -> "
            f"{_score(new.mean if new else None)}"
        )
    return lines


def _usd(cost: dict[str, float | None] | None, key: str) -> str:
    from agentv.cli.common import format_usd

    return "-" if cost is None or cost.get(key) is None else format_usd(cost[key])


def _name(d: CaseDelta) -> str:
    dataset, eval_id, target = d.key
    return f"{dataset}/{eval_id}" + (f" [{target}]" if target else "")


def _cell(d: CaseDelta, side: str, quote: Callable[[str], str] = str) -> str:
    result = d.base if side == "base" else d.new
    return "-" if result is None else f"{_score(result.score)} {quote(result.status)}"


def table(c: Comparison) -> str:
    """The comparison for a terminal."""
    lines = [f"Comparing {c.new_path} with {c.base_path}", *_head(c)]
    if c.changed:
        width = min(40, max(len(_name(d)) for d in c.changed))
        lines += ["", f"  {'case':<{width}}  {'base':<14} {'new':<14} {'delta':>7}  verdict"]
        for d in c.changed:
            delta = "-" if d.delta is None else f"{d.delta:+.3f}"
            lines.append(
                f"  {_name(d)[:width]:<{width}}  {_cell(d, 'base'):<14} {_cell(d, 'new'):<14} "
                f"{delta:>7}  {d.verdict}"
            )
    return "\n".join(lines)


def _code(text: str) -> str:
    """``text`` from a results file as a code span in a table cell: shown as written, never
    read as markdown or HTML (``<img onerror=...>``, ``</details>``), links or mentions
    (``@everyone``), which GitHub does not look for in code. Its backticks are fenced by a
    longer run, its pipes escaped (a table cell ends at one), its lines joined."""
    text = " ".join(text.splitlines()) or " "
    text = text.replace("|", "\\|")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _status(status: str) -> str:
    """A status as markdown: agentv's four as they are, any other as code."""
    return status if status in ("ok", "failed", "error", "invalid") else _code(status)


def markdown(c: Comparison) -> str:
    """The comparison as a pull-request comment; what comes from the results files (case
    names, statuses) is in code spans (``_code``)."""
    lines = ["### agentv: comparison", "", *(f"- {line}" for line in _head(c, _status))]
    if c.regressed:
        lines += ["", f"**{len(c.regressed)} regressed**"]
    if c.changed:
        lines += ["", "| case | base | new | delta | verdict |", "|---|---|---|---|---|"]
        for d in c.changed:
            delta = "-" if d.delta is None else f"{d.delta:+.3f}"
            lines.append(
                f"| {_code(_name(d))} | {_cell(d, 'base', _status)} | "
                f"{_cell(d, 'new', _status)} | {delta} | {d.verdict} |"
            )
    else:
        lines += ["", "No case changed."]
    return "\n".join(lines)
