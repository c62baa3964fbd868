"""The pure vendor converters, input to output, compared whole: the neutral message list
to each wire shape, and each vendor's answer to text, reasoning and usage. (The same
shapes through the real SDKs are in test_wire.py and test_answers.py.)"""

from __future__ import annotations

import enum
from typing import Any

import pytest

from agentv.messages import ChatMessage, ToolCall
from agentv.providers.anthropic import (
    AnthropicProvider,
    AnthropicSettings,
    from_anthropic_message,
    to_anthropic_request,
)
from agentv.providers.base import Usage
from agentv.providers.gemini import from_gemini_response, to_gemini_request
from agentv.providers.openai import from_openai_completion, to_openai_messages

CALL = ToolCall("c1", "find", {"q": "é", "n": [1, 2]})
CONVERSATION = [
    ChatMessage("system", "S1"),
    ChatMessage("user", "U1", name="ann"),
    ChatMessage("assistant", "A1", tool_calls=(CALL,), name="bot"),
    ChatMessage("tool", "R1", tool_call_id="c1", name="find"),
    ChatMessage("user", "U2"),
    ChatMessage("system", "S2"),
    ChatMessage("assistant", "A2 \n"),
]


def test_openai_messages_in_full() -> None:
    assert to_openai_messages(CONVERSATION) == [
        {"role": "system", "content": "S1"},
        {"role": "user", "content": "U1", "name": "ann"},
        {
            "role": "assistant",
            "content": "A1",
            "name": "bot",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "find", "arguments": '{"q":"é","n":[1,2]}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "R1"},
        {"role": "user", "content": "U2"},
        {"role": "system", "content": "S2"},
        {"role": "assistant", "content": "A2 \n"},
    ]


def test_openai_content_left_out_only_next_to_tool_calls() -> None:
    out = to_openai_messages(
        [
            ChatMessage("assistant", "", tool_calls=(CALL,)),
            ChatMessage("tool", "", tool_call_id="c1"),
            ChatMessage("assistant", ""),
            ChatMessage("user", ""),
            ChatMessage("assistant", "Checking.", tool_calls=(CALL,)),
        ]
    )
    # absent (never null, never ""), which every compatible server accepts
    assert [m.get("content", "<absent>") for m in out] == ["<absent>", "", "", "", "Checking."]


@pytest.mark.parametrize(
    "messages",
    [
        [ChatMessage("tool", "R", tool_call_id="c1")],
        [ChatMessage("tool", "R")],
        [
            ChatMessage("assistant", "", tool_calls=(CALL,)),
            ChatMessage("tool", "R", tool_call_id="c2"),
        ],
    ],
)
def test_converters_refuse_a_tool_result_answering_no_earlier_call(
    messages: list[ChatMessage],
) -> None:
    # prompt building turns those into user turns; a converter never guesses
    bad = messages[-1].tool_call_id
    message = (
        f"tool result {bad!r} answers no earlier tool call; build the messages with "
        "agentv.prompts.builder, which sends such results as user turns"
    )
    for convert in (to_openai_messages, to_anthropic_request, to_gemini_request):
        with pytest.raises(ValueError) as info:
            convert(messages)
        assert str(info.value) == message


def test_anthropic_request_in_full() -> None:
    system, turns = to_anthropic_request(CONVERSATION)
    assert system == "S1\n\nS2"
    assert turns == [
        {"role": "user", "content": "U1"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "A1"},
                {"type": "tool_use", "id": "c1", "name": "find", "input": {"q": "é", "n": [1, 2]}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "R1"},
                {"type": "text", "text": "U2"},
            ],
        },
        {"role": "assistant", "content": "A2"},  # the prefill, right-stripped
    ]


