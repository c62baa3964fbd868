"""What reaches each LM API, byte for byte: the real SDK clients against the loopback fake.

Every scenario of docs/prompt-rules.md (sections 5, 6 and 9) is run through all four
providers. Requests are built from real eval YAML (loader -> prompt builder -> request),
except the scenarios that are stated as requests.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import ValidationError

from agentv.messages import ChatMessage, ToolCall, chat_to_dicts
from agentv.prompts.builder import request_messages
from agentv.providers.anthropic import DEFAULT_MAX_TOKENS
from agentv.providers.base import ProviderRequest
from agentv.providers.gemini import GeminiProvider, GeminiSettings
from support.fakes import FakeLLMServer, RecordedRequest
from support.providers import KEYS, LM_KINDS, MODELS, EvalRequest, MakeProvider, ask

Turn = tuple[str, str]  # (neutral role, text)


def expected_body(kind: str, system: str | None, turns: list[Turn]) -> dict[str, Any]:
    """The JSON body each API must receive for a text-only conversation."""
    if kind in ("openai", "azure"):
        messages = [{"role": "system", "content": system}] if system is not None else []
        messages += [{"role": role, "content": text} for role, text in turns]
        return {"model": MODELS[kind], "messages": messages}
    if kind == "anthropic":
        body: dict[str, Any] = {"model": MODELS[kind], "max_tokens": DEFAULT_MAX_TOKENS}
        if system is not None:
            body["system"] = system
        body["messages"] = [{"role": role, "content": text} for role, text in turns]
        return body
    assert kind == "gemini"
    contents = [
        {"role": "model" if role == "assistant" else "user", "parts": [{"text": text}]}
        for role, text in turns
    ]
    body = {"contents": contents, "generationConfig": {}}
    if system is not None:
        body["systemInstruction"] = {"parts": [{"text": system}]}
    return body


def auth_key(kind: str, rec: RecordedRequest) -> str | None:
    """The key as found in the header that vendor's SDK authenticates with."""
    h = rec.headers
    if kind == "openai":
        return h.get("authorization", "").removeprefix("Bearer ")
    if kind == "azure":
        return h.get("api-key")
    if kind == "anthropic":
        # Depending on the SDK version: x-api-key, or a bearer Authorization header.
        return h.get("x-api-key") or h.get("authorization", "").removeprefix("Bearer ")
    return h.get("x-goog-api-key")


def check_request_line(kind: str, rec: RecordedRequest) -> None:
    """The path (and query) each API is called on."""
    if kind in ("openai", "azure"):
        # agentv gives the SDK an idempotency key of its own; these clients send none
        assert "idempotency-key" not in rec.headers
    if kind == "openai":
        assert rec.path == "/v1/chat/completions"
    elif kind == "azure":
        assert rec.path == f"/openai/deployments/{MODELS['azure']}/chat/completions"
        assert rec.query == {"api-version": "2024-10-01-preview"}
    elif kind == "anthropic":
        assert rec.path == "/v1/messages"
    else:
        assert rec.path == f"/v1beta/models/{MODELS['gemini']}:generateContent"


@dataclass
class Scenario:
    id: str
    input_messages: str  # YAML
    system: str | None  # the system content every provider must send
    turns: list[Turn]  # the other turns, in order
    files: dict[str, str] = field(default_factory=dict)
    # Anthropic and Gemini need a user turn; when there is none the question is added
    needs_user_turn: bool = False
    target_system_prompt: str | None = None


