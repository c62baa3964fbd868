"""Constants and helpers shared by the provider tests (fixtures live in conftest.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
    """targets.yaml fields pointing a provider of ``kind`` at the fake server."""
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


MakeProvider = Callable[..., Provider]
EvalRequest = Callable[..., ProviderRequest]