def test_anthropic_without_system_and_blank_turns() -> None:
    system, turns = to_anthropic_request(
        [
            ChatMessage("system", ""),
            ChatMessage("user", "  "),
            ChatMessage("user", "Hi "),
            ChatMessage("assistant", "\n"),
        ]
    )
    # a text that is not the final prefill keeps its whitespace
    assert (system, turns) == (None, [{"role": "user", "content": "Hi "}])
    assert to_anthropic_request([]) == (None, [])


def test_anthropic_prefill_ending_in_a_tool_call_is_left_as_it_is() -> None:
    _, turns = to_anthropic_request(
        [ChatMessage("user", "U"), ChatMessage("assistant", "Let me see. ", tool_calls=(CALL,))]
    )
    assert turns[-1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me see. "},
            {"type": "tool_use", "id": "c1", "name": "find", "input": {"q": "é", "n": [1, 2]}},
        ],
    }


def test_anthropic_merged_prefill_strips_only_its_last_block() -> None:
    _, turns = to_anthropic_request(
        [ChatMessage("user", "U"), ChatMessage("assistant", "A "), ChatMessage("assistant", "B ")]
    )
    assert turns[-1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "A "}, {"type": "text", "text": "B"}],
    }


def test_gemini_request_in_full() -> None:
    system, contents = to_gemini_request(CONVERSATION)
    assert system == "S1\n\nS2"
    assert contents == [
        {"role": "user", "parts": [{"text": "U1"}]},
        {
            "role": "model",
            "parts": [
                {"text": "A1"},
                {"functionCall": {"id": "c1", "name": "find", "args": {"q": "é", "n": [1, 2]}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"id": "c1", "name": "find", "response": {"output": "R1"}}},
                {"text": "U2"},
            ],
        },
        {"role": "model", "parts": [{"text": "A2 \n"}]},
    ]
    assert to_gemini_request([ChatMessage("system", ""), ChatMessage("user", " ")]) == (None, [])


def test_gemini_result_named_after_its_call_not_the_tool_message() -> None:
    _, contents = to_gemini_request(
        [
            ChatMessage(
                "assistant", "", tool_calls=(ToolCall("a", "one", {}), ToolCall("b", "two", {}))
            ),
            ChatMessage("tool", "2", tool_call_id="b", name="wrong"),
        ]
    )
    assert contents[-1] == {
        "role": "user",
        "parts": [{"functionResponse": {"id": "b", "name": "two", "response": {"output": "2"}}}],
    }


# --- answers ------------------------------------------------------------------------------


def test_openai_completion_in_full() -> None:
    data = {
        "choices": [
            {"message": {"content": "A", "reasoning_content": "R"}},
            {"message": {"content": "second choice"}},
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
    }
    answer = from_openai_completion(data)
    assert (answer.text, answer.reasoning, answer.usage, answer.raw) == (
        "A",
        "R",
        Usage(1, 2, 3),
        data,
    )


@pytest.mark.parametrize(
    ("message", "text", "reasoning"),
    [
        ({}, "", None),
        ({"content": None, "reasoning": 5}, "", None),
        ({"content": ["parts"], "reasoning": "r"}, "", "r"),
    ],
)
def test_openai_completion_odd_messages(
    message: dict[str, Any], text: str, reasoning: str | None
) -> None:
    answer = from_openai_completion({"choices": [{"message": message}], "usage": "n/a"})
    assert (answer.text, answer.reasoning, answer.usage) == (text, reasoning, None)
    assert from_openai_completion({"choices": [{"message": None}]}).text == ""


def test_openai_completion_partial_usage() -> None:
    answer = from_openai_completion({"choices": [{"message": {"content": "x"}}], "usage": {}})
    assert answer.usage == Usage(None, None, None)


class _Obj:
    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def model_dump(self, **options: Any) -> dict[str, Any]:
        self.dumped_with = options
        return {"dumped": True}


def test_anthropic_message_in_full() -> None:
    message = _Obj(
        content=[
            _Obj(type="thinking", thinking="T1"),
            _Obj(type="text", text="Hello "),
            _Obj(type="tool_use", text="not text", id="t1", name="look", input={"q": 1}),
            _Obj(type="thinking", thinking="T2"),
            _Obj(text="no type"),
            _Obj(type="text", text="world"),
        ],
        usage=_Obj(input_tokens=3, output_tokens=4),
    )
    answer = from_anthropic_message(message)
    assert (answer.text, answer.reasoning, answer.usage, answer.raw) == (
        "Hello world",
        "T1\n\nT2",
        Usage(3, 4, 7),
        {"dumped": True},
    )
    assert message.dumped_with == {"mode": "json", "exclude_unset": True}
    assert answer.tool_calls == (ToolCall("t1", "look", {"q": 1}),)


@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (None, None),
        (_Obj(input_tokens=None, output_tokens=4), Usage(None, 4, None)),
        (_Obj(input_tokens=3, output_tokens=None), Usage(3, None, None)),
    ],
)
def test_anthropic_message_usage(usage: Any, expected: Usage | None) -> None:
    answer = from_anthropic_message(_Obj(content=None, usage=usage))
    assert (answer.text, answer.reasoning, answer.usage) == ("", None, expected)