SCENARIOS = [
    Scenario(
        "single system and user message",
        """
        - role: system
          content: You are a helpful assistant.
        - role: user
          content: Hello, world!
        """,
        "You are a helpful assistant.",
        [("user", "Hello, world!")],
    ),
    Scenario(
        "multi-turn with assistant response: default system message added",
        """
        - role: user
          content: Debug this code
        - role: assistant
          content: I can help with that
        - role: user
          content: Thanks, here's the code
        """,
        "You are a careful assistant.",
        [
            ("user", "Debug this code"),
            ("assistant", "I can help with that"),
            ("user", "Thanks, here's the code"),
        ],
    ),
    Scenario(
        "system message with guidelines",
        """
        - role: user
          content:
            - {type: text, value: Review this code}
            - {type: file, value: ./guidelines.instructions.md}
        """,
        "You are a careful assistant.\n\n[[ ## Guidelines ## ]]\n\nAlways be concise",
        [("user", "Review this code\n<Attached: ./guidelines.instructions.md>")],
        files={"guidelines.instructions.md": "Always be concise\n"},
    ),
    Scenario(
        "embedded non-guideline file",
        """
        - role: user
          content:
            - {type: text, value: "Review this:"}
            - {type: file, value: ./code.js}
        """,
        "You are a careful assistant.",
        [("user", "Review this:\n=== ./code.js ===\nconsole.log('test')")],
        files={"code.js": "console.log('test')\n"},
    ),
    Scenario(
        "extract guideline from user message",
        """
        - role: user
          content:
            - {type: file, value: python.instructions.md}
            - {type: text, value: Write a function}
        """,
        "You are a careful assistant.\n\n[[ ## Guidelines ## ]]\n\nUse type hints.",
        [("user", "<Attached: python.instructions.md>\nWrite a function")],
        files={"python.instructions.md": "Use type hints.\n"},
    ),
    Scenario(
        "multiple guideline files",
        """
        - role: user
          content:
            - {type: file, value: python.instructions.md}
            - {type: file, value: security.instructions.md}
        """,
        "You are a careful assistant.\n\n[[ ## Guidelines ## ]]\n\n"
        "=== python.instructions.md ===\nUse type hints.\n\n"
        "=== security.instructions.md ===\nNever log secrets.",
        [("user", "<Attached: python.instructions.md>\n<Attached: security.instructions.md>")],
        files={
            "python.instructions.md": "Use type hints.\n",
            "security.instructions.md": "Never log secrets.\n",
        },
    ),
    Scenario(
        "message with only guideline files",
        """
        - role: system
          content: System context
        - role: user
          content:
            - {type: file, value: guidelines.instructions.md}
        """,
        "System context\n\n[[ ## Guidelines ## ]]\n\nBe brief.",
        [],
        files={"guidelines.instructions.md": "Be brief.\n"},
        needs_user_turn=True,
    ),
    Scenario(
        "explicit system message replaces the configured system prompt",
        """
        - role: system
          content: Custom system context
        - role: user
          content:
            - {type: text, value: Hello}
            - {type: file, value: concise.instructions.md}
        """,
        "Custom system context\n\n[[ ## Guidelines ## ]]\n\nBe concise",
        [("user", "Hello\n<Attached: concise.instructions.md>")],
        files={"concise.instructions.md": "Be concise\n"},
        target_system_prompt="Default prompt",
    ),
    Scenario(
        "configured system prompt when the conversation has none",
        """
        - role: user
          content: Hello
        - role: assistant
          content: Hi there
        - role: user
          content: Help me
        """,
        "You review code for a bank.",
        [("user", "Hello"), ("assistant", "Hi there"), ("user", "Help me")],
        target_system_prompt="You review code for a bank.",
    ),
]


@pytest.mark.parametrize("kind", LM_KINDS)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
async def test_scenario_on_the_wire(
    kind: str,
    scenario: Scenario,
    llm_server: FakeLLMServer,
    make_provider: MakeProvider,
    eval_request: EvalRequest,
) -> None:
    extra = (
        {"system_prompt": scenario.target_system_prompt} if scenario.target_system_prompt else {}
    )
    provider = make_provider(kind, **extra)
    request = eval_request(scenario.input_messages, scenario.files, target=provider)
    response = await provider.invoke(request)

    assert len(llm_server.requests) == 1
    rec = llm_server.requests[0]
    check_request_line(kind, rec)
    assert auth_key(kind, rec) == KEYS[kind]

    turns = list(scenario.turns)
    added = scenario.needs_user_turn and kind in ("anthropic", "gemini")
    if added:
        turns.insert(0, ("user", request.question))
    assert rec.body == expected_body(kind, scenario.system, turns)

    # Nothing sent carries a role marker; the key never travels in the body.
    wire = rec.raw.decode()
    assert "@[" not in wire
    assert KEYS[kind] not in wire

    # The request's messages are the neutral form of exactly that (what results show).
    neutral = [{"role": "system", "content": scenario.system}] if scenario.system else []
    neutral += [{"role": r, "content": t} for r, t in turns]
    assert chat_to_dicts(request.messages) == neutral
    assert response.text == "Hello from the fake LLM."


