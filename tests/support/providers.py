"""Providers aimed at the loopback fake LM server, and the requests they get: the keys,
models and settings of each LM API kind, and the types of the provider fixtures
(``tests/providers/conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentv.prompts.builder import request_messages
from agentv.providers.base import Provider, ProviderRequest
from support.fakes import FakeLLMServer

#: A distinct fake key per provider, to check each reaches (only) its auth header.
KEYS = {
    "openai": "sk-test-openai-5f2c",
    "azure": "az-test-key-77d1",
    "anthropic": "sk-ant-test-91ab",
    "gemini": "gm-test-key-0c3e",
}
MODELS = {
    "openai": "gpt-test",
    "azure": "my-deployment",
    "anthropic": "claude-test",
    "gemini": "gemini-test",
}
LM_KINDS = ("openai", "azure", "anthropic", "gemini")

#: Tiny retry delays so retry tests take milliseconds.
FAST_RETRIES = {"retry_initial_delay_ms": 1, "retry_max_delay_ms": 5}


def provider_fields(kind: str, server: FakeLLMServer, **extra: Any) -> dict[str, Any]:
    """A target's fields (as in targets.yaml) pointing a provider of ``kind`` at ``server``.

    Args:
        kind: one of ``LM_KINDS``.
        server: the loopback fake.
        **extra: more fields, or other values for these (they come last).

    Returns:
        ``api_key`` (``KEYS[kind]``), ``model`` (``MODELS[kind]``), the server's address
        (``base_url``, or Azure's ``endpoint``), ``FAST_RETRIES``, then ``extra``.
    """
    fields: dict[str, Any] = {"api_key": KEYS[kind], "model": MODELS[kind]}
    if kind == "openai":
        fields["base_url"] = f"{server.url}/v1"
    elif kind == "azure":
        fields["endpoint"] = server.url
    else:
        fields["base_url"] = server.url
    fields.update(FAST_RETRIES)
    fields.update(extra)
    return fields


def ask(question: str, **fields: Any) -> ProviderRequest:
    """A request that is not a conversation: the question as the user turn after the
    default system message (with ``guidelines`` when given), as prompt building makes it."""
    messages = request_messages(question, guidelines=fields.get("guidelines", ""))
    return ProviderRequest(question=question, messages=messages, **fields)


#: ``make_provider(kind, name="t", **fields)``: a provider of that kind aimed at the fake
MakeProvider = Callable[..., Provider]
#: ``eval_request(input_messages_yaml, files=None, target=None)``: a request built as a run
#: builds it
EvalRequest = Callable[..., ProviderRequest]
