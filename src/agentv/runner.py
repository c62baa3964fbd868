"""What ``agentv eval`` does, end to end: plan, run, summarise, decide the exit code."""

from __future__ import annotations

import asyncio
import gc
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from agentv.cache import ResponseCache
from agentv.dumps import PromptDumper
from agentv.errors import AgentVError, Diagnostic, InputError
from agentv.evalfile.files import FileStore, find_repo_root
from agentv.evalfile.loader import LoadContext
from agentv.orchestrator import Orchestrator, RunSettings, effective_workers
from agentv.planning import DryRun, Plan, TargetRegistry, expand_eval_paths, plan_run
from agentv.progress import make_progress
from agentv.summary import SummaryCollector, render_summary
from agentv.writers import default_results_path, open_writer

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


@dataclass
class EvalOptions:
    """``agentv eval`` options (see the command's help for their meaning)."""

    paths: list[str]
    target: str = "default"
    targets: Path | None = None
    eval_id: str | None = None
    out: Path | None = None
    output_format: str = "jsonl"
    workers: int | None = None
    dry_run: bool = False
    dry_run_delay: float = 0
    dry_run_delay_min: float = 0
    dry_run_delay_max: float = 0
    agent_timeout: float = 120
    max_retries: int = 2
    cache: bool = False
    dump_prompts: str | None = None
    threshold: float | None = None
    allow_outside_root: bool = False
    verbose: bool = False
    quiet: bool = False


def _print_diagnostics(diags: list[Diagnostic], err: TextIO) -> None:
    for d in diags:
        err.write(d.format() + "\n")


def run_eval_command(
    opts: EvalOptions, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run ``agentv eval``; returns the process exit code. Never raises for user errors."""
    out = out or sys.stdout
    err = err or sys.stderr
    cwd = Path.cwd().resolve()
    try:
        with _collector_paused():
            plan, registry, settings = _prepare(opts, cwd, err)
    except InputError as exc:
        if exc.diagnostics:
            _print_diagnostics(exc.diagnostics, err)
        else:
            err.write(f"error: {exc}\n")
        return EXIT_FAILED
    except AgentVError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_FAILED
    if not plan.total:
        err.write("error: no eval cases to run (check --eval-id and the messages above)\n")
        return EXIT_FAILED

    fmt = opts.output_format.strip().lower()
    try:
        path = (cwd / opts.out) if opts.out else default_results_path(cwd, fmt)
        writer = open_writer(path, fmt)
    except AgentVError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_FAILED
    out.write(f"Output path: {writer.path}\n")
    if opts.verbose:
        targets = plan.targets()
        for t in targets:
            out.write(f"Using target: {t.label}\n")
        out.write(f"Using {effective_workers(settings, targets)} worker(s)\n")
    out.flush()

    collector = SummaryCollector()
    progress = make_progress(out, quiet=opts.quiet)
    orchestrator = Orchestrator(
        registry, settings, writer=writer, collector=collector, progress=progress
    )
    progress.start(plan.total)
    code = EXIT_OK
    try:
        code = asyncio.run(_run(orchestrator, plan, registry))
    except AgentVError as exc:  # e.g. a failed healthcheck
        progress.finish()
        err.write(f"error: {exc}\n")
        return EXIT_FAILED
    finally:
        writer.close()
    progress.finish()

    summary = collector.summary()
    prompts_dir = settings.dumper.folder if settings.dumper and settings.dumper.count else None
    out.write(render_summary(summary, results_path=writer.path, prompts_dir=prompts_dir) + "\n")
    for label, files in _artifacts(registry).items():  # e.g. agents' logs, to read later
        out.write(f"{label}:\n" + "".join(f"  {i}. {p}\n" for i, p in enumerate(files, 1)))
    if settings.cache is not None:
        stats = orchestrator.stats
        out.write(f"Cache: {stats.cache_hits} answers reused, {stats.requests} requests sent\n")
    if code != EXIT_OK:
        done = orchestrator.stats.finished
        err.write(
            f"Interrupted: {done} of {plan.total} cases finished; "
            f"their results are in {writer.path}\n"
        )
        return code
    if opts.threshold is not None and summary.mean < opts.threshold:
        err.write(f"Mean score {summary.mean:.3f} is below the threshold {opts.threshold:.3f}\n")
        return EXIT_FAILED
    return EXIT_OK


def _artifacts(registry: TargetRegistry) -> dict[str, list[Path]]:
    """Files the run's targets left for people to read, grouped under each kind's label."""
    found: dict[str, list[Path]] = {}
    for t in registry.all_targets():
        if t.provider.artifacts:
            found.setdefault(t.provider.artifacts_label, []).extend(t.provider.artifacts)
    return found


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while the run is planned, then freeze what it built.

    Planning imports the provider SDKs and builds every case: hundreds of thousands of
    objects that all live on, so the collections they trigger find nothing and cost a tenth
    of a second or more in a large run.
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


def _prepare(opts: EvalOptions, cwd: Path, err: TextIO) -> tuple[Plan, TargetRegistry, RunSettings]:
    from agentv.env import load_env_file

    files = expand_eval_paths(opts.paths, cwd)
    load_env_file(find_repo_root(files[0].parent, cwd), cwd)
    dry = (
        DryRun(opts.dry_run_delay, opts.dry_run_delay_min, opts.dry_run_delay_max)
        if opts.dry_run
        else None
    )
    registry = TargetRegistry(
        cwd=cwd, targets_path=(cwd / opts.targets) if opts.targets else None, dry_run=dry
    )
    context = LoadContext(store=FileStore(cwd=cwd), allow_outside_root=opts.allow_outside_root)
    plan = plan_run(files, registry, cli_target=opts.target, eval_id=opts.eval_id, context=context)
    _print_diagnostics(plan.diagnostics, err)
    if opts.eval_id is not None and not plan.total:
        raise InputError(f"no case with id {opts.eval_id!r} in {', '.join(map(str, files))}")
    settings = RunSettings(
        workers=opts.workers,
        agent_timeout=opts.agent_timeout if opts.agent_timeout > 0 else None,
        max_retries=max(0, opts.max_retries),
        cache=ResponseCache(cwd / ".agentv" / "cache") if opts.cache else None,
        dumper=PromptDumper(cwd / opts.dump_prompts) if opts.dump_prompts else None,
    )
    return plan, registry, settings


async def _run(orchestrator: Orchestrator, plan: Plan, registry: TargetRegistry) -> int:
    """Run the plan; SIGINT/SIGTERM cancel it cleanly (finished results are already written)."""
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
        await orchestrator.run(plan.jobs(), plan.targets())
        return EXIT_OK
    except asyncio.CancelledError:
        if not received:
            raise
        return EXIT_SIGINT if received[0] == signal.SIGINT else EXIT_SIGTERM
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
        await registry.aclose()


__all__ = ["EvalOptions", "run_eval_command"]
