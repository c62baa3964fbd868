"""``agentv regrade RESULTS``: grade recorded answers again with the current evaluators,
asking no target."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from agentv.cli.common import AllowOutsideRoot, format_usd, printable


def regrade_command(
    results: Annotated[Path, typer.Argument(help="The results file whose answers to grade.")],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            metavar="FILE",
            help="The new results file (default: RESULTS.regraded.jsonl beside it).",
        ),
    ] = None,
    evals: Annotated[
        list[str] | None,
        typer.Option(
            "--evals",
            help="Eval files, folders or globs (default: the files the records name).",
        ),
    ] = None,
    targets: Annotated[
        Path | None, typer.Option(help="The targets.yaml to use (default: discovered).")
    ] = None,
    cache: Annotated[
        bool, typer.Option("--cache", help="Reuse judge answers stored on disk (and store new).")
    ] = False,
    pass_threshold: Annotated[
        float | None,
        typer.Option(min=0, max=1, help="Lowest passing score (default: the configs', else 0.8)."),
    ] = None,
    summary_json: Annotated[
        Path | None,
        typer.Option("--summary-json", help="Also write the new file's summary as JSON here."),
    ] = None,
    allow_outside_root: AllowOutsideRoot = False,
) -> None:
    """Grade the answers a results file recorded again, with the evaluators the eval files
    hold now, into a new results file: no target is asked (judges are). Cases whose prompt
    changed since are reported and copied as they were, not regraded. Says which verdicts
    flipped, per evaluator, and for reviewed runs whether towards the people's verdict."""
    from agentv.api import display_path, regrade
    from agentv.cli.diagnostics import print_diagnostics
    from agentv.cli.summary import render_summary
    from agentv.errors import AgentVError, InputError

    try:
        done = regrade(
            results,
            out=out,
            eval_paths=evals or None,
            targets_file=targets,
            cache=cache,
            pass_threshold=pass_threshold,
            allow_outside_root=allow_outside_root,
        )
    except InputError as exc:
        if exc.diagnostics:
            print_diagnostics(exc.diagnostics, sys.stderr)
        sys.stderr.write(f"error: {printable(str(exc))}\n")
        raise typer.Exit(1) from None
    except AgentVError as exc:
        sys.stderr.write(f"error: {printable(str(exc))}\n")
        raise typer.Exit(1) from None
    print_diagnostics(done.diagnostics, sys.stderr)
    out_lines = [f"Regraded: {done.regraded} record(s) of {display_path(results)}"]
    if done.prompt_changed:
        out_lines.append(
            f"Not regraded, their prompt changed since they were recorded "
            f"({len(done.prompt_changed)}); agentv eval --resume the new file runs them:"
        )
        out_lines += [f"  {case} [{target}]" for case, target in done.prompt_changed]
    if done.not_regraded:
        out_lines.append(f"Not regraded ({len(done.not_regraded)}), copied as they were:")
        out_lines += [f"  {case} [{target}]: {why}" for case, target, why in done.not_regraded]
    from agentv.cli.compare import flips_lines

    flipped = flips_lines(done.flips)
    out_lines += flipped or ["No verdict flipped."]
    out_lines.append(f"Judges: {format_usd(done.spent_usd)} spent")
    sys.stdout.write(printable("\n".join(out_lines)) + "\n")
    sys.stdout.write(render_summary(done.summary, results_path=done.out) + "\n")
    if summary_json is not None:
        target = Path(summary_json)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(done.summary.to_dict(), indent=2) + "\n")
        except OSError as exc:
            sys.stderr.write(f"error: cannot write the summary to {target}: {exc.strerror}\n")
            raise typer.Exit(1) from None
