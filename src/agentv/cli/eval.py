"""``agentv eval``: run eval files against their targets and write the results."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from agentv.cli import help as panels
from agentv.cli.common import (
    ALLOW_OUTSIDE_ROOT_HELP,
    judge_samples_value,
    printable,
    stopped_by_sigterm,
)

if TYPE_CHECKING:
    from agentv.api import EvalRun, PreparedRun, ResultWriter, RunRegistration
    from agentv.cli.progress import Progress

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_SIGINT = 130
EXIT_SIGTERM = 143

EXIT_ERRORS = 3
EXIT_USAGE = 2
EXIT_BUDGET = 4
EXIT_USER_ERRORS = 5
EXIT_UNCERTAIN = 6
EXIT_CASES_FAILED = 7

#: the exit codes, listed under ``agentv eval --help`` and in docs/cli.md (docs/results.md
#: says the same, with the order in which they are decided)
EXIT_CODES = (
    (
        "0",
        "every selected run was graded and passed; with --threshold, the graded runs' "
        "mean score is at least the threshold",
    ),
    (
        "1",
        "the run could not start (bad paths, targets or eval files, no cases, a failed "
        "healthcheck); the graded runs' mean score is below --threshold, or no run was graded; "
        "or a file asked for (--summary-json, --junit, --report) could not be written",
    ),
    ("2", "bad command-line usage"),
    (
        "3",
        "some runs errored, were invalid, or had an evaluator that could not grade "
        "(--allow-errors: 0, or 6 when a graded run failed)",
    ),
    (
        "4",
        "--budget-usd stopped the run: the runs not sent are recorded as skipped, and "
        "--resume goes on with them; decided first",
    ),
    ("5", "some simulated users failed (user_error) and no run errored (--allow-errors as for 3)"),
    (
        "6",
        "some verdicts are uncertain (a judge's samples disagreed about pass or fail: "
        "--on-uncertain fail or pass decides them), with or without --threshold",
    ),
    (
        "7",
        "some graded runs failed (a score below the pass threshold, or a required "
        "evaluator missed) and nothing above applies; not on a --dry-run (a mock answered); "
        "--threshold replaces this rule",
    ),
    (
        "130 / 143",
        "interrupted by Ctrl-C / SIGTERM: every finished run is already in the results file",
    ),
)


class ExecutorName(StrEnum):
    local = "local"
    ray = "ray"


class OnUncertain(StrEnum):
    """``--on-uncertain``: what a judge's disagreeing samples make of a run."""

    uncertain = "uncertain"
    fail = "fail"
    # the word, not Python's keyword: the choice is spelled `pass`
    pass_ = "pass"


class OutputFormat(StrEnum):
    """``--format``: the results file's format (anything else is a usage error)."""

    jsonl = "jsonl"
    yaml = "yaml"


