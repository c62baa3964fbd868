"""Progress: exact lines for CI and pipes, a live display on terminals."""

from __future__ import annotations

import io
import re
import time

import pytest
from rich.console import Console

from agentv.cli.progress import LineProgress, LiveProgress, Progress, make_progress


class FakeTTY(io.StringIO):
    """A text stream that claims to be a terminal."""

    def isatty(self) -> bool:
        return True


class AsciiStream(io.StringIO):
    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "ascii"


LABEL = "case-1 | gpt [provider=openai]"


def test_line_mode_prints_one_exact_line_per_finished_case() -> None:
    out = io.StringIO()
    progress = make_progress(out, interactive=False)
    assert isinstance(progress, LineProgress) and isinstance(progress, Progress)
    progress.start(4)
    progress.case_started("k1", LABEL)
    assert out.getvalue() == ""  # nothing for started cases
    progress.case_finished("k1", LABEL, status="ok", score=0.75, error=None)
    progress.case_finished(
        "k2",
        "case-2 | t [provider=cli]",
        status="failed",
        score=0.25,
        error=None,
        miss="does not mention\nthe refund",
    )
    progress.case_finished(
        "k3", "case-3 | t [provider=cli]", status="error", score=0.0, error="HTTP 500\nbody: oops"
    )
    progress.case_finished(
        "k4", "case-4 | t [provider=cli]", status="invalid", score=None, error=None
    )
    progress.case_finished(
        "k5",
        "case-5 | t [provider=cli]",
        status="error",
        score=0.5,
        error="evaluator 'rx' could not grade: bad pattern",
    )
    progress.note("Codex CLI logs: a.log")
    progress.finish()
    assert out.getvalue() == (
        "✓ case-1 | gpt [provider=openai] score=0.750\n"
        "✗ case-2 | t [provider=cli] score=0.250 miss: does not mention …\n"
        "! case-3 | t [provider=cli] error: HTTP 500 …\n"
        "! case-4 | t [provider=cli] invalid\n"
        "! case-5 | t [provider=cli] error: evaluator 'rx' could not grade: bad pattern\n"
        "Codex CLI logs: a.log\n"
    )
    assert (progress.done, progress.ok, progress.failed, progress.errors) == (5, 1, 1, 3)


def test_verbose_line_mode_prints_the_whole_error() -> None:
    out = io.StringIO()
    progress = make_progress(out, interactive=False, verbose=True)
    progress.case_finished("k", "c | t", status="error", score=0.0, error="HTTP 500\nbody: oops")
    assert out.getvalue() == "! c | t error: HTTP 500 …\n    HTTP 500\n    body: oops\n"


def test_line_mode_does_not_interpret_markup() -> None:
    out = io.StringIO()
    progress = make_progress(out, interactive=False)
    progress.start(1)
    progress.case_finished("k", "[bold]x[/bold] | t", status="error", score=None, error="[red]no")
    assert out.getvalue() == "! [bold]x[/bold] | t error: [red]no\n"


def test_quiet_prints_nothing_per_case_but_still_counts_and_notes() -> None:
    out = FakeTTY()
    progress = make_progress(out, quiet=True)
    assert isinstance(progress, LineProgress)
    progress.start(2)
    progress.case_started("a", LABEL)
    progress.case_finished("a", LABEL, status="ok", score=1.0, error=None)
    progress.case_finished("b", LABEL, status="error", score=None, error="x")
    progress.note("warning: something")
    progress.finish()
    assert out.getvalue() == "warning: something\n"
    assert (progress.done, progress.errors) == (2, 1)


def test_ascii_only_streams_get_ascii_marks() -> None:
    out = AsciiStream()
    progress = make_progress(out, interactive=False)
    progress.case_finished("a", "a | t", status="ok", score=1.0, error=None)
    progress.case_finished("b", "b | t", status="failed", score=0.1, error=None)
    progress.case_finished("c", "c | t", status="error", score=None, error="bad")
    assert out.getvalue() == "+ a | t score=1.000\nx b | t score=0.100\n! c | t error: bad\n"


