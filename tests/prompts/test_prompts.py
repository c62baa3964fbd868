"""Every scenario of docs/prompt-rules.md section 9, with its exact strings.

Each eval-file scenario is checked twice: through the Python functions (loader, then
``build_prompt``) and through ``agentv render --format json``. ``sent_messages`` is the one
list an LM API receives (the default system message included when the case has none).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentv.cases import EvaluatorConfig
from agentv.evalfile.loader import load_eval_file
from agentv.evaluators.base import EvaluationContext
from agentv.evaluators.llm_judge import LlmJudgeSpec, judge_prompts
from agentv.messages import Message, TextSegment, chat_to_dicts
from agentv.prompts.builder import (
    DEFAULT_SYSTEM_PROMPT,
    PromptSettings,
    build_messages,
    build_prompt,
    build_question,
    request_messages,
    uses_role_markers,
)
from support.cli import invoke_cli
from support.files import write

HEADER = "$schema: agentv-eval-v2\nevalcases:\n  - id: case\n    outcome: works\n"


def _eval_file(repo: Path, messages_yaml: str, files: dict[str, str] | None = None) -> Path:
    for rel, text in (files or {}).items():
        write(repo, rel, text)
    return write(repo, "evals/case.yaml", HEADER + "    input_messages:\n" + messages_yaml)


def views(
    repo: Path,
    messages_yaml: str,
    files: dict[str, str] | None = None,
    *,
    mode: str = "lm",
    system_prompt: str | None = None,
) -> list[dict[str, Any]]:
    """The case as the Python functions build it, and as `agentv render --format json` shows it."""
    path = _eval_file(repo, messages_yaml, files)
    loaded = load_eval_file(path)
    assert not loaded.errors, [d.format() for d in loaded.errors]
    (case,) = loaded.cases
    prompt = build_prompt(case, PromptSettings(mode, system_prompt))  # type: ignore[arg-type]
    python_view = {
        "question": prompt.question,
        "guidelines": prompt.guidelines,
        "guideline_paths": [str(p) for p in prompt.guideline_paths],
        "input_files": [str(p) for p in prompt.input_files],
        "sent_messages": chat_to_dicts(prompt.messages),
    }
    out = [python_view]
    if system_prompt is None:  # the CLI takes a system prompt only from a target
        result = invoke_cli("render", str(path), "--format", "json", "--mode", mode)
        assert result.exit_code == 0, result.output
        (cli_view,) = json.loads(result.stdout)
        out.append({key: cli_view[key] for key in python_view})
    return out


def user(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


def system(content: str) -> dict[str, str]:
    return {"role": "system", "content": content}


def assistant(content: str) -> dict[str, str]:
    return {"role": "assistant", "content": content}


# --- convert input messages to a chat prompt ----------------------------------


def test_single_system_and_user_message(repo: Path) -> None:
    messages = """      - role: system
        content: You are a helpful assistant.
      - role: user
        content: Hello, world!
"""
    for view in views(repo, messages):
        expected = [system("You are a helpful assistant."), user("Hello, world!")]
        assert view["sent_messages"] == expected  # it has a system message: sent as it is


def test_multi_turn_conversation_with_assistant_response(repo: Path) -> None:
    messages = """      - role: user
        content: Debug this code
      - role: assistant
        content: I can help with that
      - role: user
        content: Thanks, here's the code
"""
    turns = [
        user("Debug this code"),
        assistant("I can help with that"),
        user("Thanks, here's the code"),
    ]
    for view in views(repo, messages):
        # no system message in the conversation: the default one is sent first
        assert view["sent_messages"] == [system(DEFAULT_SYSTEM_PROMPT), *turns]


def test_system_message_with_guidelines(repo: Path) -> None:
    messages = """      - role: user
        content:
          - type: text
            value: Review this code
          - type: file
            value: ./guidelines.instructions.md
"""
    files = {
        "evals/guidelines.instructions.md": "Always be concise\n",
        ".agentv/config.yaml": '$schema: agentv-config-v2\nguideline_patterns: ["**/*.instructions.md"]\n',
    }
    for view in views(repo, messages, files):
        assert view["sent_messages"] == [
            system("You are a careful assistant.\n\n[[ ## Guidelines ## ]]\n\nAlways be concise"),
            user("Review this code\n<Attached: ./guidelines.instructions.md>"),
        ]
        assert view["guidelines"] == "Always be concise"
        assert view["guideline_paths"] == [str(repo / "evals/guidelines.instructions.md")]


def test_embedded_non_guideline_file(repo: Path) -> None:
    messages = """      - role: user
        content:
          - type: text
            value: "Review this:"
          - type: file
            value: ./code.js
