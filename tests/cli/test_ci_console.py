"""What agentv prints from files and agents cannot act on a CI log: under GitHub Actions, a
line that starts with `::` (after blanks) is a workflow command and `##[` anywhere starts
one of the older form. A case id and an agent's stderr were reproduced putting `::error`
and `::add-mask::` lines on stdout; here no line agentv prints from such text can start
one, while agentv's own annotations still do. Pull-request markdown from `compare` shows
ids as code: no HTML, no mention."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from agentv.cli.console_text import printable, printable_json
from support.cli import agentv_cli
from support.files import write
from support.results import rows

INJECTED = "x\n::error file=evil.py,line=1::INJECTED\n::add-mask::foo\n  ##[warning]old"
TARGETS = """\
$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: cli
    command_template: printf '%s' answer
  - name: broken
    provider: cli
    command_template: sh -c 'printf "line1\\n::warning::X\\n  ::notice::Y\\n" >&2; exit 1'
"""


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("::error::x", "\\x3a:error::x"),
        ("  ::error::x", "  \\x3a:error::x"),
        ("\u3000\u00a0::x::y", "\u3000\u00a0\\x3a:x::y"),  # blanks .NET trims too
        ("ok\n::add-mask::s\nok", "ok\n\\x3a:add-mask::s\nok"),
        ("text ##[error]x", "text #\\x23[error]x"),
        ("a::b and : :: c", "a::b and : :: c"),  # not at a line's start: not a command
        ("lone \ud800 half", "lone \\ud800 half"),
        ("\x1b[2J", "\\x1b[2J"),
    ],
)
def test_printable_neutralises_workflow_commands(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_printable_json_means_the_same_json() -> None:
    value = {"id": "##[error]x", "half": "\ud800", "cmd": "\n::error::x"}
    text = printable_json(json.dumps(value, indent=2, ensure_ascii=False))
    assert "##[" not in text and "\ud800" not in text
    assert not any(line.lstrip().startswith("::") for line in text.splitlines())
    assert json.loads(text) == value


def _commands(text: str) -> list[str]:
    """The lines GitHub Actions would take as workflow commands."""
    return [
        line
        for line in text.splitlines()
        if line.strip().startswith("::") or "##[" in line  # .NET trims blanks first
    ]


@pytest.mark.slow
def test_no_line_from_a_file_or_an_agent_starts_a_workflow_command(repo: Path) -> None:
    write(repo, ".agentv/targets.yaml", TARGETS)
    evil = json.dumps(INJECTED)  # a double-quoted YAML string
    write(
        repo,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        f"  - id: {evil}\n    outcome: x\n    input_messages: [{{role: user, content: hi}}]\n"
        "    evaluators: [{type: contains, value: zzz}]\n"
        f"  - id: {json.dumps(INJECTED + '-2')}\n    outcome: x\n"
        "    input_messages: [{role: user, content: hi}]\n"
        "    execution: {target: broken}\n    evaluators: [{type: contains, value: a}]\n",
    )
    env = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(repo / "summary.md")}
    proc = agentv_cli(
        repo, "eval", "evals", "--out", "r.jsonl", "--junit", "j.xml", "--verbose", env=env
    )
    assert proc.returncode == 3, proc.stderr
    records = rows(repo / "r.jsonl")
    assert {r["eval_id"] for r in records} == {INJECTED, INJECTED + "-2"}  # kept exactly
    # agentv's own annotations: one per case that did not pass, its data escaped
    ours = [line for line in proc.stdout.splitlines() if line.startswith("::error file=")]
    assert len(ours) == 2
    assert all("\n" not in line and "%0A" in line for line in ours)
    assert _commands(proc.stdout) == ours
    assert _commands(proc.stderr) == []
    out = proc.stdout + proc.stderr
    # what the files and the agent said is there, shown: the progress line, the error
    # list with the agent's stderr, the by-score and slowest lists
    assert out.count("\\x3a:error file=evil.py,line=1::INJECTED") >= 4
    assert "   \\x3a:warning::X" in out and "\\x3a:notice::Y" in out
    assert "#\\x23[warning]old" in out
    root = ET.parse(repo / "j.xml").getroot()  # the JUnit file keeps the text, as XML
    assert {case.get("name") for case in root.iter("testcase")} == {
        f"{INJECTED} [default]",
        f"{INJECTED}-2 [broken]",
    }


@pytest.mark.slow
def test_other_commands_print_ids_safely(repo: Path) -> None:
    record = {"eval_id": INJECTED, "dataset": "d", "status": "ok", "score": 1.0}
    for name, score in (("base", 1.0), ("new", 0.0)):
        write(repo, f"{name}.jsonl", json.dumps(record | {"score": score}) + "\n")
    for fmt in ("table", "json", "markdown"):
        proc = agentv_cli(repo, "compare", "base.jsonl", "new.jsonl", "--format", fmt)
        assert proc.returncode == 0, proc.stderr
        assert _commands(proc.stdout + proc.stderr) == [], fmt
    proc = agentv_cli(repo, "compare", "base.jsonl", "new.jsonl", "--format", "json")
    (changed,) = json.loads(proc.stdout)["changed"]  # the same JSON
    assert changed["eval_id"] == INJECTED


HOSTILE_IDS = [
    "<img src=x onerror=alert(1)>",
    "</details><script>alert(1)</script>",
    "@everyone look",
    "a | b `tick` [link](javascript:alert(1))",
]


@pytest.mark.slow
def test_compare_markdown_shows_ids_as_code(repo: Path) -> None:
    import markdown as md

    base = "".join(
        json.dumps({"eval_id": i, "dataset": "d", "status": "ok", "score": 1.0}) + "\n"
        for i in HOSTILE_IDS
    )
    new = base.replace('"score": 1.0', '"score": 0.0').replace('"ok"', '"<b>odd</b>"')
    write(repo, "base.jsonl", base)
    write(repo, "new.jsonl", new)
    proc = agentv_cli(repo, "compare", "base.jsonl", "new.jsonl", "--format", "markdown")
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    rows_ = [line for line in text.splitlines() if line.startswith("| `")]
    assert len(rows_) == len(HOSTILE_IDS)
    assert all(line.count(" | ") == 4 for line in rows_)  # every row five cells
    html = md.markdown(text, extensions=["tables"])
    assert "<img" not in html and "<script" not in html and "</details>" not in html
    assert "<b>" not in html and "<a " not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html
    # a mention only inside code, where GitHub does not look for one
    for line in html.splitlines():
        if "@everyone" in line:
            assert "<code>d/@everyone look</code>" in line