def eval_command(
    paths: Annotated[
        list[str] | None,
        typer.Argument(
            help="Eval YAML files, folders or globs. With --resume or --rerun-*, the eval "
            "files the results file names, when none is given.",
            show_default=False,
        ),
    ] = None,
    target: Annotated[
        list[str] | None,
        typer.Option(
            metavar="NAME",
            help="The target of every case (overrides the eval files); given several times, "
            "every case runs on each (a target matrix).",
            rich_help_panel=panels.TARGETS,
        ),
    ] = None,
    targets: Annotated[
        Path | None,
        typer.Option(
            metavar="FILE",
            help="The targets file (default: .agentv/targets.yaml, found from the eval files).",
            rich_help_panel=panels.TARGETS,
        ),
    ] = None,
    agent_timeout: Annotated[
        float,
        typer.Option(
            min=0,
            metavar="SECONDS",
            help="Seconds a target may take per case, retries included (0: no limit; default 120).",
            rich_help_panel=panels.TARGETS,
        ),
    ] = 120,
    max_retries: Annotated[
        int,
        typer.Option(
            min=0,
            help="Extra attempts for a case whose target timed out (default 2).",
            rich_help_panel=panels.TARGETS,
        ),
    ] = 2,
    eval_id: Annotated[
        str | None,
        typer.Option(
            metavar="ID", help="Run only the case with this id.", rich_help_panel=panels.RUNNING
        ),
    ] = None,
    repeat: Annotated[
        str | None,
        typer.Option(
            metavar="N",
            help="Run each case N times (default: the files' `repeat`, else 1); `auto`: more "
            "runs only of the cases whose pass/fail is not settled.",
            show_default=False,
            rich_help_panel=panels.RUNNING,
        ),
    ] = None,
    max_repeat: Annotated[
        int | None,
        typer.Option(
            "--max-repeat",
            min=1,
            max=1000,
            metavar="N",
            help="With --repeat auto: the most runs of a case (default 10).",
            show_default=False,
            rich_help_panel=panels.RUNNING,
        ),
    ] = None,
    repeat_confidence: Annotated[
        float | None,
        typer.Option(
            "--repeat-confidence",
            min=0.5,
            max=0.999,
            metavar="P",
            help="With --repeat auto: how sure a settled verdict is (default 0.95).",
            show_default=False,
            rich_help_panel=panels.RUNNING,
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=50,
            help="Requests in flight at once, per target, 1 to 50 (default: the target's "
            "`workers`, else 3).",
            rich_help_panel=panels.RUNNING,
        ),
    ] = None,
    cache: Annotated[
        bool,
        typer.Option(
            "--cache",
            help="Store answers in .agentv/cache/ and reuse them for identical requests.",
            rich_help_panel=panels.RUNNING,
        ),
    ] = False,
    budget_usd: Annotated[
        float | None,
        typer.Option(
            "--budget-usd",
            min=0.000001,
            metavar="USD",
            help="Stop sending once the run has spent this many US dollars; the runs left "
            "are recorded as skipped (exit code 4).",
            rich_help_panel=panels.RUNNING,
        ),
    ] = None,
    pass_threshold: Annotated[
        float | None,
        typer.Option(
            min=0,
            max=1,
            metavar="SCORE",
            help="The lowest score a case needs to pass (default: pass_threshold in "
            ".agentv/config.yaml, else 0.8).",
            rich_help_panel=panels.RUNNING,
        ),
    ] = None,
    judge_samples: Annotated[
        str | None,
        typer.Option(
            "--judge-samples",
            metavar="N",
            help="Ask each judge without `samples` of its own N times per answer (3), or "
            "MIN..MAX times: more while the mean is near the threshold (1..5).",
            show_default=False,
            rich_help_panel=panels.JUDGING,
        ),
    ] = None,
    judge_margin: Annotated[
        float | None,
        typer.Option(
            "--judge-margin",
            min=0,
            max=1,
            metavar="SCORE",
            help="With MIN..MAX samples: how near the threshold is near (default 0.1).",
            show_default=False,
            rich_help_panel=panels.JUDGING,
        ),
    ] = None,
    on_uncertain: Annotated[
        OnUncertain | None,
        typer.Option(
            "--on-uncertain",
            help="What a judge's disagreeing samples make of a run (judges without "
            "on_uncertain): uncertain (a status of its own, exit code 6), fail or pass.",
            show_default=False,
            rich_help_panel=panels.JUDGING,
        ),
    ] = None,
    allow_outside_root: Annotated[
        bool,
        typer.Option(
            "--allow-outside-root",
            help=ALLOW_OUTSIDE_ROOT_HELP,
            rich_help_panel=panels.RUNNING,
        ),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            metavar="FILE",
            help="The results file (default: .agentv/results/eval_<time>.jsonl).",
            rich_help_panel=panels.RESULTS,
        ),
    ] = None,
    output_format: Annotated[
        OutputFormat | None,
        typer.Option(
            "--format",
            help="The results file's format: jsonl (the default) or yaml; a file resumed or "
            "rerun into keeps its own.",
            show_default=False,
            rich_help_panel=panels.RESULTS,
        ),
    ] = None,
    output_format_alias: Annotated[
        OutputFormat | None,
        typer.Option("--output-format", hidden=True, help="The old spelling of --format."),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            metavar="SCORE",
            help="Gate on the mean score of the graded runs instead of on failed runs: exit 1 "
            "below it, 0 at or above it (errors keep their codes).",
            rich_help_panel=panels.RESULTS,
        ),
    ] = None,
    allow_errors: Annotated[
        bool,
        typer.Option(
            "--allow-errors",
            help="Do not fail on runs that errored or were invalid (3) or simulated users "
            "that failed (5).",
            rich_help_panel=panels.RESULTS,
        ),
    ] = False,
    summary_json: Annotated[
        Path | None,
        typer.Option(
            "--summary-json",
            metavar="FILE",
            help="Also write the summary's figures as JSON.",
            rich_help_panel=panels.RESULTS,
        ),
    ] = None,
    junit: Annotated[
        Path | None,
        typer.Option(
            "--junit",
            metavar="FILE",
            help="Also write the results as JUnit XML (for CI).",
            rich_help_panel=panels.RESULTS,
        ),
    ] = None,
    report: Annotated[
        bool,
        typer.Option(
            "--report",
            help="At the end, write the HTML report next to the results file.",
            rich_help_panel=panels.RESULTS,
        ),
    ] = False,
    store: Annotated[
        Path | None,
        typer.Option(
            "--store",
            metavar="FILE",
            help="The run store to register the run in (default: run_store in "
            ".agentv/config.yaml, else .agentv/runs.sqlite).",
            show_default=False,
            rich_help_panel=panels.RESULTS,
        ),
    ] = None,
    resume: Annotated[
        Path | None,
        typer.Option(
            "--resume",
            metavar="RESULTS",
            help="Finish this results file: run the runs it has no record of (or whose "
            "prompt changed), appending to it.",
            rich_help_panel=panels.AFTER_THE_RUN,
        ),
    ] = None,
    rerun_failed: Annotated[
        Path | None,
        typer.Option(
            "--rerun-failed",
            metavar="RESULTS",
            help="Run again the runs this file has as failed, error, invalid or user_error, "
            "appending to it (or to --out).",
            rich_help_panel=panels.AFTER_THE_RUN,
        ),
    ] = None,
    rerun_errors: Annotated[
        Path | None,
        typer.Option(
            "--rerun-errors",
            metavar="RESULTS",
            help="Run again the runs this file has as error, invalid or user_error, "
            "appending to it (or to --out); with --resume of the same file, both at once.",
            rich_help_panel=panels.AFTER_THE_RUN,
        ),
    ] = None,
    retry_errors: Annotated[
        bool,
        typer.Option(
            "--retry-errors",
            hidden=True,
            help="The old spelling of --rerun-errors with --resume: --resume FILE "
            "--retry-errors is --resume FILE --rerun-errors FILE.",
        ),
    ] = False,
    replay_user: Annotated[
        Path | None,
        typer.Option(
            "--replay-user",
            metavar="RESULTS",
            help="Send the simulated users' turns this results file recorded again, verbatim, "
            "instead of asking the simulators.",
            rich_help_panel=panels.AFTER_THE_RUN,
        ),
    ] = None,
    executor: Annotated[
        ExecutorName,
        typer.Option(
            help="Where cases run: here (local), or on a Ray cluster (ray).",
            rich_help_panel=panels.SCALE_OUT,
        ),
    ] = ExecutorName.local,
    ray_address: Annotated[
        str | None,
        typer.Option(
            metavar="ADDRESS",
            help="The Ray cluster (default: RAY_ADDRESS, else a local Ray is started).",
            rich_help_panel=panels.SCALE_OUT,
        ),
    ] = None,
    ray_cpus_per_case: Annotated[
        float | None,
        typer.Option(
            metavar="CPUS",
            help="CPUs each case reserves on the cluster (default 1; may be 0.1).",
            rich_help_panel=panels.SCALE_OUT,
        ),
    ] = None,
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run",
            help="Answer every case with a mock: no network, no keys.",
            rich_help_panel=panels.DEBUGGING,
        ),
    ] = False,
    dry_run_delay: Annotated[
        float,
        typer.Option(
            metavar="MS",
            help="With --dry-run: the mock waits this long.",
            show_default=False,
            rich_help_panel=panels.DEBUGGING,
        ),
    ] = 0,
    dry_run_delay_min: Annotated[
        float,
        typer.Option(
            metavar="MS",
            help="With --dry-run: a random wait, at least this long.",
            show_default=False,
            rich_help_panel=panels.DEBUGGING,
        ),
    ] = 0,
    dry_run_delay_max: Annotated[
        float,
        typer.Option(
            metavar="MS",
            help="... and at most this long.",
            show_default=False,
            rich_help_panel=panels.DEBUGGING,
        ),
    ] = 0,
    dump_prompts: Annotated[
        bool,
        typer.Option(
            "--dump-prompts",
            help="Write each case's prompt as JSON to .agentv/prompts/.",
            rich_help_panel=panels.DEBUGGING,
        ),
    ] = False,
    dump_dir: Annotated[
        Path | None,
        typer.Option(
            "--dump-dir",
            metavar="DIR",
            help="Write the prompts here instead (implies --dump-prompts).",
            rich_help_panel=panels.DEBUGGING,
        ),
    ] = None,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Errors in full, the targets used.",
            rich_help_panel=panels.DEBUGGING,
        ),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", help="No per-case lines.", rich_help_panel=panels.DEBUGGING),
    ] = False,
) -> None:
    """Run eval cases against their targets, grade the answers and write the results."""
    from agentv.api import DryRun

    rerun = _rerun_options(resume, rerun_failed, rerun_errors, out, retry_errors)
    if not paths:
        paths = _paths_from_results(rerun)
    raise typer.Exit(
        run_eval_command(
            paths,
            target=target or None,
            repeat=repeat_value(repeat),
            **_auto_options(max_repeat, repeat_confidence),
            summary_json=summary_json,
            junit=junit,
            report=report,
            **rerun,
            pass_threshold=pass_threshold,
            allow_errors=allow_errors,
            replay_user=replay_user,
            targets_file=targets,
            eval_id=eval_id,
            out=out,
            output_format=_one_format(output_format, output_format_alias),
            workers=workers,
            executor=executor.value,
            ray_address=ray_address,
            ray_cpus_per_case=ray_cpus_per_case,
            dry_run=DryRun(dry_run_delay, dry_run_delay_min, dry_run_delay_max)
            if dry_run
            else None,
            agent_timeout=agent_timeout,
            max_retries=max_retries,
            cache=cache,
            budget_usd=budget_usd,
            judge_samples=judge_samples_value(judge_samples, judge_margin),
            on_uncertain=on_uncertain.value if on_uncertain is not None else None,
            dump_prompts=dump_dir or (Path(".agentv/prompts") if dump_prompts else None),
            threshold=threshold,
            allow_outside_root=allow_outside_root,
            verbose=verbose,
            quiet=quiet,
            store=store,
        )
    )


