"""What a live conversation sends back to the model it talks to (docs/eval-files.md, "Live
conversations", "Tools that answer"; docs/reliability.md): the target's earlier answers
byte for byte, the tool calls' arguments as the model wrote them, and tool results cut
where the label says. The four LM APIs through their official SDKs against the loopback
fake server, which records every request as it came."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

import agentv
from support.cli import agentv_cli
from support.fakes import FakeLLMServer, RecordedRequest, ToolCalls
from support.files import write
from support.providers import provider_fields
from support.results import rows

KINDS = ("openai", "azure", "anthropic", "gemini")


def _targets(repo: Path, server: FakeLLMServer, kind: str = "openai") -> None:
    entry = {"name": "default", "provider": kind, **provider_fields(kind, server)}
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n  - " + json.dumps(entry) + "\n",
    )


def _texts(rec: RecordedRequest, role: str) -> list[str]:
    """The texts of ``role``'s turns in a request, whatever the API (``assistant``: the
    model's own turns; Gemini calls them ``model``)."""
    body = rec.body or {}
    if "contents" in body:
        wanted = "model" if role == "assistant" else role
        return [
            p["text"]
            for t in body["contents"]
            if t["role"] == wanted
            for p in t["parts"]
            if "text" in p
        ]
    out = []
    for message in body["messages"]:
        if message["role"] != role:
            continue
        content = message.get("content")
        if isinstance(content, list):
            out += [b["text"] for b in content if b["type"] == "text"]
        elif content:
            out.append(content)
    return out


# --- earlier answers go back byte for byte -------------------------------------------------

TWO_TURNS = """$schema: agentv-eval-v2
evalcases:
  - id: spaces
    outcome: Answers twice.
    input_messages: [{role: system, content: Be brief.}]
    turns:
      - content: first
      - content: second
    evaluators: [{type: contains, value: Two}]
"""

#: answers ending (and starting) with whitespace, as models often write them
ANSWERS = {"first": "  One.\n\n```\ncode  \n```\n\n", "second": "Two. \t"}


def _spaced(rec: RecordedRequest) -> str:
    return ANSWERS[_texts(rec, "user")[-1]]


@pytest.mark.parametrize("kind", KINDS)
def test_earlier_answers_are_carried_forward_byte_for_byte(repo: Path, kind: str) -> None:
    with FakeLLMServer(reply=_spaced) as server:
        _targets(repo, server, kind)
        write(repo, "evals/spaces.yaml", TWO_TURNS)
        run = agentv.run_eval("evals/spaces.yaml", cwd=repo)
    (result,) = run.results
    assert result.status == "ok", result.error
    _, second = server.requests
    assert _texts(second, "assistant") == [ANSWERS["first"]]
    assert _texts(second, "user") == ["first", "second"]
    assert [t["answer"] for t in result.turns or []] == [ANSWERS["first"], ANSWERS["second"]]
    chat = (result.raw_request or {})["chat_prompt"]
    assert chat[2] == {"role": "assistant", "content": ANSWERS["first"]}


@pytest.mark.slow  # the agent is a program
def test_a_cli_agent_gets_its_earlier_answer_byte_for_byte(repo: Path) -> None:
    # the agent sees its transcript in {CHAT_PROMPT_FILE}: its own answer as it printed it
    write(
        repo,
        "agent.py",
        "import json, sys\n"
        "messages = json.load(open(sys.argv[1]))\n"
        "mine = [m['content'] for m in messages if m['role'] == 'assistant']\n"
        "sys.stdout.write('  said before: ' + json.dumps(mine) + '  \\n\\n')\n",
    )
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n  - name: default\n    provider: cli\n"
        f"    command_template: {sys.executable} agent.py {{CHAT_PROMPT_FILE}}\n",
    )
    write(repo, "evals/spaces.yaml", TWO_TURNS)
    proc = agentv_cli(repo, "eval", "evals/spaces.yaml", "--out", "r.jsonl")
    assert proc.returncode == 7, proc.stderr  # it never says "Two": the case fails
    (record,) = rows(repo / "r.jsonl")
    first, second = (t["answer"] for t in record["turns"])
    # a command's answer is its stdout less the final newlines (docs/targets.md)
    assert first == "  said before: []  "
    assert second == "  said before: " + json.dumps([first]) + "  "


# --- tool-call arguments go back as the model wrote them -----------------------------------

TOOL_CASE = """$schema: agentv-eval-v2
evalcases:
  - id: weather
    outcome: Says the weather.
    input_messages: [{role: user, content: Weather in Oslo?}]
    tools:
      - name: weather
        description: The weather of a city
        parameters: {type: object, properties: {city: {type: string}}}
        result: sunny
    evaluators: [{type: contains, value: sunny}]
"""


