"""What a person sees while a run goes: a live display on a terminal, plain lines elsewhere.

    progress = make_progress()              # live on a TTY, line mode in CI and pipes
    progress.start(total)
    progress.case_started(key, label)       # label: "<eval_id> | <target> [provider=<kind>]"
    progress.case_finished(key, label, status="ok", score=0.75, error=None)
    progress.note("Codex CLI logs: ...")    # printed above the live display
    progress.finish()

The per-case calls run for every case of every run (tens of thousands a second in the
benchmark), so they only update counters; the live display is redrawn by rich's own
refresh thread at a fixed rate, never per call.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from itertools import islice
from typing import TYPE_CHECKING, Protocol, TextIO, runtime_checkable

from agentv.cli.common import printable

if TYPE_CHECKING:
    # rich is imported only when a live display is shown: loading it costs a run that has
    # none (CI, pipes, --quiet) a few hundredths of a second of start-up.
    from rich.console import Console, RenderableType
    from rich.live import Live

REFRESH_PER_SECOND = 8
RUNNING_SHOWN = 5


@runtime_checkable
class Progress(Protocol):
    """Receives run events; implementations decide what, if anything, to show."""

    def start(self, total: int) -> None:
        """The run begins with ``total`` cases."""
        ...

    def case_started(self, key: str, label: str) -> None:
        """Case ``key`` (unique per run) is now running."""
        ...

    def case_finished(
        self,
        key: str,
        label: str,
        *,
        status: str,
        score: float | None,
        error: str | None,
        miss: str | None = None,
    ) -> None:
        """Case ``key`` ended with ``status`` (ok, failed, error, invalid); ``error`` says
        why for the last two, ``miss`` (the first of its evaluators' misses) why a case
        failed."""
        ...

    def note(self, text: str) -> None:
        """Show a line above the progress (log file paths, warnings)."""
        ...

    def finish(self) -> None:
        """The run is over; leave the terminal clean for the summary."""
        ...


def _first_line(text: str) -> str:
    """The first non-blank line, marked when more follows (line mode is one line per case)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return ""
    return lines[0].strip() + (" …" if len(lines) > 1 else "")


def _clock(seconds: float) -> str:
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def case_line(
    marks: dict[str, str],
    label: str,
    status: str,
    score: float | None,
    error: str | None,
    miss: str | None,
) -> str:
    """A finished case on one line, with why it did not pass: ``✗ id | target score=0.400
    miss: <its first miss>``, ``! id | target error: <the error's first line>``."""
    mark = marks.get(status, "?")
    if status in ("ok", "failed", "uncertain"):
        tail = f"score={score:.3f}" if score is not None else status
        line = f"{mark} {label} {tail}"
        if error:  # graded, but an evaluator could not do its job
            line += f" {status}: {_first_line(error)}"
        elif miss and status == "uncertain":
            line += f" uncertain: {_first_line(miss)}"
        elif miss and status == "failed":
            line += f" miss: {_first_line(miss)}"
        return line
    line = f"{mark} {label} {status}"
    return line + f": {_first_line(error)}" if error else line


#: the mark each status gets on screen (and its plain-ASCII stand-in)
MARKS = {
    "ok": "✓",
    "failed": "✗",
    "uncertain": "~",
    "error": "!",
    "invalid": "!",
    "user_error": "?",
    "skipped": "-",
}
ASCII_MARKS = {
    "ok": "+",
    "failed": "x",
    "uncertain": "~",
    "error": "!",
    "invalid": "!",
    "user_error": "?",
    "skipped": "-",
}


class _Counters:
    """The run's counts, shared by every kind of display."""

    def __init__(self) -> None:
        self.total = 0
        self.done = 0
        self.ok = 0
        self.failed = 0
        self.errors = 0  # error and invalid
        self.started_at: float | None = None

    def start(self, total: int) -> None:
        """Reset the counts for a run of ``total`` cases."""
        self.total = total
        self.done = self.ok = self.failed = self.errors = 0
        self.started_at = time.monotonic()

    def more(self, runs: int) -> None:
        """``runs`` more to do (a round of ``--repeat auto``)."""
        self.total += runs

    def count(self, status: str) -> None:
        """One more case ended with ``status``."""
        self.done += 1
        if status == "ok":
            self.ok += 1
        elif status in ("failed", "uncertain"):  # not passed (an uncertain one: said apart)
            self.failed += 1
        elif status != "skipped":  # not run (the budget): neither a score nor an error
            self.errors += 1

    def elapsed(self) -> float:
        """Seconds since ``start``."""
        return 0.0 if self.started_at is None else time.monotonic() - self.started_at


class LineProgress(_Counters):
    """One plain line per finished case (CI logs, pipes); nothing when ``quiet``.

    Lines go to the stream with plain ``write`` calls (no markup parsing) and are flushed
    at once, so a CI log shows each case as it ends.
    """

    def __init__(self, stream: TextIO, *, quiet: bool = False, verbose: bool = False) -> None:
        super().__init__()
        self.stream = stream
        self.quiet = quiet
        self.verbose = verbose  # whole error messages, not their first line
        self._marks = MARKS
        try:
            "".join(MARKS.values()).encode(getattr(stream, "encoding", None) or "utf-8")
        except (UnicodeEncodeError, LookupError):
            self._marks = ASCII_MARKS  # e.g. an ASCII-only CI console

    def case_started(self, key: str, label: str) -> None:
        """Nothing is shown for a started case."""

    def case_finished(
        self,
        key: str,
        label: str,
        *,
        status: str,
        score: float | None,
        error: str | None,
        miss: str | None = None,
    ) -> None:
        """Count the case and, unless quiet, print its line: ``✓`` ok, ``✗`` failed (below
        the pass threshold), ``!`` error or invalid, with the reason."""
        self.count(status)
        if self.quiet:
            return
        line = case_line(self._marks, label, status, score, error, miss)
        if self.verbose and error and error.strip() != _first_line(error):
            line += "\n" + "\n".join(f"    {x}" for x in error.strip().splitlines())
        self.stream.write(printable(line) + "\n")  # ids and errors come from users' files
        self.stream.flush()

    def note(self, text: str) -> None:
        """Print ``text`` as it is, control characters escaped (also when quiet: notes are
        not per case)."""
        text = printable(text)
        self.stream.write(text if text.endswith("\n") else text + "\n")
        self.stream.flush()

    def finish(self) -> None:
        """Flush the stream."""
        self.stream.flush()


class LiveProgress(_Counters):
    """A rich live display: done/total, a bar, errors, elapsed, ETA and the running cases."""

    def __init__(
        self,
        console: Console,
        *,
        refresh_per_second: float = REFRESH_PER_SECOND,
        running_shown: int = RUNNING_SHOWN,
    ) -> None:
        super().__init__()
        self.console = console
        self.running_shown = running_shown
        self._refresh_per_second = refresh_per_second
        self._running: dict[str, tuple[str, float]] = {}  # key -> (label, started), oldest first
        self._score_sum = 0.0
        self._scored = 0
        self._last_error: str | None = None
        # The refresh thread reads what the per-case calls change.
        self._lock = threading.Lock()
        self._live: Live | None = None

    def start(self, total: int) -> None:
        """Reset the counts and start drawing."""
        super().start(total)
        from rich.live import Live

        self._live = Live(
            _View(self),
            console=self.console,
            refresh_per_second=self._refresh_per_second,
            transient=True,  # the summary replaces the display
        )
        self._live.start(refresh=True)

    def case_started(self, key: str, label: str) -> None:
        """Add the case to the running list (shown at the next refresh)."""
        with self._lock:
            self._running[key] = (label, time.monotonic())

    def case_finished(
        self,
        key: str,
        label: str,
        *,
        status: str,
        score: float | None,
        error: str | None,
        miss: str | None = None,
    ) -> None:
        """Count the case (shown at the next refresh); a case that did not pass also gets its
        line above the display, with why."""
        with self._lock:
            self._running.pop(key, None)
            self.count(status)
            if status in ("error", "invalid", "user_error"):
                self._last_error = f"{label}: {_first_line(error)}" if error else label
            if score is not None:
                self._score_sum += score
                self._scored += 1
        if status not in ("ok", "skipped"):  # runs left by a budget: the summary counts them
            self.note(case_line(MARKS, label, status, score, error, miss))

    def note(self, text: str) -> None:
        """Print ``text`` above the display, verbatim (no markup, no wrapping; control
        characters escaped)."""
        from rich.text import Text

        self.console.print(Text(printable(text.rstrip("\n"))), soft_wrap=True, highlight=False)

    def finish(self) -> None:
        """Remove the display and print one closing line."""
        if self._live is None:
            return
        from rich.text import Text

        self._live.stop()
        self._live = None
        line = f"Finished {self.done}/{self.total} eval cases in {_clock(self.elapsed())}"
        line += f" ({self.ok} ok, {self.failed} failed, {self.errors} errors)"
        self.console.print(Text(line), soft_wrap=True, highlight=False)

    def render(self) -> RenderableType:
        """The display as it is now (called by rich's refresh thread)."""
        from rich.console import Group
        from rich.text import Text

        with self._lock:
            counts = (self.ok, self.failed, self.errors)
            done, total = self.done, self.total
            running_count = len(self._running)
            running = list(islice(self._running.values(), self.running_shown))
            mean = self._score_sum / self._scored if self._scored else None
            last_error = self._last_error
        elapsed = self.elapsed()
        now = time.monotonic()
        eta = None
        if done and total > done:
            eta = _clock(elapsed / done * (total - done))
        elif not done:
            eta = "--:--"
        header = Text(
            status_line(
                self.console.width, done, total, counts, mean=mean, elapsed=elapsed, eta=eta
            ),
            no_wrap=True,
            overflow="ellipsis",
        )

        rows: list[RenderableType] = [header]
        for label, since in running:
            line = Text("  ↻ ", style="cyan")
            line.append(printable(label))
            line.append(f"  {now - since:.1f}s", style="dim")
            line.no_wrap = True
            line.overflow = "ellipsis"
            rows.append(line)
        if running_count > len(running):
            rows.append(Text(f"  … and {running_count - len(running)} more running", style="dim"))
        if last_error:
            line = Text("  last failure: ", style="red")
            line.append(printable(last_error))
            line.no_wrap = True
            line.overflow = "ellipsis"
            rows.append(line)
        return Group(*rows)


def status_line(
    width: int,
    done: int,
    total: int,
    counts: tuple[int, int, int],
    *,
    mean: float | None = None,
    elapsed: float = 0.0,
    eta: str | None = None,
) -> str:
    """The live display's first line, in at most ``width`` columns: the least useful parts
    go first (the title, the mean, the elapsed time, the bar's width), the counts last."""
    ok, failed, errors = counts
    pct = f" {100 * done // total}%" if total else ""
    parts = {
        "title": "Running evals",
        "done": f"{done}/{total}{pct}",
        "counts": f"✓{ok} ✗{failed} !{errors}",
        "mean": f"mean {mean:.3f}" if mean is not None else "",
        "elapsed": f"elapsed {_clock(elapsed)}",
        "eta": f"ETA {eta}" if eta else "",
    }
    drop_order = ["title", "mean", "elapsed", "eta"]
    bar_max, bar_min = 30, 10

    def text(bar: int) -> str:
        filled = (bar * done // total) if total else 0
        bar_text = "[" + "#" * filled + "-" * (bar - filled) + "]" if bar else ""
        shown = [
            parts["title"],
            bar_text,
            *(parts[k] for k in ("done", "counts", "mean", "elapsed", "eta")),
        ]
        return " ".join(p for p in shown if p)

    while True:
        fixed = len(text(0))
        bar = min(bar_max, max(0, width - fixed - 3))
        if bar >= bar_min or not drop_order:
            return text(bar if bar >= bar_min else 0)[:width]
        parts[drop_order.pop(0)] = ""


class _View:
    """Hands rich a fresh rendering of the progress at every refresh."""

    def __init__(self, progress: LiveProgress) -> None:
        self._progress = progress

    def __rich__(self) -> RenderableType:
        return self._progress.render()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def make_progress(
    stream: TextIO | None = None,
    *,
    interactive: bool | None = None,
    quiet: bool = False,
    verbose: bool = False,
    console: Console | None = None,
) -> LineProgress | LiveProgress:
    """The right display for ``stream`` (default: standard output).

    Interactive (a live display) when the stream is a terminal and ``CI`` is unset or empty;
    ``interactive`` forces the choice. ``quiet`` prints nothing per case (benchmarks).
    ``console`` lets the live display share the caller's rich console.
    """
    stream = stream if stream is not None else sys.stdout
    if interactive is None:
        interactive = (
            _is_terminal(stream)
            and not os.environ.get("CI")
            and os.environ.get("TERM", "").lower() != "dumb"
        )
    if quiet or not interactive:
        return LineProgress(stream, quiet=quiet, verbose=verbose)
    if console is None:
        from rich.console import Console

        console = Console(file=stream, force_terminal=True, highlight=False)
    return LiveProgress(console)