def _one_format(given: OutputFormat | None, old: OutputFormat | None) -> str | None:
    """``--format``, or its old spelling ``--output-format`` (not both, unless they agree)."""
    if given is not None and old is not None and given is not old:
        raise typer.BadParameter(
            "give --format once (--output-format is its old spelling)", param_hint="'--format'"
        )
    chosen = given or old
    return chosen.value if chosen is not None else None


def repeat_value(text: str | None) -> int | str | None:
    """``--repeat N`` (1 to 1000) or ``--repeat auto``; ``typer.BadParameter`` else."""
    if text is None:
        return None
    if text.strip().lower() == "auto":
        return "auto"
    try:
        number = int(text)
    except ValueError:
        number = 0
    if not 1 <= number <= 1000:
        raise typer.BadParameter(
            f"a number of runs from 1 to 1000, or auto (not {text!r})", param_hint="'--repeat'"
        )
    return number


def _auto_options(max_repeat: int | None, confidence: float | None) -> dict[str, Any]:
    """``--max-repeat`` and ``--repeat-confidence``, when given."""
    out: dict[str, Any] = {}
    if max_repeat is not None:
        out["max_repeat"] = max_repeat
    if confidence is not None:
        out["repeat_confidence"] = confidence
    return out


def _paths_from_results(rerun: dict[str, Any]) -> list[str]:
    """The eval files a results file's records name, for --resume / --rerun-* without
    paths; a usage error without such an option, or when the file names none."""
    results = rerun.get("resume") or rerun.get("rerun")
    if results is None:
        raise typer.BadParameter(
            "give the eval files, folders or globs to run", param_hint="'PATHS...'"
        )
    from agentv.api import eval_files_of
    from agentv.errors import AgentVError

    try:
        named = eval_files_of(results)
    except AgentVError as exc:
        raise typer.BadParameter(str(exc), param_hint="'PATHS...'") from None
    if not named:
        raise typer.BadParameter(
            f"{results} names no eval file: give the eval files to run",
            param_hint="'PATHS...'",
        )
    return named