"""
    for view in views(repo, messages, {"evals/code.js": "console.log('test')\n"}):
        assert view["sent_messages"] == [
            system(DEFAULT_SYSTEM_PROMPT),
            user("Review this:\n=== ./code.js ===\nconsole.log('test')"),
        ]
        assert view["input_files"] == [str(repo / "evals/code.js")]
        assert view["guidelines"] == ""


# --- guideline extraction -------------------------------------------------------


def test_extract_guideline_from_user_message(repo: Path) -> None:
    messages = """      - role: user
        content:
          - type: file
            value: python.instructions.md
          - type: text
            value: Write a function
"""
    files = {"evals/python.instructions.md": "Use type hints.\n"}
    for view in views(repo, messages, files):
        assert view["sent_messages"] == [
            system("You are a careful assistant.\n\n[[ ## Guidelines ## ]]\n\nUse type hints."),
            user("<Attached: python.instructions.md>\nWrite a function"),
        ]
        assert view["question"] == "<Attached: python.instructions.md>\nWrite a function"


def test_multiple_guideline_files(repo: Path) -> None:
    messages = """      - role: user
        content:
          - type: file
            value: python.instructions.md
          - type: file
            value: security.instructions.md
"""
    files = {
        "evals/python.instructions.md": "Use type hints.\n",
        "evals/security.instructions.md": "Never log secrets.\n",
    }
    for view in views(repo, messages, files):
        assert view["guidelines"] == (
            "=== python.instructions.md ===\nUse type hints.\n\n"
            "=== security.instructions.md ===\nNever log secrets."
        )
        assert view["sent_messages"] == [
            system(
                "You are a careful assistant.\n\n[[ ## Guidelines ## ]]\n\n"
                "=== python.instructions.md ===\nUse type hints.\n\n"
                "=== security.instructions.md ===\nNever log secrets."
            ),
            # kept with both markers: no message has visible content (docs/prompt-rules.md 5.3)
            user("<Attached: python.instructions.md>\n<Attached: security.instructions.md>"),
        ]


# --- empty-message filtering, system merging ---------------------------------------


def test_message_with_only_guideline_files(repo: Path) -> None:
    messages = """      - role: system
        content: System context
      - role: user
        content:
          - type: file
            value: guidelines.instructions.md
"""
    files = {"evals/guidelines.instructions.md": "Cite sources.\n"}
    for view in views(repo, messages, files):
        assert view["sent_messages"] == [
            system("System context\n\n[[ ## Guidelines ## ]]\n\nCite sources."),
        ]


def test_explicit_system_message_in_input(repo: Path) -> None:
    messages = """      - role: system
        content:
          - type: text
            value: Custom system context
          - type: file
            value: concise.instructions.md
      - role: user
        content: Hello