def _same_as_wire(kind: str, rec: RecordedRequest, payload: dict[str, Any]) -> bool:
    """A provider's recorded payload equals the body on the wire (Gemini: model in the URL)."""
    if kind == "gemini":
        payload = {k: v for k, v in payload.items() if k != "model"}
        payload.setdefault("generationConfig", {})
    return rec.body == payload


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_preview_and_sent_payload_are_what_goes_on_the_wire(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider, eval_request: EvalRequest
) -> None:
    provider = make_provider(kind, temperature=0.2, max_output_tokens=300)
    request = eval_request(
        """
        - role: system
          content: Be exact.
        - role: user
          content: What is 2+2?
        - role: assistant
          content: "4"
        - role: user
          content: And 3+3?
        """
    )
    preview = provider.preview(request)
    assert llm_server.requests == []  # preview calls nothing
    response = await provider.invoke(request)
    assert response.sent["request"] == preview
    assert _same_as_wire(kind, llm_server.requests[0], preview)
    # the settings as sent: everything but the conversation, under the wire's own names
    model = MODELS[kind]
    limit = {
        "openai": ("max_tokens", {"model": model, "temperature": 0.2, "max_tokens": 300}),
        "azure": ("max_tokens", {"model": model, "temperature": 0.2, "max_tokens": 300}),
        "anthropic": ("max_tokens", {"model": model, "max_tokens": 300, "temperature": 0.2}),
        "gemini": (
            "generationConfig.maxOutputTokens",
            {"model": model, "generationConfig": {"temperature": 0.2, "maxOutputTokens": 300}},
        ),
    }
    param, settings = limit[kind]
    assert response.sent["settings"] == settings
    assert response.sent["token_limit"] == {"param": param, "value": 300}
    assert set(response.sent) == {"request", "settings", "token_limit"}