def _gemini(candidates: Any, usage: Any = None, feedback: Any = None) -> _Obj:
    return _Obj(candidates=candidates, usage_metadata=usage, prompt_feedback=feedback)


def test_gemini_response_in_full() -> None:
    parts = [
        _Obj(text="T1", thought=True),
        _Obj(text="Hello ", thought=None),
        _Obj(text=None, thought=False),
        _Obj(text="T2", thought=True),
        _Obj(text="world", thought=False),
    ]
    second = _Obj(content=_Obj(parts=[_Obj(text="other", thought=False)]))
    response = _gemini(
        [_Obj(content=_Obj(parts=parts)), second],
        _Obj(prompt_token_count=1, candidates_token_count=2, total_token_count=3),
    )
    answer = from_gemini_response(response)
    assert (answer.text, answer.reasoning, answer.usage, answer.raw) == (
        "Hello world",
        "T1\n\nT2",
        Usage(1, 2, 3),
        {"dumped": True},
    )
    assert response.dumped_with == {
        "mode": "json",
        "by_alias": True,
        "exclude_none": True,
        "exclude": {"sdk_http_response"},
    }


@pytest.mark.parametrize("content", [None, _Obj(parts=None), _Obj(parts=[])])
def test_gemini_candidate_without_parts(content: Any) -> None:
    answer = from_gemini_response(_gemini([_Obj(content=content)]))
    assert (answer.text, answer.reasoning, answer.usage) == ("", None, None)


@pytest.mark.parametrize(
    ("feedback", "message"),
    [
        (None, "the API returned no candidate"),
        (_Obj(block_reason=None), "the API returned no candidate"),
        (_Obj(block_reason="OTHER"), "the API returned no candidate (prompt blocked: OTHER)"),
    ],
)
def test_gemini_without_a_candidate(feedback: Any, message: str) -> None:
    for candidates in (None, []):
        with pytest.raises(ValueError) as info:
            from_gemini_response(_gemini(candidates, feedback=feedback))
        assert str(info.value) == message


# --- Anthropic's output limit ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "max_tokens"),
    [
        ({}, 4096),
        ({"max_output_tokens": 100}, 100),
        ({"thinking_budget": 1024}, 1024 + 4096),
        ({"thinking_budget": 2000, "max_output_tokens": 2001}, 2001),
    ],
)
def test_anthropic_max_tokens(fields: dict[str, Any], max_tokens: int) -> None:
    settings = AnthropicSettings.model_validate({"model": "m", "api_key": "k", **fields})
    assert AnthropicProvider("a", settings).max_tokens() == max_tokens