def _calls_once(arguments: dict[str, Any] | str, text: str = "") -> Any:
    def reply(rec: RecordedRequest) -> str | ToolCalls:
        body = json.dumps(rec.body)
        if "sunny" in body or "Error:" in body:
            return "It is sunny."
        return ToolCalls((("weather", arguments),), text=text)

    return reply


@pytest.mark.parametrize("kind", ("openai", "azure"))
@pytest.mark.parametrize(
    "written",
    [
        '{"city": "Oslo"}',  # spaced, as most models write it
        '{\n  "city" : "Oslo"\n}',
        '{"city":"Oslo","city":"Bergen"}',  # a key twice: not rewritten either
    ],
)
def test_openai_tool_arguments_go_back_as_written(repo: Path, kind: str, written: str) -> None:
    with FakeLLMServer(reply=_calls_once(written)) as server:
        _targets(repo, server, kind)
        write(repo, "evals/tools.yaml", TOOL_CASE)
        run = agentv.run_eval("evals/tools.yaml", cwd=repo)
    (result,) = run.results
    assert result.status != "error", result.error
    _, second = server.requests
    (assistant,) = [m for m in second.body["messages"] if m["role"] == "assistant"]
    assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == [written]


@pytest.mark.parametrize("kind", ("openai", "azure"))
@pytest.mark.parametrize("written", ['{"city": "Oslo"', "Oslo", "[1, 2]", ""])
def test_arguments_that_are_not_a_json_object_go_back_as_written_and_are_refused(
    repo: Path, kind: str, written: str
) -> None:
    with FakeLLMServer(reply=_calls_once(written, text="Checking.")) as server:
        _targets(repo, server, kind)
        write(repo, "evals/tools.yaml", TOOL_CASE)
        run = agentv.run_eval("evals/tools.yaml", cwd=repo)
    (result,) = run.results
    _, second = server.requests
    messages = second.body["messages"]
    (assistant,) = [m for m in messages if m["role"] == "assistant"]
    assert assistant["content"] == "Checking."
    assert [c["function"]["arguments"] for c in assistant["tool_calls"]] == [written]
    (tool,) = [m for m in messages if m["role"] == "tool"]
    if written == "":  # no arguments at all: the tool is called with none
        assert tool["content"] == "sunny"
        return
    why = "not valid JSON" if written in ('{"city": "Oslo"', "Oslo") else "not a JSON object"
    assert tool["content"].startswith(f"Error: the arguments are {why}")
    (call,) = (result.turns or [{}])[0]["tool_calls"]
    assert call["error"] == tool["content"].removeprefix("Error: ")


@pytest.mark.parametrize("kind", ("anthropic", "gemini"))
def test_apis_that_take_objects_get_the_arguments_object_back_unchanged(
    repo: Path, kind: str
) -> None:
    written = {"when": {"day": "today", "hours": [9, 12]}, "city": "Oslo"}
    with FakeLLMServer(reply=_calls_once(written)) as server:
        _targets(repo, server, kind)
        write(repo, "evals/tools.yaml", TOOL_CASE)
        run = agentv.run_eval("evals/tools.yaml", cwd=repo)
    (result,) = run.results
    assert result.status != "error", result.error
    _, second = server.requests
    if kind == "anthropic":
        (block,) = [
            b
            for m in second.body["messages"]
            if isinstance(m["content"], list)
            for b in m["content"]
            if b["type"] == "tool_use"
        ]
        assert block["input"] == written and list(block["input"]) == ["when", "city"]
    else:
        (part,) = [p for t in second.body["contents"] for p in t["parts"] if "functionCall" in p]
        assert part["functionCall"]["args"] == written
        assert list(part["functionCall"]["args"]) == ["when", "city"]


def test_a_cached_answer_sends_back_the_arguments_as_written(repo: Path) -> None:
    written = '{ "city" :  "Oslo" }'
    with FakeLLMServer(reply=_calls_once(written)) as server:
        _targets(repo, server)
        write(repo, "evals/tools.yaml", TOOL_CASE)
        for _ in range(2):
            run = agentv.run_eval("evals/tools.yaml", cwd=repo, cache=True)
            assert run.results[0].status != "error", run.results[0].error
    # the second run: the tool call came from the cache, its answer's request was the same
    assert len(server.requests) == 2
    (assistant,) = [m for m in server.requests[1].body["messages"] if m["role"] == "assistant"]
    assert assistant["tool_calls"][0]["function"]["arguments"] == written