# --- requests stated directly -----------------------------------------------------------


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_request_messages_are_sent_as_they_are_and_guidelines_ignored(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    # The messages are final: neither the target's system prompt nor `guidelines` is added.
    provider = make_provider(kind, system_prompt="Configured prompt")
    request = ProviderRequest(
        question="@[System]:\nSystem with guidelines already merged\n\n@[User]:\nHello",
        messages=[
            ChatMessage("system", "System with guidelines already merged"),
            ChatMessage("user", "Hello"),
        ],
        guidelines="Old guideline 1\nOld guideline 2",
    )
    await provider.invoke(request)
    body = llm_server.requests[0].body
    assert body == expected_body(kind, "System with guidelines already merged", [("user", "Hello")])
    assert "Old guideline" not in llm_server.requests[0].raw.decode()
    assert "Configured prompt" not in llm_server.requests[0].raw.decode()


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_plain_question_request(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    provider = make_provider(kind)
    await provider.invoke(ask("What is the capital of France?"))
    assert llm_server.requests[0].body == expected_body(
        kind, "You are a careful assistant.", [("user", "What is the capital of France?")]
    )


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_judge_request_sends_the_judges_own_messages(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    # A judge's request: its system prompt, not the target's configured one.
    provider = make_provider(kind, system_prompt="Target prompt")
    request = ProviderRequest(
        question="Grade this answer.",
        messages=request_messages(
            "Grade this answer.", system_prompt="You are a grader.", guidelines="Be strict."
        ),
    )
    await provider.invoke(request)
    assert llm_server.requests[0].body == expected_body(
        kind,
        "You are a grader.\n\n[[ ## Guidelines ## ]]\n\nBe strict.",
        [("user", "Grade this answer.")],
    )


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_request_overrides_the_model_and_target_settings_apply(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    provider = make_provider(kind, temperature=0.7, max_output_tokens=100)
    await provider.invoke(ask("hi"))
    await provider.invoke(ask("hi", model="judge-model"))
    target, judge = (r for r in llm_server.requests)
    if kind in ("openai", "azure"):
        for rec in (target, judge):
            # a server other than OpenAI's (or Azure's) own gets the limit as max_tokens
            assert (rec.body["temperature"], rec.body["max_tokens"]) == (0.7, 100)
            assert "max_completion_tokens" not in rec.body
        assert judge.body["model"] == "judge-model"
        if kind == "azure":  # the deployment is chosen by the path
            assert judge.path == "/openai/deployments/judge-model/chat/completions"
    elif kind == "anthropic":
        for rec in (target, judge):
            assert (rec.body["temperature"], rec.body["max_tokens"]) == (0.7, 100)
        assert judge.body["model"] == "judge-model"
    else:
        for rec in (target, judge):
            assert rec.body["generationConfig"] == {"temperature": 0.7, "maxOutputTokens": 100}
        assert judge.path == "/v1beta/models/judge-model:generateContent"


async def test_azure_deployment_name_is_encoded_into_the_path(
    llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    provider = make_provider("azure", model="team/gpt 4o")
    await provider.invoke(ask("hi"))

    (rec,) = llm_server.requests
    assert rec.raw_path == "/openai/deployments/team%2Fgpt%204o/chat/completions"
    assert rec.body["model"] == "team/gpt 4o"
    assert rec.query["api-version"]


@pytest.mark.parametrize("kind", ["openai", "azure"])
@pytest.mark.parametrize("param", ["max_tokens", "max_completion_tokens"])
async def test_max_tokens_param_names_the_limit_on_the_wire(
    kind: str, param: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    provider = make_provider(kind, max_output_tokens=50, max_tokens_param=param)
    await provider.invoke(ask("hi"))
    body = llm_server.requests[0].body
    assert body[param] == 50
    other = {"max_tokens", "max_completion_tokens"} - {param}
    assert not other & set(body)


# --- tool calls (docs/prompt-rules.md 5.4) -------------------------------------------------------------

TOOL_CONVERSATION = """
- role: user
  content: What is the weather in Paris?
- role: assistant
  content: Let me check.
  tool_calls:
    - id: call_1
      name: get_weather
      arguments: {city: Paris}
- role: tool
  tool_call_id: call_1
  name: get_weather
  content: '{"temp_c": 21}'
- role: user
  content: And is that warm?
"""


async def test_tool_calls_openai_native(
    llm_server: FakeLLMServer, make_provider: MakeProvider, eval_request: EvalRequest
) -> None:
    await make_provider("openai").invoke(eval_request(TOOL_CONVERSATION))
    assert llm_server.requests[0].body["messages"] == [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "content": "Let me check.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": '{"temp_c": 21}'},
        {"role": "user", "content": "And is that warm?"},
    ]


async def test_tool_calls_anthropic_native(
    llm_server: FakeLLMServer, make_provider: MakeProvider, eval_request: EvalRequest
) -> None:
    await make_provider("anthropic").invoke(eval_request(TOOL_CONVERSATION))
    body = llm_server.requests[0].body
    assert body["system"] == "You are a careful assistant."
    # The tool result and the next user text are one user turn: roles must alternate.
    assert body["messages"] == [
        {"role": "user", "content": "What is the weather in Paris?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me check."},
                {
                    "type": "tool_use",
                    "id": "call_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": '{"temp_c": 21}'},
                {"type": "text", "text": "And is that warm?"},
            ],
        },
    ]


async def test_tool_calls_gemini_native(
    llm_server: FakeLLMServer, make_provider: MakeProvider, eval_request: EvalRequest
) -> None:
    await make_provider("gemini").invoke(eval_request(TOOL_CONVERSATION))
    body = llm_server.requests[0].body
    assert body["systemInstruction"] == {"parts": [{"text": "You are a careful assistant."}]}
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "What is the weather in Paris?"}]},
        {
            "role": "model",
            "parts": [
                {"text": "Let me check."},
                {
                    "functionCall": {
                        "id": "call_1",
                        "name": "get_weather",
                        "args": {"city": "Paris"},
                    }
                },
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "call_1",
                        "name": "get_weather",
                        "response": {"output": '{"temp_c": 21}'},
                    }
                },
                {"text": "And is that warm?"},
            ],
        },
    ]


