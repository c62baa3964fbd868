"""Every command's ``--help`` as CI logs and pipes get it (80 columns, no terminal): it
reads well, and says what the reference page says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from agentv.cli.app import _register, app
from agentv.cli.help import PANEL_ORDER, option_label, panels

#: every test here runs agentv as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

_register()
#: the console script, as people run it (its name starts the usage line)
AGENTV = Path(sys.executable).with_name("agentv")
GROUP = typer.main.get_command(app)


def _commands() -> list[tuple[str, Any]]:
    found = [("", GROUP)]
    for name, command in GROUP.commands.items():
        found.append((name, command))
        for sub, inner in getattr(command, "commands", {}).items():
            found.append((f"{name} {sub}", inner))
    return found


COMMANDS = _commands()


def _help(name: str) -> str:
    """``agentv NAME --help`` in a fresh process at 80 columns, its output a pipe."""
    done = subprocess.run(
        [str(AGENTV), *name.split(), "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "80", "LINES": "24"},
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout


def _context(name: str, command: Any) -> Any:
    parent = GROUP.make_context("agentv", [], resilient_parsing=True)
    ctx = parent
    for word in name.split():
        ctx = command.make_context(word, [], resilient_parsing=True, parent=ctx)
    return ctx


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n or "agentv" for n, _ in COMMANDS])
def test_help_reads_well_at_80_columns(name: str, command: Any) -> None:
    page = _help(name)
    lines = page.splitlines()
    # nothing wider than the terminal, nothing cut, no drawing characters
    assert max(len(line) for line in lines) <= 80, page
    assert "…" not in page and not re.search("[│╭╰─]", page), page
    # the usage line names the arguments as people write them
    usage = lines[0]
    assert usage.startswith(f"Usage: agentv {name}".rstrip() + " "), usage
    assert "{" not in usage and "<" not in usage, usage
    # flags show no type, values no python types
    assert "<bool>" not in page and "<list" not in page and "<str>" not in page, page
    ctx = _context(name, command)
    for _, options in panels(command, ctx):
        for option in options:
            label = option_label(option, ctx)
            # every option's whole label starts a line of its panel
            assert any(line.startswith(f"  {label}") for line in lines), (label, page)


def test_eval_help_is_grouped_in_panels_a_screen_each() -> None:
    page = _help("eval")
    titles = [
        line[:-1] for line in page.splitlines() if line.endswith(":") and not line[0].isspace()
    ]
    assert titles == ["Arguments", *PANEL_ORDER, "Options", "Exit codes"]
    sections = page.split("\n\n")
    sizes = {s.splitlines()[0]: len(s.splitlines()) for s in sections if s.strip()}
    for title in PANEL_ORDER:
        assert sizes[f"{title}:"] <= 24, (title, sizes)  # a screen's worth at most


def test_eval_exit_codes_are_one_entry_each_never_broken_mid_sentence() -> None:
    page = _help("eval")
    codes = page.split("Exit codes:\n", 1)[1]
    entries = re.findall(r"^  (\d+(?: / \d+)?) +(.*(?:\n {5,}.*)*)", codes, re.M)
    assert [code for code, _ in entries] == ["0", "1", "2", "3", "4", "5", "6", "7", "130 / 143"]
    from agentv.cli.eval import EXIT_CODES

    for (code, text), (want_code, want_text) in zip(entries, EXIT_CODES, strict=True):
        assert code == want_code
        assert " ".join(text.split()) == want_text  # the whole sentence, rewrapped only


def test_one_spelling_for_one_idea_across_commands() -> None:
    """The results file is -o/--out and the output format --format wherever they are."""
    for name, command in COMMANDS:
        ctx = _context(name, command)
        shown = {o for _, options in panels(command, ctx) for p in options for o in p.opts}
        assert "--output" not in shown and "--output-format" not in shown, name
        if "--out" in shown:
            assert "-o" in shown, name
    assert {"-o", "--out"} <= {o for p in GROUP.commands["eval"].params for o in p.opts}
    assert {"-o", "--out"} <= {o for p in GROUP.commands["report"].params for o in p.opts}
    assert {"-o", "--out"} <= {o for p in GROUP.commands["regrade"].params for o in p.opts}


def test_a_usage_error_is_plain_text_naming_the_option() -> None:
    done = subprocess.run(
        [str(AGENTV), "eval", "evals/", "--resume", "a.jsonl", "--rerun-errors", "b.jsonl"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "80"},
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        "Usage: agentv eval [OPTIONS] [PATHS]...\n"
        "Try 'agentv eval --help' for help.\n\n"
        "Error: Invalid value for '--rerun-errors': with --resume FILE, --rerun-errors must "
        "name the same file (both then run at once)\n"
    )
