"""``agentv render``'s sent messages, the logged ``raw_request.chat_prompt`` and the bytes on
the wire are one list (docs/prompt-rules.md, "What is logged").

Each scenario is run on every LM provider against the loopback fake: rendered with the
real CLI, run with ``agentv.run_eval``, and the body the server received is read back
into a vendor-neutral sequence (text per role, tool calls, tool results) by a decoder
written here, independently of the providers' own converters. Merging of consecutive
turns (Anthropic, Gemini) does not change that sequence, so it must equal the rendered
list's.
"""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

import agentv
from support.cli import invoke_cli
from support.fakes import FakeLLMServer
from support.files import write
from support.providers import KEYS, LM_KINDS
from support.targets import lm_target, write_targets

Atom = tuple[Any, ...]


@dataclass
class Scenario:
    id: str
    messages: str  # YAML of input_messages
    files: dict[str, str] = field(default_factory=dict)
    system_prompt: str | None = None  # the target's configured one
    # what the list must hold (as (role, content) for text turns), checked for OpenAI
    expected: list[tuple[str, str]] | None = None


SCENARIOS = [
    Scenario(
        "single turn",
        "- {role: user, content: 'What is 2+2?'}",
        expected=[("system", "You are a careful assistant."), ("user", "What is 2+2?")],
    ),
    Scenario(
        "multi-turn",
        """
        - {role: user, content: Debug this code}
        - {role: assistant, content: I can help with that}
        - {role: user, content: "Thanks, here's the code"}
        """,
    ),
    Scenario(
        "system messages in the middle",
        """
        - {role: system, content: First rule.}
        - {role: user, content: Hello}
        - {role: system, content: Second rule.}
        - {role: assistant, content: Hi}
        - {role: user, content: Go on}
        """,
        expected=[
            ("system", "First rule.\n\nSecond rule."),
            ("user", "Hello"),
            ("assistant", "Hi"),
            ("user", "Go on"),
        ],
    ),
    Scenario(
        "guideline-only messages",
        """
        - role: system
          content: System context
        - role: user
          content:
            - {type: file, value: style.instructions.md}
        - role: assistant
          content: Noted.
        """,
        files={"evals/style.instructions.md": "Be brief.\n"},
    ),
    Scenario(
        "paired tool call",
        """
        - {role: user, content: "What is the weather in Paris?"}
        - role: assistant
          content: ""
          tool_calls: [{id: call_1, name: get_weather, arguments: {city: Paris}}]
        - {role: tool, tool_call_id: call_1, name: get_weather, content: '{"temp_c": 21}'}
        - {role: user, content: "Is that warm?"}
        """,
    ),
    Scenario(
        "unpaired tool result",
        """
        - {role: assistant, content: Checking the log.}
        - {role: tool, content: disk full at 03:00}
        """,
        expected=[
            ("system", "You are a careful assistant."),
            ("assistant", "Checking the log."),
            ("user", "@[Tool]:\ndisk full at 03:00"),
        ],
    ),
    Scenario(
        "target system prompt",
        """
        - {role: user, content: Hello}
        - {role: assistant, content: Hi there}
        - {role: user, content: Help me}
        """,
        system_prompt="You review code for a bank.",
    ),
    Scenario(
        "trailing newlines from content blocks",
        """
        - role: system
          content: |
            You are terse.
        - role: user
          content: |
            Line one.
            Line two.

        """,
        expected=[("system", "You are terse."), ("user", "Line one.\nLine two.")],
    ),
]


def _eval_file(repo: Path, scenario: Scenario) -> Path:
    for rel, text in scenario.files.items():
        write(repo, rel, text)
    body = textwrap.indent(textwrap.dedent(scenario.messages).strip("\n"), " " * 6)
    return write(
        repo,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n  - id: the-case\n    outcome: a good answer\n"
        f"    input_messages:\n{body}\n"
        # a deterministic grade: the only request is the candidate's
        "    evaluators: [{type: contains, value: Hello}]\n",
    )


def neutral_atoms(messages: list[dict[str, Any]]) -> list[Atom]:
    """The rendered/logged list as a sequence: text per role, calls and results."""
    out: list[Atom] = []
    for m in messages:
        if m["role"] == "tool":
            out.append(("result", m["tool_call_id"], m["content"]))
            continue
        if m["content"]:
            out.append((m["role"], m["content"]))
        out.extend(("call", c["id"], c["name"], c["arguments"]) for c in m.get("tool_calls", []))
    return out