def run_eval_command(
    paths: list[str],
    *,
    threshold: float | None = None,
    allow_errors: bool = False,
    summary_json: Path | None = None,
    junit: Path | None = None,
    report: bool = False,
    verbose: bool = False,
    quiet: bool = False,
    out: Path | None = None,
    output_format: str | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    store: Path | None = None,
    **options: Any,
) -> int:
    """``agentv eval`` for parsed options: plan, run, print, decide the exit code.
    ``options`` go to ``agentv.api.prepare_run``. Never raises for a user's mistake."""
    from agentv.api import default_results_path, prepare_run
    from agentv.cli.diagnostics import print_diagnostics
    from agentv.cli.progress import make_progress
    from agentv.cli.summary import RunFacts, render_summary
    from agentv.errors import AgentVError, ClusterLostError, InputError, NoCasesError

    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    cwd = Path.cwd().resolve()
    try:
        with _collector_paused():
            # the results go to the file only: a run of any size keeps none in memory
            prepared = prepare_run(
                paths,
                cwd=cwd,
                out=out,
                output_format=output_format,
                keep_results=False,
                **options,
            )
    except NoCasesError as exc:
        print_diagnostics(exc.diagnostics, stderr)
        stderr.write(f"error: {printable(str(exc))}\n")
        return EXIT_FAILED
    except InputError as exc:
        if exc.diagnostics:
            print_diagnostics(exc.diagnostics, stderr)
        else:
            stderr.write(f"error: {printable(str(exc))}\n")
        return EXIT_FAILED
    except AgentVError as exc:
        stderr.write(f"error: {printable(str(exc))}\n")
        return EXIT_FAILED
    print_diagnostics(prepared.diagnostics, stderr)

    resuming = options.get("resume") is not None
    rerun = options.get("rerun")
    if resuming:
        resumed = prepared.out
        assert resumed is not None
        if prepared.set_aside:
            stderr.write(
                f"A partial last record ({prepared.set_aside} bytes) of {resumed} was moved "
                f"to {resumed.name}.partial\n"
            )
        print_diagnostics(prepared.file_diagnostics, stderr)
        why = []
        if prepared.changed_since:
            why.append(f"{prepared.changed_since} because their prompt changed")
        if prepared.retried:
            why.append(f"{prepared.retried} retried after an error")
        if prepared.taken_up:
            why.append(
                f"{prepared.taken_up} conversation(s) going on from where the budget stopped them"
            )
        pending = prepared.auto_pending
        stdout.write(
            f"Resuming {resumed}: {prepared.total} run(s) to do"
            + (f" ({', '.join(why)})" if why else "")
            + (
                f", then more runs of {pending} case(s) whose verdict is not settled "
                "(--repeat auto)"
                if pending
                else ""
            )
            + "\n"
        )
        if prepared.errors_left:
            stdout.write(_errors_left(prepared.errors_left, resumed, cwd) + "\n")
        if not prepared.total and not pending:
            prepared.close()
            stdout.write("Nothing to do: every planned run already has its result.\n")
            return EXIT_OK
    elif rerun is not None:
        print_diagnostics(prepared.file_diagnostics, stderr)
        picked = ", ".join(sorted(options.get("rerun_statuses", ())))
        if not prepared.total:
            stdout.write(f"Nothing to do: no run in {rerun} has status {picked}.\n")
            return EXIT_OK
        into = "appending to it" if prepared.append else f"into {prepared.out}"
        stdout.write(f"Rerunning {prepared.total} run(s) ({picked}) from {rerun}, {into}\n")
    try:
        # the prepared run's own file, else one named for now
        writer = prepared.open_results(default_results_path(cwd, prepared.output_format))
    except AgentVError as exc:
        stderr.write(f"error: {printable(str(exc))}\n")
        return EXIT_FAILED
    assert writer is not None
    stdout.write(f"Output path: {writer.path}\n")
    if verbose:
        for label, workers in prepared.targets:
            stdout.write(f"Using target: {printable(label)} ({workers} at once)\n")
    stdout.flush()

    registration = _register(prepared, writer.path, store, cwd, stderr)
    whole = False
    progress = make_progress(stdout, quiet=quiet, verbose=verbose)
    progress.start(prepared.total)
    try:
        with _collections_spaced():
            run, signum = asyncio.run(_run(prepared, writer, progress))
        whole = run is not None
    except ClusterLostError as exc:  # what finished is in the file: summed up, resumable
        progress.finish()
        from agentv.api import EvalRun

        if isinstance(exc.run, EvalRun):
            stdout.write(render_summary(exc.run.summary, results_path=writer.path) + "\n")
        stderr.write(
            f"error: {printable(str(exc))}\n"
            f"{prepared.finished} of {prepared.total} runs finished; their results are "
            f"in {writer.path}\n"
            f"To finish the run: {_resume_command(paths, options, writer.path, cwd)}\n"
        )
        return EXIT_FAILED
    except AgentVError as exc:  # e.g. a failed healthcheck
        progress.finish()
        stderr.write(f"error: {printable(str(exc))}\n")
        return EXIT_FAILED
    finally:
        writer.close()
        _finish_registration(registration, whole=whole, stderr=stderr)
    progress.finish()
    if run is None:
        done = prepared.finished
        stderr.write(
            f"Interrupted: {done} of {prepared.total} runs finished; "
            f"their results are in {writer.path}\n"
            f"To finish the run: {_resume_command(paths, options, writer.path, cwd)}\n"
        )
        return EXIT_SIGINT if signum == signal.SIGINT else EXIT_SIGTERM

    facts = RunFacts(
        spent_usd=run.spent_usd,
        reused_usd=run.reused_usd,
        unpriced=run.unpriced,
        budget_usd=run.budget_usd,
        pass_threshold=prepared.pass_threshold,
        dry_run=run.dry_run,
        retries=run.retries,
        load=run.load,
        cache_hits=run.cache_hits if prepared.cache else None,
        judge_cache_hits=run.judge_cache_hits,
        requests=run.requests,
        wall_seconds=run.wall_seconds,
        unusable_files=run.unusable_files,
        ran=run.ran if run.whole_file else None,
    )
    print_diagnostics(run.diagnostics_of_file, stderr)
    stdout.write(
        render_summary(
            run.summary, results_path=writer.path, prompts_dir=run.prompts_dir, facts=facts
        )
        + "\n"
    )
    with stopped_by_sigterm():  # SIGTERM while writing leaves no temporary file behind
        written = _outputs(run, writer.path, summary_json, junit, report, cwd, stdout, stderr)
    for label, files in run.artifacts.items():  # e.g. agents' logs, to read later
        stdout.write(f"{label}:\n" + "".join(f"  {i}. {p}\n" for i, p in enumerate(files, 1)))
    if not report:
        stdout.write(f"See every case in a browser: agentv report {_shown(writer.path, cwd)}\n")
    code = exit_code(run, threshold=threshold, allow_errors=allow_errors, stderr=stderr)
    if not written:  # a file asked for is missing: CI must not go on as if it were there
        stderr.write(f"a requested output could not be written: exit code {EXIT_FAILED}\n")
        return EXIT_FAILED
    return code


