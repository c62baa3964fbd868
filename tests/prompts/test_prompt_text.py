"""prompts.py function by function, with exact strings: the guidelines text, the question's
parts and markers, the system message and the message list (docs/prompt-rules.md sections
3 to 5). test_prompts.py checks the same rules from eval files, through render too."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from agentv.cases import EvalCase
from agentv.messages import (
    ChatMessage,
    FileSegment,
    GuidelineFile,
    GuidelineRef,
    Message,
    TextSegment,
    ToolCall,
    chat_to_dicts,
)
from agentv.prompts.builder import (
    DEFAULT_SYSTEM_PROMPT,
    LM,
    PromptSettings,
    build_guidelines,
    build_messages,
    build_prompt,
    build_question,
    request_messages,
    system_turns,
    uses_role_markers,
)

ROOT = Path("/repo")


def text(value: str) -> TextSegment:
    return TextSegment(value)


def file(path: str, body: str) -> FileSegment:
    return FileSegment(path, ROOT / path, body)


def ref(path: str) -> GuidelineRef:
    return GuidelineRef(path, ROOT / path)


def msg(role: str, *segments, **extra) -> Message:  # type: ignore[no-untyped-def]
    return Message(role, tuple(segments), **extra)  # type: ignore[arg-type]


def sent(messages: list[Message], guidelines: str = "", **options) -> list[dict]:  # type: ignore[no-untyped-def]
    out, _ = build_messages(messages, guidelines, **options)
    return chat_to_dicts(out)


# --- guidelines ---------------------------------------------------------------------------


def test_guidelines_text() -> None:
    assert build_guidelines([]) == ""
    one = GuidelineFile("a.instructions.md", ROOT / "a", "Be brief.\n\n")
    assert build_guidelines([one]) == "Be brief."
    two = GuidelineFile("b/b.md", ROOT / "b", "  Use types.  \n")
    assert build_guidelines([one, two]) == (
        "=== a.instructions.md ===\nBe brief.\n\n=== b/b.md ===\n  Use types."
    )


# --- the question ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        ([], False),
        ([msg("user", text("a"))], False),
        ([msg("system", text("s")), msg("user", text("a"))], True),
        ([msg("system", text(" ")), msg("user", text("a"))], False),
        ([msg("user", ref("g.md")), msg("user", text("a"))], False),
        ([msg("user", text("a")), msg("user", file("f", "x"))], True),
        ([msg("user", text("a")), msg("user", file("f", " \n"))], False),
        ([msg("assistant")], True),
        ([msg("tool")], True),
        ([msg("user", text("a")), msg("user", text(" ")), msg("user", text("b"))], True),
    ],
)
def test_role_markers_iff_a_non_user_turn_or_two_visible_turns(
    messages: list[Message], expected: bool
) -> None:
    assert uses_role_markers(messages) is expected


def test_question_parts_in_lm_and_agent_mode() -> None:
    turn = msg(
        "user",
        text("Review:  \n"),
        file("src/a.py", "print(1)\n\n"),
        text(" \n"),
        ref("style.instructions.md"),
        text("  indented stays"),
    )
    assert build_question([turn]) == (
        'Review:\n<file path="src/a.py">\nprint(1)\n</file>\n'
        "<Attached: style.instructions.md>\n  indented stays"
    )
    assert build_question([turn], "agent") == (
        'Review:\n<file: path="src/a.py">\n<Attached: style.instructions.md>\n  indented stays'
    )


def test_question_with_markers_skips_turns_without_parts() -> None:
    messages = [
        msg("system", text("S")),
        msg("user", text("  ")),
        msg("assistant", text("A"), tool_calls=(ToolCall("i", "n", {"k": "v é"}),)),
        msg("tool", text("R\n"), tool_call_id="i"),
        msg("user", text("U")),
    ]
    assert build_question(messages) == (
        "@[System]:\nS\n\n@[Assistant]:\nA\n"
        '<tool_call id="i" name="n">{"k":"v é"}</tool_call>\n\n@[Tool]:\nR\n\n@[User]:\nU'
    )


def test_flat_question_joins_every_part_by_a_line() -> None:
    messages = [msg("user", text("one"), text("two")), msg("user", ref("g.md"))]
    assert build_question(messages) == "one\ntwo\n<Attached: g.md>"
    assert build_question([]) == ""


# --- the system message ----------------------------------------------------------------------


def test_system_turns_join_and_leave_guideline_markers_out() -> None:
    messages = [
        msg("system", text("First.\n"), ref("g.md"), file("f.md", "File text.\n")),
        msg("user", text("U")),
        msg("system", ref("only.md")),
        msg("system", text("Second.")),
    ]
    assert system_turns(messages) == "First.\n=== f.md ===\nFile text.\n\nSecond."
    assert system_turns([msg("user", text("U"))]) == ""


@pytest.mark.parametrize(
    ("configured", "guidelines", "system"),
    [
        (None, "", DEFAULT_SYSTEM_PROMPT),
        ("", "", DEFAULT_SYSTEM_PROMPT),
        (" \n", "G", f"{DEFAULT_SYSTEM_PROMPT}\n\n[[ ## Guidelines ## ]]\n\nG"),
        ("  Be kind.\n\n", "", "  Be kind."),
        ("Be kind.", "G1\nG2", "Be kind.\n\n[[ ## Guidelines ## ]]\n\nG1\nG2"),
    ],
)
def test_system_message_of_a_request_without_a_conversation(
    configured: str | None, guidelines: str, system: str
) -> None:
    messages = request_messages("Q?", system_prompt=configured, guidelines=guidelines)
    assert chat_to_dicts(messages) == [
        {"role": "system", "content": system},
        {"role": "user", "content": "Q?"},
    ]


# --- the message list -----------------------------------------------------------------------


def test_message_parts_and_fields_in_full() -> None:
    call = ToolCall("c1", "f", {"a": 1})
    messages = [
        msg("user", text("See:\n"), file("d/x.txt", "X\n\n"), ref("g.md"), name="ann"),
        msg("assistant", text(""), tool_calls=(call,), name="bot"),
        msg("tool", text("out\n"), tool_call_id="c1", name="f"),
    ]
    assert sent(messages) == [
        {"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
        {"role": "user", "content": "See:\n=== d/x.txt ===\nX\n<Attached: g.md>", "name": "ann"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "name": "f", "arguments": {"a": 1}}],
            "name": "bot",
        },
        {"role": "tool", "content": "out", "tool_call_id": "c1", "name": "f"},
    ]


def test_turns_without_visible_content_are_dropped_only_when_another_has_some() -> None:
    marker_only = msg("user", ref("g.md"))
    blank_file = msg("assistant", file("e.txt", "\n"))
    assert sent([marker_only, blank_file, msg("user", text("Q"))]) == [
        {"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
        {"role": "user", "content": "Q"},
    ]
    assert sent([marker_only, blank_file]) == [
        {"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
        {"role": "user", "content": "<Attached: g.md>"},
        {"role": "assistant", "content": "=== e.txt ==="},
    ]
    assert sent([msg("user"), msg("assistant", text(" "))]) == [
        {"role": "system", "content": DEFAULT_SYSTEM_PROMPT}
    ]


def test_tool_turns_are_kept_even_when_blank() -> None:
    call = ToolCall("c1", "f", {})
    messages = [
        msg("user", text("Q")),
        msg("assistant", tool_calls=(call,)),
        msg("tool", text(" "), tool_call_id="c1"),
        msg("tool", tool_call_id="c2"),
        msg("tool"),
    ]
    assert sent(messages) == [
        {"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
        {"role": "user", "content": "Q"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "name": "f", "arguments": {}}],
        },
        {"role": "tool", "content": "", "tool_call_id": "c1"},
        {"role": "user", "content": "@[Tool]:\n"},
    ]


def test_a_tool_result_pairs_with_any_earlier_call_of_any_earlier_turn() -> None:
    first = msg("assistant", tool_calls=(ToolCall("a", "f", {}), ToolCall("b", "g", {})))
    second = msg("assistant", text("More."), tool_calls=(ToolCall("c", "h", {}),))
    messages = [
        msg("user", text("Q")),
        first,
        second,
        msg("tool", text("B"), tool_call_id="b"),
        msg("tool", text("A"), tool_call_id="a"),
        msg("tool", text("C"), tool_call_id="c"),
    ]
    assert [(m["role"], m.get("tool_call_id")) for m in sent(messages)[4:]] == [
        ("tool", "b"),
        ("tool", "a"),
        ("tool", "c"),
    ]


@pytest.mark.parametrize(
    ("messages", "added"),
    [
        ([msg("assistant", text("A"))], True),
        ([msg("system", text("S"))], True),
        ([], True),
        ([msg("user", text("U"))], False),
        (
            [msg("assistant", tool_calls=(ToolCall("x", "f", {}),)), msg("tool", tool_call_id="x")],
            False,
        ),
        ([msg("tool", text("R"))], False),  # the @[Tool]: fallback is a user turn
    ],
)
def test_added_user_turn_holds_the_question_right_after_the_system_message(
    messages: list[Message], added: bool
) -> None:
    out, was_added = build_messages(messages, "", question="The question", needs_user_turn=True)
    assert was_added is added
    assert (out[1] == ChatMessage("user", "The question")) is added
    unchanged, not_added = build_messages(messages, "", question="The question")
    assert not not_added
    assert out[:1] + out[2:] == unchanged if added else out == unchanged


# --- build_prompt ---------------------------------------------------------------------------


@dataclass
class _Target:
    mode: str
    system_prompt: str | None
    needs_user_turn: bool


def _case(*messages: Message) -> EvalCase:
    guideline = GuidelineFile("g.instructions.md", ROOT / "g.instructions.md", "Rule.\n")
    return EvalCase(
        id="c",
        dataset="d",
        eval_file=ROOT / "evals" / "c.yaml",
        outcome="o",
        input_messages=messages,
        expected_messages=(),
        reference_answer="",
        guideline_files=(guideline,),
        input_files=(ROOT / "f.md",),
    )


def test_prompt_settings_of_a_target() -> None:
    target = _Target("agent", "Be brief.", True)
    assert PromptSettings.of(target) == PromptSettings("agent", "Be brief.", True)  # type: ignore[arg-type]
    assert PromptSettings() == LM == PromptSettings("lm", None, False)


def test_build_prompt_for_an_agent_that_needs_a_user_turn() -> None:
    case = _case(msg("system", text("S")), msg("assistant", text("Hi"), file("f.md", "F")))
    prompt = build_prompt(case, PromptSettings("agent", "ignored", needs_user_turn=True))
    assert prompt.question == '@[System]:\nS\n\n@[Assistant]:\nHi\n<file: path="f.md">'
    lm_question = '@[System]:\nS\n\n@[Assistant]:\nHi\n<file path="f.md">\nF\n</file>'
    assert chat_to_dicts(prompt.messages) == [
        {"role": "system", "content": "S\n\n[[ ## Guidelines ## ]]\n\nRule."},
        {"role": "user", "content": lm_question},  # an API turn: the LM question
        {"role": "assistant", "content": "Hi\n=== f.md ===\nF"},
    ]
    assert (prompt.guidelines, prompt.added_user_turn) == ("Rule.", True)
    assert (prompt.guideline_paths, prompt.input_files) == (
        [ROOT / "g.instructions.md"],
        [ROOT / "f.md"],
    )


def test_build_prompt_in_lm_mode_with_the_configured_system_prompt() -> None:
    case = _case(msg("user", text("U")))
    prompt = build_prompt(case, PromptSettings("lm", "Configured."))
    assert (prompt.question, prompt.added_user_turn) == ("U", False)
    assert chat_to_dicts(prompt.messages) == [
        {"role": "system", "content": "Configured.\n\n[[ ## Guidelines ## ]]\n\nRule."},
        {"role": "user", "content": "U"},
    ]
    assert build_prompt(case).messages[0].content == (
        f"{DEFAULT_SYSTEM_PROMPT}\n\n[[ ## Guidelines ## ]]\n\nRule."
    )


def test_with_nothing_visible_an_empty_turn_does_not_end_the_list() -> None:
    assert sent([msg("user"), msg("user", ref("g.md")), msg("assistant", text(" "))]) == [
        {"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
        {"role": "user", "content": "<Attached: g.md>"},
    ]


def test_turns_after_a_tool_fallback_are_kept() -> None:
    assert sent([msg("user", text("Q")), msg("tool", text("R")), msg("user", text("Next"))]) == [
        {"role": "system", "content": DEFAULT_SYSTEM_PROMPT},
        {"role": "user", "content": "Q"},
        {"role": "user", "content": "@[Tool]:\nR"},
        {"role": "user", "content": "Next"},
    ]


def test_added_user_turn_without_a_question_is_empty() -> None:
    out, added = build_messages([msg("assistant", text("A"))], "", needs_user_turn=True)
    assert added
    assert chat_to_dicts(out)[1] == {"role": "user", "content": ""}


def test_build_prompt_in_lm_mode_for_an_api_that_needs_a_user_turn() -> None:
    case = _case(msg("assistant", text("Hi")))
    prompt = build_prompt(case, PromptSettings("lm", None, needs_user_turn=True))
    assert prompt.added_user_turn
    assert chat_to_dicts(prompt.messages)[1:] == [
        {"role": "user", "content": "@[Assistant]:\nHi"},
        {"role": "assistant", "content": "Hi"},
    ]