def wire_atoms(kind: str, body: dict[str, Any]) -> list[Atom]:
    """The body a vendor's API received, read back into the same sequence."""
    out: list[Atom] = []
    if kind in ("openai", "azure"):
        for m in body["messages"]:
            if m["role"] == "tool":
                out.append(("result", m["tool_call_id"], m["content"]))
                continue
            if m.get("content"):
                out.append((m["role"], m["content"]))
            for c in m.get("tool_calls", []):
                fn = c["function"]
                out.append(("call", c["id"], fn["name"], json.loads(fn["arguments"])))
        return out
    if kind == "anthropic":
        if "system" in body:
            out.append(("system", body["system"]))
        for turn in body["messages"]:
            blocks = turn["content"]
            if isinstance(blocks, str):
                blocks = [{"type": "text", "text": blocks}]
            for b in blocks:
                if b["type"] == "text":
                    out.append((turn["role"], b["text"]))
                elif b["type"] == "tool_use":
                    out.append(("call", b["id"], b["name"], b["input"]))
                else:
                    assert b["type"] == "tool_result"
                    out.append(("result", b["tool_use_id"], b["content"]))
        return out
    assert kind == "gemini"
    if "systemInstruction" in body:
        (part,) = body["systemInstruction"]["parts"]
        out.append(("system", part["text"]))
    for content in body["contents"]:
        role = "assistant" if content["role"] == "model" else content["role"]
        for p in content["parts"]:
            if "text" in p:
                out.append((role, p["text"]))
            elif "functionCall" in p:
                call = p["functionCall"]
                out.append(("call", call["id"], call["name"], call["args"]))
            else:
                response = p["functionResponse"]
                out.append(("result", response["id"], response["response"]["output"]))
    return out


@pytest.mark.parametrize("kind", LM_KINDS)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
def test_render_logged_and_wire_are_one_list(
    kind: str, scenario: Scenario, repo: Path, llm_server: FakeLLMServer
) -> None:
    given = scenario.system_prompt
    prompt = {} if given is None else {"system_prompt": given}
    write_targets(repo, lm_target(kind, llm_server, "t", **prompt))
    path = _eval_file(repo, scenario)

    rendered = invoke_cli("render", str(path), "--target", "t", "--format", "json")
    assert rendered.exit_code == 0, rendered.output
    (view,) = json.loads(rendered.stdout)
    sent = view["sent_messages"]
    assert llm_server.requests == []  # rendering sends nothing

    run = agentv.run_eval(path, target="t", cwd=repo)
    (result,) = run.results
    assert result.error is None, result.error
    logged = result.raw_request["chat_prompt"]  # type: ignore[index]
    assert logged == sent
    assert result.lm_provider_request["chat_prompt"] == sent  # type: ignore[index]

    (rec,) = llm_server.requests
    assert wire_atoms(kind, rec.body) == neutral_atoms(sent)
    assert KEYS[kind] not in rec.raw.decode()

    # the list itself: one system message first; exact where the scenario says
    assert sent[0]["role"] == "system"
    assert [m["role"] for m in sent].count("system") == 1
    if scenario.system_prompt is not None:
        assert sent[0]["content"] == scenario.system_prompt
    if scenario.expected is not None:
        assert [(m["role"], m["content"]) for m in sent] == scenario.expected
    # Anthropic and Gemini need a user turn: one is added (and said) only when there is none
    # (a tool result travels in a user turn there, paired or not)
    added = kind in ("anthropic", "gemini") and not {"user", "tool"} & input_roles(scenario)
    assert view.get("added_user_turn", False) is added
    assert result.raw_request.get("added_user_turn", False) is added  # type: ignore[union-attr]
    if added:
        assert sent[1] == {"role": "user", "content": view["question"]}


def input_roles(scenario: Scenario) -> set[str]:
    """The roles of the scenario's messages, except those left with nothing to send."""
    messages = yaml.safe_load(textwrap.dedent(scenario.messages))
    return {m["role"] for m in messages if not isinstance(m["content"], list)}
