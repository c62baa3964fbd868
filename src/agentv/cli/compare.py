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
    from agentv.api import CaseDelta, Comparison, EvaluatorFlips, Flip, Side, Significance

#: flipped runs listed by name per evaluator, at most
FLIPS_SHOWN = 20


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
    pass_threshold: Annotated[
        float | None,
        typer.Option(
            min=0,
            max=1,
            help="For flipped verdicts: the threshold of an evaluator whose record says "
            "neither its own nor whether it passed (default 0.8).",
            show_default=False,
        ),
    ] = None,
    significance: Annotated[
        float | None,
        typer.Option(
            "--significance",
            callback=lambda v: _open_unit(v, "--significance", top=False),
            help="A significance level (e.g. 0.05): --fail-on-regression fails only when the "
            "drop is more than noise (the mean change's paired bootstrap interval below 0 "
            "and, when verdicts changed, an exact McNemar test rejecting at this level).",
            show_default=False,
        ),
    ] = None,
    detect: Annotated[
        float | None,
        typer.Option(
            "--detect",
            callback=lambda v: _open_unit(v, "--detect", top=True),
            help="A drop (e.g. 0.05): say how many paired cases would detect it at the "
            "significance level (0.05 without --significance) with 80% power.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Compare two runs case by case: improved, regressed, unchanged, new and missing cases,
    the mean score change with a 95% interval, and the pass-rate change; with
    --significance, whether the drop is real."""
    from agentv.api import compare
    from agentv.cli.common import printable
    from agentv.cli.console_text import printable_json
    from agentv.cli.diagnostics import print_diagnostics
    from agentv.errors import AgentVError

    try:
        comparison = compare(
            base,
            new,
            min_delta=min_delta,
            significance=significance,
            detect=detect,
            pass_threshold=pass_threshold,
        )
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
    if not fail_on_regression or not comparison.regressed:
        return
    sig = comparison.significance
    count = len(comparison.regressed)
    if comparison.fails:
        why = f" and the drop is significant at {sig.alpha:g}" if sig and sig.gate else ""
        sys.stderr.write(f"{count} case(s) regressed{why}\n")
        raise typer.Exit(1)
    assert sig is not None
    sys.stderr.write(
        f"{count} case(s) regressed, but the drop is not significant at {sig.alpha:g} "
        "(--significance): not failing\n"
    )


def _open_unit(value: float | None, name: str, *, top: bool) -> float | None:
    """``value`` above 0 and below 1 (``top``: up to 1 included); a usage error else."""
    if value is not None and not (0 < value < 1 or (top and value == 1)):
        upper = "at most 1" if top else "below 1"
        raise typer.BadParameter(f"more than 0 and {upper} (got {value:g})", param_hint=name)
    return value


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
    if c.significance is not None:
        lines += significance_lines(c.significance)
    return lines


def significance_lines(sig: Significance) -> list[str]:
    """Whether the drop is real, and what this many cases can detect."""
    level = f"{sig.alpha:g}"
    if sig.interval is None:
        interval = "no case graded in both"
    else:
        low, high = sig.interval
        interval = f"{1 - sig.alpha:.0%} interval {low:+.3f} to {high:+.3f}"
    lines = [
        f"Significance at {level}: mean change {interval} "
        f"({'below 0' if sig.score_drop else 'not below 0'}); verdicts: {sig.lost} lost, "
        f"{sig.gained} gained, exact McNemar p = {sig.p_value:.4g}"
        + ("" if sig.lost + sig.gained else " (no verdict changed)"),
        f"Drop significant at {level}: {'yes' if sig.significant else 'no'}",
    ]
    if sig.cases:
        runs = f"{sig.runs} run{'s' if sig.runs != 1 else ''} each"
        found = [f"a pass-rate change of {_effect(sig.detectable_rate)}"]
        if sig.detectable_score is not None:
            found.append(f"a mean score change of {_effect(sig.detectable_score)}")
        lines.append(
            f"Detectable with 80% power among {sig.cases} paired cases ({runs}): "
            + ", ".join(found)
        )
    if sig.detect is not None:
        needed = [f"a pass-rate drop of {sig.detect:g} needs {sig.cases_for_rate:,} cases"]
        if sig.cases_for_score is not None:
            needed.append(
                f"a mean score drop of {sig.detect:g} needs {sig.cases_for_score:,} cases"
            )
        lines.append(f"At {level} with 80% power: {', '.join(needed)}")
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


def _run_name(flip: Flip) -> str:
    dataset, eval_id, target, repeat = flip.key
    return (
        f"{dataset}/{eval_id}"
        + (f" [{target}]" if target else "")
        + (f" repeat {repeat}" if repeat else "")
    )


def _effect(value: float | None) -> str:
    """A detectable change, or that none up to 1 (the whole scale) is."""
    if value is None:
        return "-"
    return f"{value:.3f}" if value <= 1 else "none up to 1 (too few cases)"


def flips_lines(flips: tuple[EvaluatorFlips, ...], quote: Callable[[str], str] = str) -> list[str]:
    """Each evaluator's flipped verdicts: how many of its runs, which way, how the
    reviewed ones moved against the people's verdicts, then the runs (empty: none)."""
    if not any(e.flips for e in flips):
        return []
    lines = ["Verdicts that flipped (per evaluator):"]
    for e in flips:
        if not e.flips:
            continue
        ways = [
            f"{e.count(a, b)} {a} -> {b}"
            for a, b in (
                ("pass", "fail"),
                ("fail", "pass"),
                ("pass", "uncertain"),
                ("fail", "uncertain"),
                ("uncertain", "pass"),
                ("uncertain", "fail"),
            )
            if e.count(a, b)
        ]
        people = (
            f"; reviewed {e.reviewed}: {e.towards} towards the people's verdict, "
            f"{e.away} away from it"
            if e.reviewed
            else ""
        )
        lines.append(
            f"  {quote(e.name)}: {len(e.flips)} of {e.compared} runs ({', '.join(ways)}){people}"
        )
        for flip in e.flips[:FLIPS_SHOWN]:
            said = ""
            if flip.human is not None:
                way = {True: ", towards", False: ", away"}.get(flip.towards, "")
                said = f" (reviewed: {flip.human}{way})"
            lines.append(f"    {quote(_run_name(flip))}: {flip.before} -> {flip.after}{said}")
        if len(e.flips) > FLIPS_SHOWN:
            lines.append(f"    ... and {len(e.flips) - FLIPS_SHOWN} more (--format json)")
    return lines


def table(c: Comparison) -> str:
    """The comparison for a terminal."""
    lines = [f"Comparing {c.new_path} with {c.base_path}", *_head(c)]
    flipped = flips_lines(c.flips)
    if flipped:
        lines += ["", *flipped]
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
    flipped = flips_lines(c.flips, _code)
    if flipped:
        lines += ["", f"**{flipped[0]}**", ""]
        # an evaluator's line, then its runs as a list beneath it
        lines += [
            f"{'  ' if line.startswith('    ') else ''}- {line.strip()}" for line in flipped[1:]
        ]
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
