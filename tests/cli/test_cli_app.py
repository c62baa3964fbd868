"""The command line's entry point: what each invocation imports, and the command list."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agentv
from support.cli import agentv_cli, invoke_cli

COMMANDS = ["eval", "validate", "render", "init", "compare", "report"]

# Runs the console-script entry point with the given arguments, then prints which command
# modules were imported (as JSON, on the last line of stdout).
PROBE = """
import json, sys
sys.argv = ["agentv", *sys.argv[1:]]
from agentv.cli.app import main
code = 0
try:
    main()
except SystemExit as exit:
    code = exit.code or 0
loaded = sorted(m.rsplit(".", 1)[1] for m in sys.modules if m.startswith("agentv.cli."))
print(json.dumps({"code": code, "loaded": loaded}))
"""


def _probe(*args: str) -> tuple[dict[str, object], str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60
    )
    *output, last = done.stdout.rstrip("\n").split("\n")
    return json.loads(last), "\n".join(output) + done.stderr


@pytest.mark.slow
def test_a_command_imports_only_its_own_module() -> None:
    found, output = _probe("eval", "--help")
    assert found["code"] == 0
    assert "--target" in output and "Exit codes" in output  # eval's options and epilog
    loaded = set(found["loaded"])  # type: ignore[arg-type]
    assert "eval" in loaded
    assert not loaded & {"compare", "init", "render", "report", "validate"}


@pytest.mark.slow
def test_help_lists_every_command_in_order() -> None:
    found, output = _probe("--help")
    assert found["code"] == 0
    positions = [output.find(f" {name} ") for name in COMMANDS]
    assert -1 not in positions and positions == sorted(positions), output


@pytest.mark.slow
def test_the_command_list_shows_each_summary_unbroken(tmp_path: Path) -> None:
    # each summary is its docstring's first paragraph as one sentence, wrapped to the
    # page only: a break left in one would be the docstring's
    done = agentv_cli(tmp_path, "--help", env={"COLUMNS": "400", "NO_COLOR": "1"})
    listed: dict[str, str] = {}
    name = ""
    for line in done.stdout.split("Commands:\n", 1)[1].splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            name, _, text = line.strip().partition(" ")
            listed[name] = text.strip()
        elif line.strip():
            listed[name] += " " + line.strip()
    assert list(listed) == [n for n in listed if n], done.stdout
    assert set(COMMANDS) <= set(listed), done.stdout
    assert all(text.endswith(".") for text in listed.values()), done.stdout
    assert "  " not in "".join(listed.values())
    assert "missing cases, the mean score change" in listed["compare"]


@pytest.mark.slow
def test_version_needs_no_command_module() -> None:
    found, output = _probe("--version")
    assert output.strip() == agentv.__version__
    assert not set(found["loaded"]) & set(COMMANDS)  # type: ignore[arg-type]


@pytest.mark.slow
def test_an_unknown_command_is_a_usage_error_with_every_command_known() -> None:
    found, output = _probe("evl", "x.yaml")
    assert found["code"] == 2
    assert "No such command" in output and "evl" in output


@pytest.mark.slow  # its run asks git for the commit it is on
def test_a_run_looks_for_garbage_less_often_and_puts_the_setting_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """During ``agentv eval`` the collector's first threshold is raised (a run's turns make
    dozens of short-lived objects each); the caller's setting is back afterwards."""
    from agentv.api import PreparedRun
    from agentv.cli.eval import RUN_COLLECTION_THRESHOLD

    seen: list[tuple[int, int, int]] = []
    original = PreparedRun.run

    async def spying(self: PreparedRun, **options: Any) -> Any:
        seen.append(gc.get_threshold())
        return await original(self, **options)

    monkeypatch.setattr(PreparedRun, "run", spying)
    (tmp_path / ".agentv").mkdir()
    (tmp_path / ".agentv" / "targets.yaml").write_text(
        "$schema: agentv-targets-v2.2\ntargets:\n  - {name: default, provider: mock, response: hi}\n",
        encoding="utf-8",
    )
    suite = tmp_path / "suite.yaml"
    suite.write_text(
        "$schema: agentv-eval-v2\nevalcases:\n  - id: one\n    outcome: says hi\n"
        "    input_messages: [{role: user, content: Hi}]\n"
        "    evaluators: [{type: contains, value: hi}]\n",
        encoding="utf-8",
    )
    before = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        result = invoke_cli("eval", str(suite), "--out", str(tmp_path / "r.jsonl"))
        assert result.exit_code == 0, result.output
        assert seen == [(RUN_COLLECTION_THRESHOLD, 10, 10)]
        assert gc.get_threshold() == (700, 10, 10)
        gc.set_threshold(0, 10, 10)  # collections turned off by the caller stay off
        seen.clear()
        result = invoke_cli("eval", str(suite), "--out", str(tmp_path / "s.jsonl"))
        assert result.exit_code == 0, result.output
        assert seen == [(0, 10, 10)] and gc.get_threshold() == (0, 10, 10)
    finally:
        gc.set_threshold(*before)