def test_mode_follows_the_terminal_and_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert isinstance(make_progress(FakeTTY()), LiveProgress)
    assert isinstance(make_progress(io.StringIO()), LineProgress)  # a pipe or file
    monkeypatch.setenv("CI", "true")
    assert isinstance(make_progress(FakeTTY()), LineProgress)
    monkeypatch.setenv("CI", "")
    assert isinstance(make_progress(FakeTTY()), LiveProgress)
    monkeypatch.setenv("TERM", "dumb")
    assert isinstance(make_progress(FakeTTY()), LineProgress)


def _text(renderable: object) -> str:
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(renderable)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_live_display_shows_counts_running_cases_and_errors() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120, color_system=None)
    progress = make_progress(out, interactive=True, console=console)
    assert isinstance(progress, LiveProgress)
    progress.start(3)
    try:
        progress.case_started("k1", "first | gpt [provider=openai]")
        progress.case_started("k2", "second | gpt [provider=openai]")
        progress.case_started("k3", "third | gpt [provider=openai]")
        progress.case_finished(
            "k1", "first | gpt [provider=openai]", status="ok", score=1.0, error=None
        )
        progress.case_finished(
            "k2", "second | gpt [provider=openai]", status="error", score=None, error="HTTP 429"
        )
        view = _text(progress.render())
        assert "2/3" in view and "66%" in view
        assert "✓1 ✗0 !1" in view and "mean 1.000" in view
        assert "third | gpt [provider=openai]" in view  # still running
        assert "first |" not in view.split("\n", 1)[1].split("last failure")[0]
        assert "last failure: second | gpt [provider=openai]: HTTP 429" in view
        assert "elapsed 0:00:0" in view and "ETA" in view
        progress.note("Codex CLI logs: [x].log")
        progress.case_finished(
            "k3", "third | gpt [provider=openai]", status="failed", score=0.5, error=None
        )
    finally:
        progress.finish()
    progress.finish()  # twice is harmless
    text = out.getvalue()
    assert "0/3" in text  # drawn at start, by rich itself
    assert "Codex CLI logs: [x].log" in text  # printed verbatim above the display
    assert "Finished 3/3 eval cases in 0:00:0" in text
    assert "(1 ok, 1 failed, 1 errors)" in text


def test_running_list_is_capped() -> None:
    progress = LiveProgress(Console(file=io.StringIO(), force_terminal=True), running_shown=2)
    progress.start(10)
    try:
        for i in range(6):
            progress.case_started(f"k{i}", f"case-{i}")
        view = _text(progress.render())
    finally:
        progress.finish()
    assert "case-0" in view and "case-1" in view and "case-2" not in view
    assert "… and 4 more running" in view


def test_per_case_calls_do_not_render() -> None:
    progress = LiveProgress(Console(file=io.StringIO(), force_terminal=True), refresh_per_second=10)
    renders = 0
    original = progress.render

    def counting_render() -> object:
        nonlocal renders
        renders += 1
        return original()

    progress.render = counting_render  # type: ignore[method-assign]
    n = 20_000
    progress.start(n)
    began = time.monotonic()
    try:
        for i in range(n):
            key = f"k{i}"
            progress.case_started(key, key)
            progress.case_finished(key, key, status="ok", score=1.0, error=None)
    finally:
        spent = time.monotonic() - began
        progress.finish()
    assert progress.done == n
    # Redraws come from rich's timer (10 per second), never one per call.
    assert renders <= 10 * spent + 5


def test_live_display_prints_each_case_that_did_not_pass_above_it() -> None:
    out = FakeTTY()
    console = Console(file=out, force_terminal=True, width=100, color_system=None)
    progress = LiveProgress(console, refresh_per_second=50)
    progress.start(4)
    progress.case_finished("a", "a | t", status="ok", score=1.0, error=None)
    progress.case_finished("b", "b | t", status="failed", score=0.4, error=None, miss="no 42")
    progress.case_finished("c", "c | t", status="error", score=None, error="HTTP 500\nbody")
    progress.case_finished("d", "d | t", status="invalid", score=None, error="no target 'x'")
    progress.finish()
    # the display's own redraws (cursor codes) aside, the lines printed above it
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "\n", out.getvalue())
    shown = [line.strip() for line in plain.splitlines()]
    assert "✗ b | t score=0.400 miss: no 42" in shown
    assert "! c | t error: HTTP 500 …" in shown
    assert "! d | t invalid: no target 'x'" in shown
    assert not any(line.startswith("✓ a") for line in shown)  # a pass needs no line