def _register(
    prepared: PreparedRun, results: Path, store: Path | None, cwd: Path, stderr: TextIO
) -> RunRegistration | None:
    """Register the run in the project's run store; a store that cannot be written is
    said, and the run goes on unregistered."""
    from agentv.api import register_run
    from agentv.errors import AgentVError

    try:
        return register_run(
            prepared, results=results, command=["agentv", *sys.argv[1:]], store=store, cwd=cwd
        )
    except (AgentVError, OSError) as exc:
        stderr.write(
            f"warning: the run is not registered in the run store: {printable(str(exc))}\n"
        )
        return None


def _finish_registration(
    registration: RunRegistration | None, *, whole: bool, stderr: TextIO
) -> None:
    """Complete the run's entry in the store (its figures: the results file's summary)."""
    if registration is None:
        return
    from agentv.errors import AgentVError

    try:
        registration.finish(interrupted=not whole)
    except (AgentVError, OSError) as exc:
        stderr.write(
            f"warning: the run's entry in the run store {registration.store} is not complete: "
            f"{printable(str(exc))}; agentv runs import the results file to complete it\n"
        )


def _outputs(
    run: EvalRun,
    results: Path,
    summary_json: Path | None,
    junit: Path | None,
    report: bool,
    cwd: Path,
    stdout: TextIO,
    stderr: TextIO,
) -> bool:
    """The files asked for besides the results (``--summary-json``, ``--junit``,
    ``--report``) and, under GitHub Actions, annotations; False when one could not be
    written (said on stderr)."""
    from agentv.api import write_summary
    from agentv.errors import AgentVError

    written = True
    if summary_json is not None:
        try:
            target = write_summary(run.summary, cwd / summary_json)
        except AgentVError as exc:
            stderr.write(f"error: {printable(str(exc))}\n")
            written = False
        else:
            stdout.write(f"Summary written to: {target}\n")
    if junit is not None or os.environ.get("GITHUB_ACTIONS") == "true":
        ci = _ci_outputs(results, run, junit=junit, cwd=cwd, stdout=stdout, stderr=stderr)
        written = ci and written
    if report:  # the report of the whole results file, next to it
        from agentv.cli.report import write_report

        written = write_report([results], stdout=stdout, stderr=stderr) == 0 and written
    return written