"""
    files = {"evals/concise.instructions.md": "Be concise\n"}
    (view,) = views(repo, messages, files, system_prompt="Default prompt")
    assert view["sent_messages"] == [
        system("Custom system context\n\n[[ ## Guidelines ## ]]\n\nBe concise"),
        user("Hello"),
    ]


def test_configured_system_prompt_used_without_system_message(repo: Path) -> None:
    (view,) = views(repo, "      - role: user\n        content: Hello\n", system_prompt="Be brief.")
    assert view["sent_messages"] == [system("Be brief."), user("Hello")]


# --- what LM APIs receive (docs/prompt-rules.md section 6) ---------------------------

MULTI = [
    Message("user", (TextSegment("Hello"),)),
    Message("assistant", (TextSegment("Hi"),)),
    Message("user", (TextSegment("Help me"),)),
]


def test_conversation_is_sent_as_messages_without_markers() -> None:
    sent, added = build_messages(MULTI, "")
    assert chat_to_dicts(sent) == [
        system(DEFAULT_SYSTEM_PROMPT),
        user("Hello"),
        assistant("Hi"),
        user("Help me"),
    ]
    assert not added
    assert all("@[" not in m.content for m in sent)


def test_request_without_a_conversation() -> None:
    assert chat_to_dicts(request_messages("What is the capital of France?")) == [
        system(DEFAULT_SYSTEM_PROMPT),
        user("What is the capital of France?"),
    ]
    configured = request_messages("Q", system_prompt="Answer in one word.")
    assert chat_to_dicts(configured) == [system("Answer in one word."), user("Q")]
    # a blank configured prompt does not replace the default
    assert request_messages("Q", system_prompt="  \n")[0].content == DEFAULT_SYSTEM_PROMPT


def test_request_without_a_conversation_with_guidelines() -> None:
    sent = request_messages("Q", guidelines="Be concise")
    assert sent[0].content == f"{DEFAULT_SYSTEM_PROMPT}\n\n[[ ## Guidelines ## ]]\n\nBe concise"


def test_system_turn_wins_over_configured_prompt() -> None:
    messages = [Message("system", (TextSegment("You are a code reviewer."),)), *MULTI[:1]]
    sent, _ = build_messages(messages, "Be concise.", system_prompt="ignored")
    assert chat_to_dicts(sent) == [
        system("You are a code reviewer.\n\n[[ ## Guidelines ## ]]\n\nBe concise."),
        user("Hello"),
    ]


def test_blank_system_turn_or_prompt_keeps_the_default() -> None:
    blank = [Message("system", (TextSegment("  \n"),)), *MULTI[:1]]
    for messages, configured in ((blank, None), (MULTI[:1], " \n\t")):
        sent, _ = build_messages(messages, "", system_prompt=configured)
        assert chat_to_dicts(sent) == [system(DEFAULT_SYSTEM_PROMPT), user("Hello")]


def test_configured_prompt_is_right_stripped() -> None:
    sent, _ = build_messages(MULTI[:1], "", system_prompt="Be brief.\n")
    assert sent[0].content == "Be brief."


def test_user_turn_added_only_when_the_api_needs_one() -> None:
    only_assistant = [Message("assistant", (TextSegment("Hi"),))]
    sent, added = build_messages(only_assistant, "", question="Q?", needs_user_turn=True)
    assert added
    assert chat_to_dicts(sent) == [system(DEFAULT_SYSTEM_PROMPT), user("Q?"), assistant("Hi")]
    sent, added = build_messages(only_assistant, "", question="Q?", needs_user_turn=False)
    assert not added
    assert chat_to_dicts(sent) == [system(DEFAULT_SYSTEM_PROMPT), assistant("Hi")]
    sent, added = build_messages(MULTI, "", question="Q?", needs_user_turn=True)
    assert not added


def test_vscode_with_multi_turn_eval(repo: Path) -> None:
    messages = """      - role: user
        content: Hello
      - role: assistant
        content: Hi
      - role: user
        content: Help
"""
    # Agent targets get the question (with markers) in agent mode, not the chat prompt.
    for view in views(repo, messages, mode="agent"):
        assert view["question"] == "@[User]:\nHello\n\n@[Assistant]:\nHi\n\n@[User]:\nHelp"


def test_orchestrator_populates_chatprompt(repo: Path) -> None:
    messages = """      - role: user
        content: Hello
      - role: assistant
        content: Hi there
"""
    for view in views(repo, messages):
        assert view["question"] == "@[User]:\nHello\n\n@[Assistant]:\nHi there"
        assert view["sent_messages"] == [
            system(DEFAULT_SYSTEM_PROMPT),
            user("Hello"),
            assistant("Hi there"),
        ]
        assert view["guidelines"] == ""


# --- system messages anywhere, markers for logging only ---------------------------


def test_multiple_system_messages_anywhere(repo: Path) -> None:
    messages = """      - role: system
        content: First rule.
      - role: user
        content: Hello
      - role: system
        content: Second rule.
      - role: user
        content: Go on
"""
    for view in views(repo, messages):
        assert view["sent_messages"] == [
            system("First rule.\n\nSecond rule."),
            user("Hello"),
            user("Go on"),
        ]
        # the question keeps each system turn where it was written
        assert view["question"] == (
            "@[System]:\nFirst rule.\n\n@[User]:\nHello\n\n"
            "@[System]:\nSecond rule.\n\n@[User]:\nGo on"
        )


def test_role_markers_for_logging_only(repo: Path) -> None:
    messages = """      - role: user
        content: Hello
      - role: assistant
        content: Hi
      - role: user
        content: Bye