UNPAIRED_TOOL = """
- role: user
  content: Summarise the log.
- role: tool
  content: disk full at 03:00
"""


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_unpaired_tool_message_goes_as_a_marked_user_turn(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider, eval_request: EvalRequest
) -> None:
    await make_provider(kind).invoke(eval_request(UNPAIRED_TOOL))
    body = llm_server.requests[0].body
    fallback = "@[Tool]:\ndisk full at 03:00"
    if kind in ("openai", "azure"):
        assert body["messages"][1:] == [
            {"role": "user", "content": "Summarise the log."},
            {"role": "user", "content": fallback},
        ]
    elif kind == "anthropic":
        assert body["messages"] == [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Summarise the log."},
                    {"type": "text", "text": fallback},
                ],
            }
        ]
    else:
        assert body["contents"] == [
            {"role": "user", "parts": [{"text": "Summarise the log."}, {"text": fallback}]}
        ]
    # The only marker on the wire is that fallback's.
    assert json.dumps(body).count("@[") == 1


# --- vendor-specific shapes ---------------------------------------------------------------------


async def test_anthropic_merges_same_role_turns_and_sends_a_prefill(
    llm_server: FakeLLMServer, make_provider: MakeProvider, eval_request: EvalRequest
) -> None:
    request = eval_request(
        """
        - role: user
          content: First part.
        - role: user
          content: Second part.
        - role: assistant
          content: "The answer is "
        """
    )
    await make_provider("anthropic").invoke(request)
    assert llm_server.requests[0].body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "First part."},
                {"type": "text", "text": "Second part."},
            ],
        },
        # the final assistant turn is the prefill; the API refuses trailing whitespace there
        {"role": "assistant", "content": "The answer is"},
    ]


async def test_anthropic_thinking_budget_is_sent_and_reasoning_returned(
    llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.reasoning = "Let me think step by step."
    response = await make_provider("anthropic", thinking_budget=2048).invoke(ask("hi"))
    body = llm_server.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] > 2048  # room for the answer above the budget
    assert response.reasoning == "Let me think step by step."
    assert response.text == "Hello from the fake LLM."


async def test_gemini_default_model_and_assistant_role(
    llm_server: FakeLLMServer, eval_request: EvalRequest
) -> None:
    settings = GeminiSettings.model_validate(
        {"api_key": KEYS["gemini"], "base_url": llm_server.url}
    )
    gemini = GeminiProvider("g", settings)  # no `model`: the default one
    try:
        await gemini.invoke(
            eval_request("- {role: user, content: Hi}\n- {role: assistant, content: Yo}")
        )
    finally:
        await gemini.aclose()
    rec = llm_server.requests[0]
    assert rec.path == "/v1beta/models/gemini-2.5-flash:generateContent"
    assert [c["role"] for c in rec.body["contents"]] == ["user", "model"]


# --- behaviours pinned by issue 17: whole bodies --------------------------------------------


async def test_openai_sends_the_name_of_user_and_assistant_messages(
    llm_server: FakeLLMServer, make_provider: MakeProvider, eval_request: EvalRequest
) -> None:
    request = eval_request(
        """
        - {role: user, name: alice, content: Is 7 prime?}
        - {role: assistant, name: tutor, content: "Yes."}
        - {role: user, content: And 9?}
        """
    )
    await make_provider("openai").invoke(request)
    assert llm_server.requests[0].body["messages"] == [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "Is 7 prime?", "name": "alice"},
        {"role": "assistant", "content": "Yes.", "name": "tutor"},
        {"role": "user", "content": "And 9?"},
    ]


