"""How each LM API's answer is read, through the real SDK clients: a loopback server
answers with a given JSON body, and the provider's response (or error) is compared whole.

The shared fake (``fakes.FakeLLMServer``) always answers well; these bodies are the unusual
ones: reasoning under its other names, several thinking blocks, no choice at all.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from agentv.errors import ProviderError
from agentv.providers.base import Provider, Usage
from agentv.providers.registry import provider_class
from support.providers import FAST_RETRIES, KEYS, MODELS, ask


class CannedAPI:
    """Answers every POST with ``body`` (status 200, JSON), counting the requests."""

    def __init__(self) -> None:
        self.body: Any = {}
        self.requests = 0
        canned = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                canned.requests += 1
                data = json.dumps(canned.body).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def canned() -> Iterator[CannedAPI]:
    api = CannedAPI()
    thread = threading.Thread(target=api.server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield api
    api.server.shutdown()
    api.server.server_close()


async def answer(kind: str, api: CannedAPI, body: Any) -> Any:
    """The provider's response to ``body`` (or the ProviderError it raised)."""
    api.body = body
    cls = provider_class(kind)
    fields = {"api_key": KEYS[kind], "model": MODELS[kind], **FAST_RETRIES}
    fields["base_url"] = f"{api.url}/v1" if kind == "openai" else api.url
    provider: Provider = cls("t", cls.Settings.model_validate(fields))
    try:
        return await provider.invoke(ask("hi"))
    except ProviderError as exc:
        return exc
    finally:
        await provider.aclose()


def completion(message: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"id": "c1", "object": "chat.completion", "created": 1, "model": "m"}
    if message is not None:
        body["choices"] = [{"index": 0, "message": message, "finish_reason": "stop"}]
    body.update(extra)
    return body


@pytest.mark.parametrize(
    ("message", "reasoning"),
    [
        ({"role": "assistant", "content": "42", "reasoning": "six times seven"}, "six times seven"),
        (
            {"role": "assistant", "content": "42", "reasoning_content": "six times seven"},
            "six times seven",
        ),
        (
            {"role": "assistant", "content": "42", "reasoning_content": "vLLM's", "reasoning": "x"},
            "vLLM's",
        ),
        ({"role": "assistant", "content": "42", "reasoning_content": "", "reasoning": "y"}, "y"),
        ({"role": "assistant", "content": "42", "reasoning": None}, None),
        ({"role": "assistant", "content": "42", "reasoning": {"summary": "z"}}, None),
    ],
)
async def test_openai_compatible_reasoning_under_either_name(
    canned: CannedAPI, message: dict[str, Any], reasoning: str | None
) -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}
    response = await answer("openai", canned, completion(message, usage=usage))
    assert (response.text, response.reasoning, response.usage) == ("42", reasoning, Usage(3, 1, 4))


@pytest.mark.parametrize(
    "body", [completion(None), completion(None, choices=[]), completion(None, choices=None)]
)
async def test_openai_completion_without_a_choice_is_an_error(
    canned: CannedAPI, body: dict[str, Any]
) -> None:
    error = await answer("openai", canned, body)
    assert isinstance(error, ProviderError)
    assert str(error) == "target 't' (openai): ValueError: the API answered without any choice"
    assert (error.retryable, error.attempts, canned.requests) == (False, 1, 1)


def anthropic_message(*content: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": list(content),
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 7, "output_tokens": 5},
    }


async def test_anthropic_several_thinking_blocks_are_joined(canned: CannedAPI) -> None:
    body = anthropic_message(
        {"type": "thinking", "thinking": "First, read.", "signature": "s1"},
        {"type": "text", "text": "The answer "},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "thinking", "thinking": "Then, check.", "signature": "s2"},
        {"type": "text", "text": "is 42."},
    )
    response = await answer("anthropic", canned, body)
    assert (response.text, response.reasoning, response.usage) == (
        "The answer is 42.",
        "First, read.\n\nThen, check.",
        Usage(7, 5, 12),
    )
    assert response.raw == body


async def test_anthropic_answer_without_thinking_has_no_reasoning(canned: CannedAPI) -> None:
    response = await answer("anthropic", canned, anthropic_message({"type": "text", "text": "ok"}))
    assert (response.text, response.reasoning) == ("ok", None)


def gemini_response(parts: list[dict[str, Any]] | None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "usageMetadata": {"promptTokenCount": 4, "candidatesTokenCount": 2, "totalTokenCount": 6}
    }
    if parts is not None:
        body["candidates"] = [{"content": {"role": "model", "parts": parts}, "index": 0}]
    body.update(extra)
    return body


async def test_gemini_thoughts_and_text(canned: CannedAPI) -> None:
    parts = [
        {"text": "Think.", "thought": True},
        {"text": "Forty"},
        {"functionCall": {"name": "f", "args": {}}},
        {"text": "Check.", "thought": True},
        {"text": "-two"},
    ]
    response = await answer("gemini", canned, gemini_response(parts))
    assert (response.text, response.reasoning, response.usage) == (
        "Forty-two",
        "Think.\n\nCheck.",
        Usage(4, 2, 6),
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (gemini_response(None), "the API returned no candidate"),
        (
            gemini_response(None, promptFeedback={"blockReason": "SAFETY"}),
            "the API returned no candidate (prompt blocked: SAFETY)",
        ),
    ],
)
async def test_gemini_without_a_candidate_is_an_error(
    canned: CannedAPI, body: dict[str, Any], message: str
) -> None:
    error = await answer("gemini", canned, body)
    assert isinstance(error, ProviderError)
    assert str(error) == f"target 't' (gemini): ValueError: {message}"