def _ci_outputs(
    results: Path,
    run: EvalRun,
    *,
    junit: Path | None,
    cwd: Path,
    stdout: TextIO,
    stderr: TextIO,
) -> bool:
    """``--junit``, and under GitHub Actions an annotation per broken case and a summary,
    all from the results file; False when the JUnit file could not be written."""
    from agentv.api import github_annotations, write_junit
    from agentv.errors import AgentVError

    written = True
    if junit is not None:
        try:
            target = write_junit(results, cwd / junit)
        except AgentVError as exc:
            stderr.write(f"error: {printable(str(exc))}\n")
            written = False
        else:
            stdout.write(f"JUnit XML written to: {target}\n")
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return written
    try:
        lines = github_annotations(results, cwd)
    except AgentVError as exc:
        stderr.write(f"error: {printable(str(exc))}\n")
        lines = []
    for line in lines:
        stdout.write(line + "\n")
    summary_file = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary_file:
        s = run.summary
        rate = f"{s.pass_rate:.1%}" if s.pass_rate is not None else "-"
        mean = f"{s.mean:.3f}" if s.mean is not None else "-"
        text = (
            "### agentv eval\n\n| cases | passed | failed | errors | invalid | pass rate | mean |\n"
            "|---|---|---|---|---|---|---|\n"
            f"| {s.total} | {s.ok} | {s.failed} | {s.errors} | {s.invalid} | {rate} | {mean} |\n"
        )
        try:
            with open(summary_file, "a", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            stderr.write(f"error: cannot append to GITHUB_STEP_SUMMARY: {exc.strerror}\n")
    return written


def _rerun_options(
    resume: Path | None,
    rerun_failed: Path | None,
    rerun_errors: Path | None,
    out: Path | None,
    retry_errors: bool = False,
) -> dict[str, Any]:
    """``prepare_run``'s options for --resume / --rerun-*: one of them, or --resume and
    --rerun-errors of the same file (both at once; ``--retry-errors`` is the old spelling of
    that); --out does not go with --resume (the results go to the file resumed)."""
    if retry_errors:
        if resume is None:
            raise typer.BadParameter(
                "goes with --resume FILE; to run a file's errored runs again, give "
                "--rerun-errors FILE",
                param_hint="'--retry-errors'",
            )
        rerun_errors = rerun_errors or resume
    from agentv.api import RERUN_ERRORS, RERUN_FAILED

    both = resume is not None and rerun_errors is not None and rerun_failed is None
    if both and Path(os.path.abspath(rerun_errors)) != Path(os.path.abspath(resume)):
        raise typer.BadParameter(
            "with --resume FILE, --rerun-errors must name the same file (both then run at once)",
            param_hint="'--rerun-errors'",
        )
    given = [
        n
        for n, v in (
            ("--resume", resume),
            ("--rerun-failed", rerun_failed),
            ("--rerun-errors", None if both else rerun_errors),
        )
        if v is not None
    ]
    if len(given) > 1:
        raise typer.BadParameter(f"give one of {', '.join(given)}", param_hint=given[1])
    if resume is not None:
        if out is not None:
            raise typer.BadParameter(
                "--resume appends to the file it resumes; leave out --out", param_hint="'--out'"
            )
        return {"resume": resume, "retry_errors": True} if both else {"resume": resume}
    if rerun_failed is not None:
        return {"rerun": rerun_failed, "rerun_statuses": RERUN_FAILED}
    if rerun_errors is not None:
        return {"rerun": rerun_errors, "rerun_statuses": RERUN_ERRORS}
    return {}


def _errors_left(runs: list[tuple[str, str, str, int | None]], results: Path, cwd: Path) -> str:
    """What a resume leaves as it is: the runs recorded as errors, the first few named (with
    the repeat, as people count them, when the case has several), and the command that runs
    them again."""
    from agentv.api import repeat_label

    shown = [
        eval_id
        + (f" [{target}]" if target else "")
        + (f" {repeat_label(repeat)}" if repeat is not None else "")
        for _, eval_id, target, repeat in runs[:5]
    ]
    more = f" and {len(runs) - 5} more" if len(runs) > 5 else ""
    return (
        f"{len(runs)} run(s) recorded as error, invalid or user_error are kept as they are "
        f"({', '.join(shown)}{more}); to run them again: agentv eval --rerun-errors "
        f"{_shown(results, cwd)}"
    )


def _shown(path: Path, cwd: Path) -> str:
    """``path`` for a command line: relative to ``cwd`` when under it, shell-quoted."""
    import shlex

    try:
        path = path.relative_to(cwd)
    except ValueError:
        pass
    return shlex.quote(str(path))


def _resume_command(paths: list[str], options: dict[str, Any], results: Path, cwd: Path) -> str:
    """The command that finishes an interrupted run: the same cases, targets and repeats,
    appending to the same results file."""
    import shlex

    words = ["agentv", "eval", *(shlex.quote(p) for p in paths)]
    targets = options.get("target") or []
    for name in [targets] if isinstance(targets, str) else targets:
        words += ["--target", shlex.quote(name)]
    for flag, key in (
        ("--targets", "targets_file"),
        ("--repeat", "repeat"),
        ("--max-repeat", "max_repeat"),
        ("--repeat-confidence", "repeat_confidence"),
        ("--eval-id", "eval_id"),
    ):
        if options.get(key) is not None:
            words += [flag, shlex.quote(str(options[key]))]
    if options.get("dry_run"):
        words.append("--dry-run")
    if options.get("cache"):
        words.append("--cache")
    samples = options.get("judge_samples")
    if isinstance(samples, dict):  # the same judges' samples for the runs left
        words += ["--judge-samples", f"{samples['min']}..{samples['max']}"]
        if "margin" in samples:
            words += ["--judge-margin", str(samples["margin"])]
    elif samples is not None:
        words += ["--judge-samples", str(samples)]
    if options.get("on_uncertain") is not None:
        words += ["--on-uncertain", str(options["on_uncertain"])]
    statuses = options.get("rerun_statuses")
    if options.get("rerun") is not None and statuses is not None:
        # a rerun into its own file finishes as it started: the runs still to redo
        flag = "--rerun-errors" if "failed" not in statuses else "--rerun-failed"
        words += [flag, _shown(Path(options["rerun"]), cwd)]
        if Path(options["rerun"]).resolve() != results.resolve():
            words += ["--out", _shown(results, cwd)]  # the same command again
        return " ".join(words)
    words += ["--resume", _shown(results, cwd)]
    if options.get("retry_errors"):
        words += ["--rerun-errors", _shown(results, cwd)]
    return " ".join(words)


def exit_code(run: EvalRun, *, threshold: float | None, allow_errors: bool, stderr: TextIO) -> int:
    """The run's exit code (``EXIT_CODES``), decided in this order: 4 the budget left runs
    unsent (the run is not whole); with ``threshold``, 1 when the graded runs' mean is below
    it (or none was graded); 3 some runs errored or were invalid, 5 only simulated users
    failed (either accepted with ``allow_errors``); 6 some verdicts are uncertain; without
    ``threshold``, 7 when a graded run failed (not on a dry run: a mock answered); else 0.
    Says why on stderr."""
    s = run.summary
    if s.skipped:
        stderr.write(
            f"{s.skipped} run(s) not run: the budget was reached (exit code {EXIT_BUDGET}); "
            "--resume the results file with a larger --budget-usd to run them\n"
        )
        return EXIT_BUDGET
    if threshold is not None and (s.mean is None or s.mean < threshold):
        # the gate is on the graded runs' mean: errors are not scores (docs/results.md)
        if s.mean is None:
            stderr.write(f"No run was graded: the threshold {threshold:.3f} is not met\n")
        else:
            stderr.write(
                f"Mean score {s.mean:.3f} of the {s.graded} graded run(s) is below the "
                f"threshold {threshold:.3f}\n"
            )
        return EXIT_FAILED
    if not run.clean:
        code = EXIT_ERRORS
        what = f"{s.errors} run(s) errored, {s.invalid} invalid"
        if run.unusable_files:
            what += f", {len(run.unusable_files)} eval file(s) could not be used"
        if s.user_errors:
            what += f", {s.user_errors} simulated user(s) failed"
            if not (s.errors or s.invalid or run.unusable_files):
                # only the simulated users failed: the model is not to blame, said apart
                what = f"{s.user_errors} simulated user(s) failed (user_error)"
                code = EXIT_USER_ERRORS
        if not allow_errors:
            stderr.write(f"{what}: exit code {code} (see the summary; --allow-errors to accept)\n")
            return code
        stderr.write(f"{what} (--allow-errors: accepted)\n")
    if s.uncertain:  # never silently a pass (docs/trusting-verdicts.md)
        stderr.write(
            f"{s.uncertain} run(s) uncertain: a judge's samples disagreed about pass or "
            f"fail (exit code {EXIT_UNCERTAIN}); --on-uncertain fail or pass decides them\n"
        )
        return EXIT_UNCERTAIN
    if threshold is None and s.failed and run.dry_run:
        # a mock answered: its failures say nothing of the target (docs/results.md)
        stderr.write(f"{s.failed} of the {s.graded} graded run(s) failed on the dry run's mock\n")
    elif threshold is None and s.failed:
        stderr.write(
            f"{s.failed} of the {s.graded} graded run(s) failed: exit code {EXIT_CASES_FAILED} "
            "(--threshold SCORE gates on the mean score instead)\n"
        )
        return EXIT_CASES_FAILED
    if threshold is not None:
        stderr.write(
            f"Mean score {s.mean:.3f} of the {s.graded} graded run(s) meets the threshold "
            f"{threshold:.3f}\n"
        )
    return EXIT_OK


async def _run(
    prepared: PreparedRun, writer: ResultWriter, progress: Progress
) -> tuple[EvalRun | None, int | None]:
    """Run the plan; SIGINT/SIGTERM cancel it cleanly (finished results are already
    written). Returns the run, or None and the signal that stopped it."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    received: list[int] = []

    def on_signal(signum: int) -> None:
        received.append(signum)
        if task is not None:
            task.cancel()

    installed = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(signum, on_signal, signum)
            installed.append(signum)
        except (NotImplementedError, RuntimeError):  # not on the main thread, or Windows
            pass
    try:
        return await prepared.run(writer=writer, progress=progress), None
    except asyncio.CancelledError:
        if not received:
            raise
        return None, received[0]
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)


#: new objects the garbage collector lets come (less those freed) before it looks at the
#: youngest ones during a run: Python's 700 made it look about once every dozen turns of a
#: live conversation, a twentieth of the run's CPU, and reference counting frees nearly
#: all of a turn's objects anyway (docs/speed.md)
RUN_COLLECTION_THRESHOLD = 10_000


@contextmanager
def _collections_spaced() -> Iterator[None]:
    """The collector's first threshold at ``RUN_COLLECTION_THRESHOLD`` at least while the
    run goes, as it was after (the command line only, as ``_collector_paused``)."""
    before = gc.get_threshold()
    first = before[0] and max(before[0], RUN_COLLECTION_THRESHOLD)  # 0: none, kept
    gc.set_threshold(first, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while the run is planned, then freeze what it built.

    Planning imports the provider SDKs and builds every case: hundreds of thousands of
    objects that all live on, so the collections they trigger find nothing and cost a tenth
    of a second or more in a large run. (The command line only: a library must not freeze a
    caller's objects.)
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        # What exists now (modules, clients, the plan) lives until the end: frozen, the
        # collections during the run no longer walk it.
        gc.freeze()
        if enabled:
            gc.enable()