TOOL_CALLS_ONLY = """
- role: user
  content: Weather in Paris and Oslo?
- role: assistant
  tool_calls:
    - {id: call_1, name: get_weather, arguments: {city: Paris}}
    - {id: call_2, name: get_weather, arguments: '{"city": "Oslo"}'}
- {role: tool, tool_call_id: call_1, content: "21"}
- {role: tool, tool_call_id: call_2, content: "9"}
"""


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_assistant_turn_with_only_tool_calls(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider, eval_request: EvalRequest
) -> None:
    await make_provider(kind).invoke(eval_request(TOOL_CALLS_ONLY))
    body = llm_server.requests[0].body
    if kind in ("openai", "azure"):
        call = {"type": "function"}
        assert body["messages"] == [
            {"role": "system", "content": "You are a careful assistant."},
            {"role": "user", "content": "Weather in Paris and Oslo?"},
            {
                "role": "assistant",  # no "content": strict servers reject null and ""
                "tool_calls": [
                    {
                        "id": "call_1",
                        **call,
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    },
                    {
                        "id": "call_2",
                        **call,
                        "function": {"name": "get_weather", "arguments": '{"city":"Oslo"}'},
                    },
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "21"},
            {"role": "tool", "tool_call_id": "call_2", "content": "9"},
        ]
    elif kind == "anthropic":
        assert body["messages"] == [
            {"role": "user", "content": "Weather in Paris and Oslo?"},
            {
                "role": "assistant",
                "content": [  # no empty text block
                    {
                        "type": "tool_use",
                        "id": "call_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    },
                    {
                        "type": "tool_use",
                        "id": "call_2",
                        "name": "get_weather",
                        "input": {"city": "Oslo"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "call_1", "content": "21"},
                    {"type": "tool_result", "tool_use_id": "call_2", "content": "9"},
                ],
            },
        ]
    else:
        result = {"name": "get_weather"}
        assert body["contents"] == [
            {"role": "user", "parts": [{"text": "Weather in Paris and Oslo?"}]},
            {
                "role": "model",
                "parts": [
                    {"functionCall": {"id": "call_1", **result, "args": {"city": "Paris"}}},
                    {"functionCall": {"id": "call_2", **result, "args": {"city": "Oslo"}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "id": "call_1",
                            **result,
                            "response": {"output": "21"},
                        }
                    },
                    {"functionResponse": {"id": "call_2", **result, "response": {"output": "9"}}},
                ],
            },
        ]


MISMATCHED_TOOL = """
- role: user
  content: Check the disk.
- role: tool
  tool_call_id: call_1
  content: too early
- role: assistant
  content: Checking.
  tool_calls: [{id: call_1, name: df, arguments: {}}]
- role: tool
  tool_call_id: call_9
  content: disk full
"""


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_tool_result_matching_no_earlier_call_goes_as_a_marked_user_turn(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider, eval_request: EvalRequest
) -> None:
    # call_1 is answered before it is made; call_9 was never made: neither is native.
    request = eval_request(MISMATCHED_TOOL)
    assert chat_to_dicts(request.messages) == [
        {"role": "system", "content": "You are a careful assistant."},
        {"role": "user", "content": "Check the disk."},
        {"role": "user", "content": "@[Tool]:\ntoo early"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [{"id": "call_1", "name": "df", "arguments": {}}],
        },
        {"role": "user", "content": "@[Tool]:\ndisk full"},
    ]
    await make_provider(kind).invoke(request)
    body = llm_server.requests[0].body
    if kind in ("openai", "azure"):
        assert body["messages"][1:] == [
            {"role": "user", "content": "Check the disk."},
            {"role": "user", "content": "@[Tool]:\ntoo early"},
            {
                "role": "assistant",
                "content": "Checking.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "df", "arguments": "{}"},
                    }
                ],
            },
            {"role": "user", "content": "@[Tool]:\ndisk full"},
        ]
    elif kind == "anthropic":
        assert body["messages"] == [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Check the disk."},
                    {"type": "text", "text": "@[Tool]:\ntoo early"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "call_1", "name": "df", "input": {}},
                ],
            },
            {"role": "user", "content": "@[Tool]:\ndisk full"},
        ]
    else:
        assert body["contents"] == [
            {
                "role": "user",
                "parts": [{"text": "Check the disk."}, {"text": "@[Tool]:\ntoo early"}],
            },
            {
                "role": "model",
                "parts": [
                    {"text": "Checking."},
                    {"functionCall": {"id": "call_1", "name": "df", "args": {}}},
                ],
            },
            {"role": "user", "parts": [{"text": "@[Tool]:\ndisk full"}]},
        ]


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_added_user_turn_comes_first_when_the_prompt_has_only_an_assistant_turn(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider, eval_request: EvalRequest
) -> None:
    provider = make_provider(kind)
    request = eval_request(
        """
        - {role: system, content: Continue the story.}
        - {role: assistant, content: "Once upon a time "}
        """,
        target=provider,
    )
    question = "@[System]:\nContinue the story.\n\n@[Assistant]:\nOnce upon a time"
    assert request.question == question
    await provider.invoke(request)
    body = llm_server.requests[0].body
    if kind == "anthropic":
        assert body == {
            "model": MODELS[kind],
            "max_tokens": DEFAULT_MAX_TOKENS,
            "system": "Continue the story.",
            # the user turn first (the API wants one), then the prefill, right-stripped
            "messages": [
                {"role": "user", "content": question},
                {"role": "assistant", "content": "Once upon a time"},
            ],
        }
    elif kind == "gemini":
        assert body["contents"] == [
            {"role": "user", "parts": [{"text": question}]},
            {"role": "model", "parts": [{"text": "Once upon a time"}]},
        ]
    else:  # OpenAI and Azure take the list unchanged
        assert body["messages"] == [
            {"role": "system", "content": "Continue the story."},
            {"role": "assistant", "content": "Once upon a time"},
        ]


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_whitespace_only_target_system_prompt_sends_the_default(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider, eval_request: EvalRequest
) -> None:
    provider = make_provider(kind, system_prompt=" \n\t ")
    await provider.invoke(eval_request("- {role: user, content: Hello}", target=provider))
    assert llm_server.requests[0].body == expected_body(
        kind, "You are a careful assistant.", [("user", "Hello")]
    )


