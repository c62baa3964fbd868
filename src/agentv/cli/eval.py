"""``agentv eval``: run eval files against their targets and write the results."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentv.cli.app import AllowOutsideRoot, app

EXIT_HELP = """
Exit codes: 0 the run finished (some cases may have failed; see the summary);
1 the run could not start (bad paths, targets or eval files, no cases), a healthcheck failed,
or the mean score is below --threshold; 2 bad command-line usage;
130 / 143 interrupted by Ctrl-C / SIGTERM (every finished case is already in the results file).
"""


@app.command("eval", epilog=EXIT_HELP)
def eval_command(
    paths: Annotated[list[str], typer.Argument(help="Eval YAML files, folders or globs.")],
    target: Annotated[
        str, typer.Option(help="Target name from targets.yaml (overrides the eval file's target).")
    ] = "default",
    targets: Annotated[
        Path | None, typer.Option(help="The targets.yaml to use (default: discovered).")
    ] = None,
    eval_id: Annotated[str | None, typer.Option(help="Run only the case with this id.")] = None,
    out: Annotated[
        Path | None, typer.Option(help="Results file (default .agentv/results/eval_<time>.jsonl).")
    ] = None,
    output_format: Annotated[str, typer.Option(help="Results format: jsonl or yaml.")] = "jsonl",
    workers: Annotated[
        int | None,
        typer.Option(
            min=1, max=50, help="Cases in flight at once (default: target setting, else 3)."
        ),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option(help="Answer every case with a mock instead of calling targets.")
    ] = False,
    dry_run_delay: Annotated[float, typer.Option(help="Mock delay in ms (dry run).")] = 0,
    dry_run_delay_min: Annotated[float, typer.Option(help="Random mock delay, low end (ms).")] = 0,
    dry_run_delay_max: Annotated[float, typer.Option(help="Random mock delay, high end (ms).")] = 0,
    agent_timeout: Annotated[
        float, typer.Option(help="Seconds a target may take per case (0: no limit).")
    ] = 120,
    max_retries: Annotated[
        int, typer.Option(min=0, help="Extra attempts for a case whose target timed out.")
    ] = 2,
    cache: Annotated[
        bool, typer.Option("--cache", help="Reuse answers stored on disk for identical requests.")
    ] = False,
    dump_prompts: Annotated[
        bool,
        typer.Option("--dump-prompts", help="Write each case's prompt as JSON (.agentv/prompts)."),
    ] = False,
    dump_dir: Annotated[
        Path | None,
        typer.Option("--dump-dir", help="Folder for --dump-prompts (implies it)."),
    ] = None,
    threshold: Annotated[
        float | None, typer.Option(help="Exit 1 when the mean score is below this (for CI).")
    ] = None,
    allow_outside_root: AllowOutsideRoot = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Say more.")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No per-case lines.")] = False,
) -> None:
    """Run eval cases against their targets, grade the answers and write results."""
    from agentv.runner import EvalOptions, run_eval_command

    options = EvalOptions(
        paths=paths,
        target=target,
        targets=targets,
        eval_id=eval_id,
        out=out,
        output_format=output_format,
        workers=workers,
        dry_run=dry_run,
        dry_run_delay=dry_run_delay,
        dry_run_delay_min=dry_run_delay_min,
        dry_run_delay_max=dry_run_delay_max,
        agent_timeout=agent_timeout,
        max_retries=max_retries,
        cache=cache,
        dump_prompts=str(dump_dir) if dump_dir else (".agentv/prompts" if dump_prompts else None),
        threshold=threshold,
        allow_outside_root=allow_outside_root,
        verbose=verbose,
        quiet=quiet,
    )
    raise typer.Exit(run_eval_command(options))
