"""What several commands share: options written once, so they read the same everywhere."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer

from agentv.cli.console_text import printable, printable_all

__all__ = [
    "ALLOW_OUTSIDE_ROOT_HELP",
    "EXIT_SIGTERM",
    "AllowOutsideRoot",
    "printable",
    "printable_all",
    "stopped_by_sigterm",
]

#: the exit code of a command stopped by SIGTERM
EXIT_SIGTERM = 143

#: what ``--allow-outside-root`` does, said alike by every command that takes it
ALLOW_OUTSIDE_ROOT_HELP = (
    "Let eval files attach files, and code evaluators and tools run, outside the project."
)

#: ``--allow-outside-root``, for the commands that read eval files
AllowOutsideRoot = Annotated[
    bool, typer.Option("--allow-outside-root", help=ALLOW_OUTSIDE_ROOT_HELP)
]


def format_usd(value: float | None) -> str:
    """``$0.0123``: dollars and cents from $1, four decimals below, two significant
    digits below $0.0001; ``?`` for unknown."""
    if value is None:
        return "?"
    if value == 0:
        return "$0"
    if value >= 1:
        return f"${value:,.2f}"
    return f"${value:.4f}" if value >= 0.0001 else f"${value:.2g}"


@contextmanager
def stopped_by_sigterm() -> Iterator[None]:
    """While the block writes files, SIGTERM raises ``SystemExit(143)`` instead of ending
    the process where it stands: a file being written is then left out whole (its
    temporary file removed), as Ctrl-C leaves it."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals are the main thread's: nothing to install
        return

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(EXIT_SIGTERM)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def judge_samples_value(text: str | None, margin: float | None) -> int | dict[str, Any] | None:
    """``--judge-samples N`` or ``MIN..MAX`` (with ``--judge-margin``) as the run option;
    ``typer.BadParameter`` for anything else."""
    if text is None:
        if margin is not None:
            raise typer.BadParameter(
                "goes with --judge-samples MIN..MAX", param_hint="'--judge-margin'"
            )
        return None
    low, sep, high = text.strip().partition("..")
    try:
        if not sep:
            if margin is not None:
                raise typer.BadParameter(
                    "goes with --judge-samples MIN..MAX (N samples are always N)",
                    param_hint="'--judge-margin'",
                )
            return int(low)
        rule: dict[str, Any] = {"min": int(low), "max": int(high)}
    except ValueError:
        raise typer.BadParameter(
            f"a number of samples (3) or MIN..MAX (1..5), not {text!r}",
            param_hint="'--judge-samples'",
        ) from None
    if margin is not None:
        rule["margin"] = margin
    return rule
