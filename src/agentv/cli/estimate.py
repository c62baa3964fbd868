"""``agentv estimate PATHS``: the tokens and cost of a run, before anything is sent."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentv.cli.common import AllowOutsideRoot, format_usd, judge_samples_value, printable

if TYPE_CHECKING:
    from agentv.api import Estimate


class EstimateFormat(StrEnum):
    table = "table"
    json = "json"


def estimate_command(
    paths: Annotated[list[str], typer.Argument(help="Eval YAML files, folders or globs.")],
    target: Annotated[
        list[str] | None,
        typer.Option(help="Target name(s), as for agentv eval (default: each case's own)."),
    ] = None,
    targets: Annotated[
        Path | None, typer.Option(help="The targets.yaml to use (default: discovered).")
    ] = None,
    repeat: Annotated[
        int | None, typer.Option(min=1, max=1000, help="Runs of each case, as for agentv eval.")
    ] = None,
    eval_id: Annotated[str | None, typer.Option(help="Only the case with this id.")] = None,
    answer_tokens: Annotated[
        int | None,
        typer.Option(min=0, help="The length taken for each answer, in tokens (default 500)."),
    ] = None,
    judge_samples: Annotated[
        str | None,
        typer.Option(
            "--judge-samples",
            help="As for agentv eval: N or MIN..MAX samples of every judge without its own "
            "(each counted; MIN..MAX at MAX).",
            show_default=False,
        ),
    ] = None,
    output_format: Annotated[
        EstimateFormat, typer.Option("--format", help="table, or json.")
    ] = EstimateFormat.table,
    allow_outside_root: AllowOutsideRoot = False,
) -> None:
    """Estimate a run's tokens and cost before sending anything: the exact prompts the run
    would send, an answer length taken as stated, the run's prices. No secret is needed."""
    from agentv.api import estimate
    from agentv.cli.diagnostics import print_diagnostics
    from agentv.errors import AgentVError, InputError

    try:
        found = estimate(
            paths,
            target=target or None,
            targets_file=targets,
            repeat=repeat,
            eval_id=eval_id,
            answer_tokens=answer_tokens,
            allow_outside_root=allow_outside_root,
            judge_samples=judge_samples_value(judge_samples, None),
        )
    except InputError as exc:
        print_diagnostics(exc.diagnostics, sys.stderr)
        sys.stderr.write(f"error: {printable(str(exc))}\n")
        raise typer.Exit(1) from None
    except AgentVError as exc:
        sys.stderr.write(f"error: {printable(str(exc))}\n")
        raise typer.Exit(1) from None
    print_diagnostics(found.diagnostics, sys.stderr)
    if output_format is EstimateFormat.json:
        sys.stdout.write(json.dumps(found.to_dict(), indent=2) + "\n")
    else:
        sys.stdout.write(printable(table(found)) + "\n")


def table(found: Estimate) -> str:
    """The estimate as people read it."""
    lines = [
        f"Estimate for {found.runs} run(s) of {found.cases} case(s): {found.requests} "
        "request(s), nothing sent",
        f"  {'target':<20} {'role':<6} {'requests':>8} {'input':>10} {'output':>10} {'cost':>10}",
    ]
    for line in found.lines:
        lines.append(
            f"  {line.target[:20]:<20} {line.role:<6} {line.requests:>8,} "
            f"{line.input_tokens:>10,} {line.output_tokens:>10,} {format_usd(line.usd):>10}"
        )
    total = f"Total: {format_usd(found.total_usd)}"
    if found.unpriced:
        total += (
            f" (without {', '.join(found.unpriced)}: no price known; set price: in targets.yaml)"
        )
    lines += [
        total,
        f"Assumed: each answer {found.answer_tokens} tokens (--answer-tokens), at most its "
        f"target's max_output_tokens, each judge's verdict {found.judge_verdict_tokens}; "
        f"{found.method}; tool loops' extra requests "
        "not counted"
        + (
            f"; simulated conversations at their max_turns, each user message "
            f"{found.user_message_tokens} tokens."
            if any(line.role == "user" for line in found.lines)
            else "."
        ),
    ]
    return "\n".join(lines)