"""
    for view in views(repo, messages):
        assert "@[" in view["question"]
        assert all("@[" not in m["content"] for m in view["sent_messages"])


# --- message formatting ---------------------------------------------------------------


def test_two_message_conversation_uses_role_markers(repo: Path) -> None:
    messages = """      - role: system
        content: You are a tutor.
      - role: user
        content:
          - type: text
            value: Explain recursion.
          - type: file
            value: style.instructions.md
"""
    files = {"evals/style.instructions.md": "Use short sentences.\n"}
    for view in views(repo, messages, files):
        assert view["question"] == (
            "@[System]:\nYou are a tutor.\n\n"
            "@[User]:\nExplain recursion.\n<Attached: style.instructions.md>"
        )
        assert view["guidelines"] == "Use short sentences."
        assert "Use short sentences." not in view["question"]


def test_single_visible_message_stays_flat(repo: Path) -> None:
    messages = """      - role: user
        content:
          - type: text
            value: Summarise the policy.
          - type: file
            value: policy.instructions.md
"""
    files = {"evals/policy.instructions.md": "Refunds within 30 days.\n"}
    for view in views(repo, messages, files):
        assert view["question"] == "Summarise the policy.\n<Attached: policy.instructions.md>"


def test_system_file_attachment_with_user_message(repo: Path) -> None:
    messages = """      - role: system
        content:
          - type: file
            value: rules.instructions.md
          - type: file
            value: context.md
      - role: user
        content: What changed?
"""
    files = {
        "evals/rules.instructions.md": "Answer in English.\n",
        "evals/context.md": "Release 2.0 notes.\n",
    }
    for view in views(repo, messages, files):
        assert view["guidelines"] == "Answer in English."
        assert view["question"] == (
            "@[System]:\n<Attached: rules.instructions.md>\n"
            '<file path="context.md">\nRelease 2.0 notes.\n</file>\n\n'
            "@[User]:\nWhat changed?"
        )
        assert view["sent_messages"][0] == system(
            "=== context.md ===\nRelease 2.0 notes.\n\n[[ ## Guidelines ## ]]\n\nAnswer in English."
        )


MULTI_TURN_WITH_FILE = """      - role: user
        content:
          - type: text
            value: This fails.
          - type: file
            value: app.py
      - role: assistant
        content: Which input?
      - role: user
        content: An empty list.
"""


def test_multi_turn_conversation_with_non_user_messages(repo: Path) -> None:
    files = {"evals/app.py": "print(1 / 0)\n"}
    lm = views(repo, MULTI_TURN_WITH_FILE, files)
    agent = views(repo, MULTI_TURN_WITH_FILE, files, mode="agent")
    for view in lm:
        assert view["question"] == (
            '@[User]:\nThis fails.\n<file path="app.py">\nprint(1 / 0)\n</file>\n\n'
            "@[Assistant]:\nWhich input?\n\n@[User]:\nAn empty list."
        )
    for view in agent:
        assert view["question"] == (
            '@[User]:\nThis fails.\n<file: path="app.py">\n\n'
            "@[Assistant]:\nWhich input?\n\n@[User]:\nAn empty list."
        )


def test_multi_turn_with_file_references_and_guidelines(repo: Path) -> None:
    messages = """      - role: user
        content:
          - type: file
            value: review.instructions.md
          - type: text
            value: Review app.py.
          - type: file
            value: app.py
      - role: assistant
        content: Looks fine.
      - role: user
        content:
          - type: text
            value: Check again with the guideline.
          - type: file
            value: review.instructions.md
