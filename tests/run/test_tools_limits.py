"""Tools that answer under hostile input (docs/eval-files.md, "Tools that answer";
docs/reliability.md): a script that prints megabytes, parameters whose schema refers to
itself, calls that together would outlast the case's time limit. The model is the official
OpenAI SDK against the loopback fake server, the tools real scripts run by the real CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from support.cli import agentv_cli
from support.fakes import FakeLLMServer, RecordedRequest, ToolCalls
from support.files import write
from support.providers import provider_fields
from support.results import rows

#: every test here starts agentv (or a script) as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow


def _targets(repo: Path, server: FakeLLMServer) -> None:
    entry = {"name": "default", "provider": "openai", **provider_fields("openai", server)}
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n  - " + json.dumps(entry) + "\n",
    )


def _tool_results(rec: RecordedRequest) -> list[str]:
    return [m["content"] for m in (rec.body or {})["messages"] if m["role"] == "tool"]


def _case(tool: str, *, rounds: int = 8) -> str:
    return (
        "$schema: agentv-eval-v2\nevalcases:\n"
        "  - id: t\n    outcome: Uses its tool.\n"
        f"    max_tool_rounds: {rounds}\n"
        "    input_messages: [{role: user, content: Go.}]\n"
        "    evaluators: [{type: contains, value: done}]\n"
        "    tools:\n" + tool
    )


def _call_until(answered: int, name: str, arguments: dict[str, Any] | str) -> Any:
    """A model that calls ``name`` once a round until ``answered`` results came back."""

    def reply(rec: RecordedRequest) -> str | ToolCalls:
        if len(_tool_results(rec)) >= answered:
            return "done"
        return ToolCalls(((name, arguments),))

    return reply


# --- a script that prints megabytes --------------------------------------------------------

LINE = "line {:07d} of the tool's output, which goes on and on\n"


def test_a_huge_tool_output_keeps_its_start_and_says_what_was_left_out(repo: Path) -> None:
    lines = 12 * 2**20 // len(LINE.format(0)) + 1  # a little over 12 MiB
    write(
        repo,
        "evals/tools/huge.py",
        f"import sys\nfor i in range({lines}):\n    sys.stdout.write({LINE!r}.format(i))\n",
    )
    tool = (
        "      - name: dump\n        description: Prints a lot.\n"
        f"        script: {sys.executable} tools/huge.py\n"
    )
    with FakeLLMServer(reply=_call_until(1, "dump", {})) as server:
        _targets(repo, server)
        write(repo, "evals/t.yaml", _case(tool))
        proc = agentv_cli(repo, "eval", "evals/t.yaml", "--out", "r.jsonl", memory_mb=1024)
    assert proc.returncode == 0, proc.stderr
    whole = "".join(LINE.format(i) for i in range(lines))
    (result,) = _tool_results(server.requests[-1])
    kept, label = result.split("\n[agentv: ", 1)
    assert kept == whole[:100_000]  # the start, from the first character
    size = len(whole.encode())
    assert label == (
        f"the tool's output was {size:,} bytes: only its first 100,000 characters are "
        "kept, the rest was left out]"
    )
    (record,) = rows(repo / "r.jsonl")
    (call,) = record["turns"][0]["tool_calls"]
    assert call["result"] == result and "error" not in call


def test_an_output_just_over_the_limit_is_cut_the_same_way(repo: Path) -> None:
    write(repo, "evals/tools/over.py", "print('x' * 100_001)\n")
    tool = (
        "      - name: over\n        description: Prints a bit too much.\n"
        f"        script: {sys.executable} tools/over.py\n"
    )
    with FakeLLMServer(reply=_call_until(1, "over", {})) as server:
        _targets(repo, server)
        write(repo, "evals/t.yaml", _case(tool))
        proc = agentv_cli(repo, "eval", "evals/t.yaml", "--out", "r.jsonl")
    assert proc.returncode == 0, proc.stderr
    (result,) = _tool_results(server.requests[-1])
    assert result == "x" * 100_000 + (
        "\n[agentv: the tool's output was 100,002 bytes: only its first 100,000 characters "
        "are kept, the rest was left out]"
    )


# --- parameters that refer to themselves ---------------------------------------------------


@pytest.mark.parametrize(
    ("parameters", "at", "to"),
    [
        ('{$ref: "#"}', "#", "#"),
        ("{type: object, anyOf: [{$ref: '#'}]}", "#/anyOf/0", "#"),
        ("{type: object, not: {$ref: '#'}}", "#/not", "#"),
        (
            "{type: object, $defs: {a: {$ref: '#/$defs/b'}, b: {allOf: [{$ref: '#/$defs/a'}]}},"
            " properties: {x: {$ref: '#/$defs/a'}}}",
            "#/$defs/b/allOf/0",
            "#/$defs/a",
        ),
    ],
)
def test_parameters_that_refer_to_themselves_without_end_are_refused(
    repo: Path, parameters: str, at: str, to: str
) -> None:
    tool = (
        f"      - name: loop\n        description: Recursive.\n"
        f"        parameters: {parameters}\n        result: ok\n"
    )
    write(repo, "evals/t.yaml", _case(tool))
    proc = agentv_cli(repo, "validate", "evals/t.yaml")
    assert proc.returncode == 1, proc.stdout
    assert "evals/t.yaml:11:" in proc.stdout  # the line of `parameters`
    assert (
        f"tool 'loop': `parameters` refers to itself without end (the `$ref` at `{at}` "
        f"leads back to `{to}` without looking any deeper into the value)"
    ) in proc.stdout


def test_a_recursive_schema_that_ends_is_accepted_and_a_too_deep_call_is_answered_an_error(
    repo: Path,
) -> None:
    # a tree: each level looks one step deeper into the arguments, so the schema is sound;
    # arguments nested deeper than validation can follow are the model's problem, said to it
    tool = (
        "      - name: tree\n        description: A tree.\n"
        "        parameters: {type: object, properties: {child: {$ref: '#'}}}\n"
        "        result: leaf\n"
    )
    deep = '{"child":' * 400 + "{}" + "}" * 400
    write(repo, "evals/t.yaml", _case(tool))
    assert agentv_cli(repo, "validate", "evals/t.yaml").returncode == 0
    with FakeLLMServer(reply=_call_until(1, "tree", deep)) as server:
        _targets(repo, server)
        proc = agentv_cli(repo, "eval", "evals/t.yaml", "--out", "r.jsonl")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    (result,) = _tool_results(server.requests[-1])
    assert result == (
        "Error: the arguments do not fit the parameters of 'tree': they nest too deep "
        "to be checked against its schema"
    )
    (record,) = rows(repo / "r.jsonl")
    assert record["status"] == "ok"


# --- the case's time limit bounds its tool calls -------------------------------------------


def test_a_turns_tool_calls_together_stay_within_the_time_limit(repo: Path) -> None:
    # each run of the script leaves a line: what did not run left none
    write(
        repo,
        "tools/slow.py",
        "import time\nopen('ran.txt', 'a').write('x\\n')\ntime.sleep(1)\nprint('slept')\n",
    )
    tool = (
        "      - name: slow\n        description: Takes a second.\n"
        f"        script: {sys.executable} tools/slow.py\n        cwd: ..\n"
    )
    with FakeLLMServer(reply=_call_until(20, "slow", {})) as server:
        _targets(repo, server)
        write(repo, "evals/t.yaml", _case(tool, rounds=20))
        proc = agentv_cli(
            repo, "eval", "evals/t.yaml", "--out", "r.jsonl", "--agent-timeout", "3", timeout=120
        )
    assert proc.returncode == 0, proc.stderr
    (record,) = rows(repo / "r.jsonl")
    calls = record["turns"][0]["tool_calls"]
    assert len(calls) == 20  # every call the model made is answered and recorded
    # a call takes a second or more: at most three end within 3 s, and a fourth may have
    # started and been stopped when the time ran out; none after it was run
    done = [c for c in calls if "error" not in c]
    assert len(done) <= 3 and all(c["result"] == "slept" for c in done)
    runs = (repo / "ran.txt").read_text().count("x")
    assert len(done) <= runs <= len(done) + 1
    reason = (
        "the time for this turn's tool calls ran out (3 s, the run's --agent-timeout): "
        "the call was not run"
    )
    assert [c["error"] for c in calls[runs:]] == [reason] * (20 - runs)
    assert _tool_results(server.requests[-1])[runs:] == [f"Error: {reason}"] * (20 - runs)


def test_an_is_json_schema_that_refers_to_itself_without_end_is_refused(repo: Path) -> None:
    write(
        repo,
        "evals/j.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        "  - id: j\n    outcome: JSON.\n"
        "    input_messages: [{role: user, content: Go.}]\n"
        "    evaluators:\n"
        "      - type: is_json\n"
        "        schema: {anyOf: [{type: string}, {$ref: '#'}]}\n",
    )
    proc = agentv_cli(repo, "validate", "evals/j.yaml")
    assert proc.returncode == 1, proc.stdout
    assert (
        "invalid JSON Schema (inline): it refers to itself without end (the `$ref` at "
        "`#/anyOf/1` leads back to `#` without looking any deeper into the value)"
    ) in proc.stdout
