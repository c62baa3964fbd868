"""``agentv calibrate``: how far each evaluator agrees with the people who reviewed its
runs."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentv.cli.common import printable
from agentv.cli.console_text import printable_json

if TYPE_CHECKING:
    from agentv.api import Calibration


class CalibrateFormat(StrEnum):
    """Output format of ``calibrate``."""

    table = "table"
    json = "json"


def calibrate_command(
    run: Annotated[
        int | None, typer.Option("--run", help="Only the reviews of this run (its id).")
    ] = None,
    output_format: Annotated[
        CalibrateFormat, typer.Option("--format", help="table, or json for tools.")
    ] = CalibrateFormat.table,
    store: Annotated[
        Path | None,
        typer.Option("--store", help="The run store (default: the project's).", show_default=False),
    ] = None,
) -> None:
    """Show how far each evaluator agrees with people: over the reviewed runs of cases,
    per evaluator (judges first) the labels, the agreement, Cohen's kappa and the
    confusion matrix, with a warning below 20 labels."""
    from agentv.api import calibrate
    from agentv.errors import AgentVError

    try:
        found = calibrate(store=store, run=run)
    except AgentVError as exc:
        sys.stderr.write(f"error: {printable(str(exc))}\n")
        raise typer.Exit(1) from None
    if output_format is CalibrateFormat.json:
        sys.stdout.write(printable_json(json.dumps(found.to_dict(), indent=2)) + "\n")
        return
    sys.stdout.write(calibration_table(found) + "\n")


def _figure(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def calibration_table(found: Calibration) -> str:
    """The agreement of each evaluator, for a terminal."""
    if not found.evaluators:
        return (
            "No reviewed runs yet: review answers in agentv view (or import labels with "
            "agentv reviews import), then calibrate."
        )
    header = (
        "evaluator",
        "type",
        "labels",
        "agreement",
        "kappa",
        "both pass",
        "eval pass/human fail",
        "eval fail/human pass",
        "both fail",
    )
    rows = [
        (
            a.name,
            a.type,
            str(a.n),
            _figure(a.agreement, ".1%"),
            _figure(a.kappa, ".3f"),
            str(a.both_pass),
            str(a.evaluator_pass_human_fail),
            str(a.evaluator_fail_human_pass),
            str(a.both_fail),
        )
        for a in found.evaluators
    ]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = [f"Reviewed runs of cases: {found.reviewed}", ""]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    warnings = [f"warning: {a.name}: {a.warning}" for a in found.evaluators if a.warning]
    if warnings:
        lines += ["", *warnings]
    return "\n".join(printable(line) for line in lines)