"""
    files = {"evals/app.py": "x = 1\n", "evals/review.instructions.md": "Look for bugs.\n"}
    for view in views(repo, messages, files):
        assert view["guidelines"] == "Look for bugs."  # read once, listed once
        assert view["question"] == (
            "@[User]:\n<Attached: review.instructions.md>\nReview app.py.\n"
            '<file path="app.py">\nx = 1\n</file>\n\n'
            "@[Assistant]:\nLooks fine.\n\n"
            "@[User]:\nCheck again with the guideline.\n<Attached: review.instructions.md>"
        )
        assert view["sent_messages"][1] == user(
            "<Attached: review.instructions.md>\nReview app.py.\n=== app.py ===\nx = 1"
        )


# --- role-marker decision -----------------------------------------------------------


def _msg(role: str, *texts: str) -> Message:
    return Message(role, tuple(TextSegment(t) for t in texts))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([_msg("user", "Hi")], False),
        ([_msg("system", "  "), _msg("user", "Hi")], False),  # one visible message
        ([_msg("system", "Be nice"), _msg("user", "Hi")], True),  # two visible
        ([_msg("user", "Hi"), _msg("assistant", "")], True),  # an assistant turn
        ([_msg("tool", "42")], True),  # a tool turn
        ([_msg("user", "A"), _msg("user", "B")], True),
        ([], False),
    ],
)
def test_detecting_when_role_markers_are_needed(messages: list[Message], expected: bool) -> None:
    assert uses_role_markers(messages) is expected
    question = build_question(messages)
    assert ("@[" in question) is expected


def test_preserving_message_order() -> None:
    messages = [
        _msg("user", "first"),
        _msg("assistant", "second"),
        _msg("system", "third"),
        _msg("user", "last"),
    ]
    question = build_question(messages)
    assert [line for line in question.splitlines() if line.startswith("@[")] == [
        "@[User]:",
        "@[Assistant]:",
        "@[System]:",
        "@[User]:",
    ]
    assert question.endswith("@[User]:\nlast")


# --- evaluator prompt formatting --------------------------------------------------


def _judge_user_prompt(repo: Path, messages_yaml: str, mode: str = "lm") -> tuple[str, str]:
    path = _eval_file(repo, messages_yaml)
    (case,) = load_eval_file(path).cases
    prompt = build_prompt(case, PromptSettings(mode))  # type: ignore[arg-type]
    ctx = EvaluationContext(
        case=case, prompt=prompt, candidate="An answer.", target_name="t", judge=None
    )
    judge = EvaluatorConfig("judge", LlmJudgeSpec(type="llm_judge"))
    return prompt.question, judge_prompts(ctx, judge)[1]


def test_multi_turn_conversation_evaluation(repo: Path) -> None:
    _, prompt = _judge_user_prompt(
        repo,
        "      - role: user\n        content: Hello\n"
        "      - role: assistant\n        content: Hi\n"
        "      - role: user\n        content: Help\n",
    )
    assert (
        "[[ ## question ## ]]\n@[User]:\nHello\n\n@[Assistant]:\nHi\n\n@[User]:\nHelp\n" in prompt
    )


def test_single_turn_conversation_evaluation(repo: Path) -> None:
    _, prompt = _judge_user_prompt(repo, "      - role: user\n        content: What is 2+2?\n")
    assert "[[ ## question ## ]]\nWhat is 2+2?\n" in prompt
    assert "@[" not in prompt


def test_evaluator_receives_same_context_as_candidate(repo: Path) -> None:
    write(repo, "evals/g.instructions.md", "Secret guideline text.\n")
    question, prompt = _judge_user_prompt(
        repo,
        "      - role: user\n        content:\n"
        "          - {type: file, value: g.instructions.md}\n"
        "          - {type: text, value: Do it}\n"
        "      - role: assistant\n        content: Done\n",
        mode="agent",
    )
    assert f"[[ ## question ## ]]\n{question}\n" in prompt
    assert "<Attached: g.instructions.md>" in prompt
    assert "Secret guideline text." not in prompt  # guidelines are not duplicated


def test_blank_turns_are_not_sent(repo: Path) -> None:
    messages = """      - role: user
        content: "   "
      - role: assistant
        content: ""
"""
    for view in views(repo, messages):
        # nothing visible anywhere: a turn with no marker either has nothing to send
        assert view["sent_messages"] == [system(DEFAULT_SYSTEM_PROMPT)]
        assert view["question"] == ""


# --- behaviours pinned by issue 17: whole strings, not counts -------------------------------


def test_tool_calls_in_the_question_exact_text(repo: Path) -> None:
    messages = """      - role: user
        content: Météo à Zürich ?
      - role: assistant
        content: ""
        tool_calls:
          - id: call_é1
            name: météo
            arguments: {ville: Zürich, jours: [1, 2], options: {unité: "°C", détail: null}}
          - {id: call_2, name: "now", arguments: {}}
      - role: tool
        tool_call_id: call_é1
        content: "21 °C"