@pytest.mark.parametrize("kind", ["anthropic", "gemini"])
async def test_whitespace_only_text_is_never_sent_as_a_block(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    # A request stated directly (as an API caller may build one): blank text next to tool
    # calls, and a blank user text, send no text block or part at all.
    request = ProviderRequest(
        question="q",
        messages=[
            ChatMessage("system", "S"),
            ChatMessage("user", "Look it up."),
            ChatMessage("user", " \n "),
            ChatMessage("assistant", "  \n", tool_calls=(ToolCall("c1", "find", {"q": 1}),)),
            ChatMessage("tool", "found", tool_call_id="c1"),
            ChatMessage("assistant", "\t"),
        ],
    )
    await make_provider(kind).invoke(request)
    body = llm_server.requests[0].body
    if kind == "anthropic":
        assert body["messages"] == [
            {"role": "user", "content": "Look it up."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "c1", "name": "find", "input": {"q": 1}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "found"}],
            },
        ]
    else:
        assert body["contents"] == [
            {"role": "user", "parts": [{"text": "Look it up."}]},
            {
                "role": "model",
                "parts": [{"functionCall": {"id": "c1", "name": "find", "args": {"q": 1}}}],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "id": "c1",
                            "name": "find",
                            "response": {"output": "found"},
                        }
                    }
                ],
            },
        ]


def test_anthropic_max_output_tokens_equal_to_the_thinking_budget_is_refused(
    make_provider: MakeProvider,
) -> None:
    with pytest.raises(ValidationError) as info:
        make_provider("anthropic", thinking_budget=2048, max_output_tokens=2048)
    (error,) = info.value.errors()
    assert error["msg"] == (
        "Value error, max_output_tokens must be greater than thinking_budget "
        "(the thinking tokens count towards it)"
    )


async def test_anthropic_max_output_tokens_just_above_the_thinking_budget(
    llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    provider = make_provider("anthropic", thinking_budget=1024, max_output_tokens=1025)
    await provider.invoke(ask("hi"))
    assert llm_server.requests[0].body == {
        "model": MODELS["anthropic"],
        "max_tokens": 1025,
        "system": "You are a careful assistant.",
        "messages": [{"role": "user", "content": "hi"}],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }


async def test_anthropic_thinking_without_a_limit_leaves_room_for_the_answer(
    llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    await make_provider("anthropic", thinking_budget=2048).invoke(ask("hi"))
    body = llm_server.requests[0].body
    assert (body["max_tokens"], body["thinking"]) == (
        2048 + 4096,
        {"type": "enabled", "budget_tokens": 2048},
    )