def test_anthropic_thinking_budget_limits() -> None:
    ok = AnthropicSettings.model_validate({"model": "m", "thinking_budget": 1024})
    assert ok.thinking_budget == 1024
    with pytest.raises(ValueError, match="greater than or equal to 1024"):
        AnthropicSettings.model_validate({"model": "m", "thinking_budget": 1023})
    # without a budget any limit goes
    assert (
        AnthropicSettings.model_validate({"model": "m", "max_output_tokens": 1}).max_output_tokens
        == 1
    )


def test_openai_completion_without_a_choice() -> None:
    for data in ({}, {"choices": []}, {"choices": None}):
        with pytest.raises(ValueError) as info:
            from_openai_completion(data)
        assert str(info.value) == "the API answered without any choice"


def test_gemini_block_reason_said_by_its_name() -> None:
    class BlockedReason(enum.Enum):
        SAFETY = "SAFETY"

    with pytest.raises(ValueError) as info:
        from_gemini_response(_gemini([], feedback=_Obj(block_reason=BlockedReason.SAFETY)))
    assert str(info.value) == "the API returned no candidate (prompt blocked: SAFETY)"
    bare = _Obj(candidates=None, usage_metadata=None)  # no prompt_feedback at all
    with pytest.raises(ValueError, match=r"^the API returned no candidate$"):
        from_gemini_response(bare)


# --- how an answer ended ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("stop", "stop"),
        ("length", "length"),
        ("tool_calls", "tool_calls"),
        ("function_call", "tool_calls"),
        ("content_filter", "content_filter"),
        ("eos", "other"),  # a compatible server's own word
        (None, None),
        (7, None),
    ],
)
def test_openai_finish_reasons(raw: Any, reason: str | None) -> None:
    answer = from_openai_completion({"choices": [{"message": {}, "finish_reason": raw}]})
    assert answer.finish_reason == reason
    assert answer.finish_reason_raw == (raw if reason else None)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("max_tokens", "length"),
        ("model_context_window_exceeded", "length"),
        ("tool_use", "tool_calls"),
        ("refusal", "content_filter"),
        ("pause_turn", "other"),
        (None, None),
    ],
)
def test_anthropic_finish_reasons(raw: str | None, reason: str | None) -> None:
    answer = from_anthropic_message(_Obj(content=[], usage=None, stop_reason=raw))
    assert (answer.finish_reason, answer.finish_reason_raw) == (reason, raw)


class FinishReason(enum.Enum):  # the SDK parses the wire word into an enum like this
    STOP = "STOP"
    MAX_TOKENS = "MAX_TOKENS"
    SAFETY = "SAFETY"
    RECITATION = "RECITATION"
    MALFORMED_FUNCTION_CALL = "MALFORMED_FUNCTION_CALL"


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (FinishReason.STOP, "stop"),
        (FinishReason.MAX_TOKENS, "length"),
        (FinishReason.SAFETY, "content_filter"),
        (FinishReason.RECITATION, "content_filter"),
        (FinishReason.MALFORMED_FUNCTION_CALL, "other"),
        ("PROHIBITED_CONTENT", "content_filter"),
        (None, None),
    ],
)
def test_gemini_finish_reasons(raw: Any, reason: str | None) -> None:
    answer = from_gemini_response(_gemini([_Obj(content=None, finish_reason=raw)]))
    assert answer.finish_reason == reason
    assert answer.finish_reason_raw == (getattr(raw, "value", raw) if reason else None)


def test_gemini_function_calls_that_stop_are_tool_calls() -> None:
    call = _Obj(text=None, thought=None, function_call=_Obj(name="f", id=None, args={"x": 1}))
    candidate = _Obj(content=_Obj(parts=[call]), finish_reason=FinishReason.STOP)
    answer = from_gemini_response(_gemini([candidate]))
    assert (answer.finish_reason, answer.finish_reason_raw) == ("tool_calls", "STOP")
    assert answer.tool_calls == (ToolCall("call_0", "f", {"x": 1}),)  # no id: one of ours