"""
    calls = (
        '<tool_call id="call_é1" name="météo">'
        '{"ville":"Zürich","jours":[1,2],"options":{"unité":"°C","détail":null}}</tool_call>\n'
        '<tool_call id="call_2" name="now">{}</tool_call>'
    )
    for mode in ("lm", "agent"):
        for view in views(repo, messages, mode=mode):
            # non-ASCII kept as it is, compact separators, one call per line after the text
            assert view["question"] == (
                f"@[User]:\nMétéo à Zürich ?\n\n@[Assistant]:\n{calls}\n\n@[Tool]:\n21 °C"
            )


def test_system_turn_with_several_segments(repo: Path) -> None:
    messages = """      - role: system
        content:
          - {type: text, value: "You are terse.\\n"}
          - {type: file, value: ./rules.md}
          - {type: text, value: "   "}
          - {type: file, value: style.instructions.md}
          - {type: text, value: Answer in French.}
      - role: user
        content: Hi
"""
    files = {"rules.md": "No jokes.\n\n", "style.instructions.md": "Be kind.\n"}
    for view in views(repo, messages, files):
        assert view["sent_messages"] == [
            system(
                "You are terse.\n=== ./rules.md ===\nNo jokes.\nAnswer in French."
                "\n\n[[ ## Guidelines ## ]]\n\nBe kind."
            ),
            user("Hi"),
        ]
        assert view["question"] == (
            '@[System]:\nYou are terse.\n<file path="./rules.md">\nNo jokes.\n</file>\n'
            "<Attached: style.instructions.md>\nAnswer in French.\n\n@[User]:\nHi"
        )
        assert view["guidelines"] == "Be kind."


def test_whitespace_only_system_turn_keeps_the_default(repo: Path) -> None:
    messages = """      - role: system
        content: "  \\n\\t "
      - role: user
        content: Hello
"""
    for view in views(repo, messages):
        assert view["sent_messages"] == [system(DEFAULT_SYSTEM_PROMPT), user("Hello")]
        assert view["question"] == "Hello"


@pytest.mark.parametrize("configured", ["", "   ", " \n\t\n"])
def test_whitespace_only_target_system_prompt_keeps_the_default(
    repo: Path, configured: str
) -> None:
    messages = """      - role: user
        content: Hello
"""
    (view,) = views(repo, messages, system_prompt=configured)
    assert view["sent_messages"] == [system(DEFAULT_SYSTEM_PROMPT), user("Hello")]


@pytest.mark.parametrize("kind", ["lm", "agent", "anthropic"])
def test_a_conversation_built_with_a_memo_is_built_the_same(tmp_path: Path, kind: str) -> None:
    """A live conversation renders each earlier message once (``Memo``): every request it
    builds equals the one built from scratch, at every length, whatever the target."""
    from dataclasses import replace

    from agentv.cases import EvalCase
    from agentv.messages import FileSegment, GuidelineRef, ToolCall
    from agentv.prompts.builder import Memo, PromptSettings, build_prompt

    settings = {
        "lm": PromptSettings(),
        "agent": PromptSettings(mode="agent"),
        "anthropic": PromptSettings(needs_user_turn=True),
    }[kind]
    notes = tmp_path / "notes.md"
    call = ToolCall("c1", "lookup", {"q": "x"})
    turns = [
        Message("system", (TextSegment("Be brief."),)),
        Message("user", (GuidelineRef("style.instructions.md", tmp_path / "s.md"),)),
        Message("user", (TextSegment("Read this."), FileSegment("notes.md", notes, "hello"))),
        Message("assistant", (TextSegment(""),), tool_calls=(call,)),
        Message("tool", (TextSegment('{"a": 1}'),), tool_call_id="c1", name="lookup"),
        Message("tool", (TextSegment("stray"),), tool_call_id="nobody"),
        Message("assistant", (TextSegment("Done."),)),
        Message("user", (TextSegment("And now?"),)),
    ]
    case = EvalCase(
        id="c", dataset="d", eval_file=tmp_path / "e.yaml", outcome="o", input_messages=()
    )
    memo = Memo()
    for n in range(1, len(turns) + 1):
        view = replace(case, input_messages=tuple(turns[:n]))
        fresh, remembered = build_prompt(view, settings), build_prompt(view, settings, memo)
        assert remembered.question == fresh.question
        assert chat_to_dicts(remembered.messages) == chat_to_dicts(fresh.messages)
        assert remembered.added_user_turn == fresh.added_user_turn
    assert memo.chat  # the messages were remembered, not built again
