"""Building providers: settings, keys, missing SDKs, and what a response carries."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentv.errors import ConfigError
from agentv.providers.anthropic import AnthropicProvider, AnthropicSettings
from agentv.providers.openai import (
    AzureOpenAIProvider,
    AzureOpenAISettings,
    OpenAIProvider,
    OpenAISettings,
)
from agentv.providers.registry import provider_class
from agentv.targets import create_provider, discover_targets_file, load_targets_file
from support.fakes import FakeLLMServer
from support.files import write
from support.providers import KEYS, LM_KINDS, EvalRequest, MakeProvider, ask, provider_fields


@pytest.mark.slow
def test_provider_modules_import_without_their_sdks() -> None:
    code = (
        "import sys\n"
        "import agentv.targets, agentv.providers.openai, agentv.providers.anthropic\n"
        "import agentv.providers.gemini, agentv.providers.llm\n"
        "print([m for m in ('openai', 'anthropic', 'google.genai') if m in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


#: what each extra adds, as pyproject.toml declares it (what the error tells to install)
REQUIREMENTS = {
    "openai": "openai[aiohttp]>=2.16",
    "anthropic": "anthropic[aiohttp]>=0.55",
    "gemini": "google-genai>=1.0",
}


@pytest.mark.parametrize(
    ("kind", "module", "extra"),
    [
        ("openai", "openai", "openai"),
        ("azure", "openai", "openai"),
        ("anthropic", "anthropic", "anthropic"),
        ("gemini", "google.genai", "gemini"),
    ],
)
def test_missing_sdk_says_which_extra_to_install(
    kind: str, module: str, extra: str, monkeypatch: pytest.MonkeyPatch, llm_server: FakeLLMServer
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` fail
    cls = provider_class(kind)
    settings = cls.Settings.model_validate(provider_fields(kind, llm_server))
    with pytest.raises(ConfigError) as info:
        cls("t", settings)
    assert str(info.value) == (
        f"target 't' ({kind}) needs the {module!r} package, which is not installed; "
        f"install agentv's `{extra}` extra: pip install '{REQUIREMENTS[extra]}'"
    )


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_response_carries_usage_latency_raw_and_reasoning(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.reasoning = "Thinking it over."
    extra = {"thinking_budget": 1024} if kind == "anthropic" else {}
    response = await make_provider(kind, **extra).invoke(ask(question="one two three"))
    assert response.text == "Hello from the fake LLM."
    assert response.reasoning == "Thinking it over."
    assert response.usage is not None
    assert response.usage.output_tokens == 5  # the fake counts words
    assert response.usage.input_tokens and response.usage.input_tokens > 3
    assert response.usage.total_tokens == response.usage.input_tokens + 5
    assert response.latency_ms is not None and response.latency_ms > 0
    json.dumps(response.raw)  # JSON-ready
    assert "Hello from the fake LLM." in json.dumps(response.raw)


@pytest.mark.parametrize("kind", LM_KINDS)
def test_secrets_stay_out_of_previews_and_reprs(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    provider = make_provider(kind)
    preview = provider.preview(ask(question="hi"))
    assert KEYS[kind] not in json.dumps(preview)
    assert KEYS[kind] not in repr(provider.settings)


def test_azure_endpoint_may_be_a_resource_name_and_version_a_pasted_query() -> None:
    settings = AzureOpenAISettings.model_validate(
        {
            "resourceName": "contoso",
            "deploymentName": "gpt4o-prod",
            "apiKey": "k",
            "version": "api-version=2025-01-01-preview",
        }
    )
    assert settings.endpoint_url == "https://contoso.openai.azure.com"
    assert settings.model == "gpt4o-prod"
    assert settings.api_version == "2025-01-01-preview"
    blank = AzureOpenAISettings.model_validate(
        {"endpoint": "https://x.example/", "model": "d", "api_version": " "}
    )
    assert blank.api_version == "2024-10-01-preview"
    assert blank.endpoint_url == "https://x.example"


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({}, "max_completion_tokens"),  # OpenAI's own API
        ({"base_url": "https://api.openai.com/v1"}, "max_completion_tokens"),
        ({"base_url": "http://localhost:8000/v1"}, "max_tokens"),  # llama.cpp, vLLM, ...
        ({"base_url": "https://gateway.example/openai/v1"}, "max_tokens"),
        (
            {"base_url": "http://localhost:8000/v1", "maxTokensParam": "max_completion_tokens"},
            "max_completion_tokens",
        ),
        ({"max_tokens_param": "max_tokens"}, "max_tokens"),
    ],
)
def test_openai_sends_the_limit_under_the_name_its_server_knows(
    fields: dict[str, str], param: str
) -> None:
    settings = OpenAISettings.model_validate({"model": "m", **fields})
    assert settings.token_limit_param == param


@pytest.mark.parametrize(
    ("endpoint", "fields", "param"),
    [
        ("contoso", {}, "max_completion_tokens"),
        ("https://contoso.openai.azure.com", {}, "max_completion_tokens"),
        ("https://contoso.cognitiveservices.azure.com/", {}, "max_completion_tokens"),
        ("https://apim.example.com/aoai", {}, "max_tokens"),
        (
            "https://apim.example.com",
            {"max_tokens_param": "max_completion_tokens"},
            "max_completion_tokens",
        ),
        ("contoso", {"max_tokens_param": "max_tokens"}, "max_tokens"),
    ],
)
def test_azure_sends_the_limit_under_the_name_its_endpoint_knows(
    endpoint: str, fields: dict[str, str], param: str
) -> None:
    settings = AzureOpenAISettings.model_validate({"endpoint": endpoint, "model": "d", **fields})
    assert settings.token_limit_param == param


def test_missing_key_names_the_target_and_the_variable_to_set() -> None:
    with pytest.raises(ConfigError) as info:
        AnthropicProvider("claude", AnthropicSettings(model="claude-test"))
    text = str(info.value)
    assert "'claude'" in text and "ANTHROPIC_API_KEY" in text and "targets.yaml" in text


def test_vendor_key_from_environment_only_for_the_vendors_own_endpoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    official = OpenAIProvider("a", OpenAISettings(model="m"))
    assert official._client.api_key == "sk-from-env"
    # A custom base URL (gateway, local server) never receives the vendor key unasked.
    local = OpenAIProvider("b", OpenAISettings(model="m", base_url="http://127.0.0.1:9/v1"))
    assert local._client.api_key == "EMPTY"
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "az-from-env")
    azure = AzureOpenAIProvider("c", AzureOpenAISettings(endpoint="contoso", model="d"))
    assert azure._client.api_key == "az-from-env"


def test_anthropic_output_limit_must_leave_room_above_the_thinking_budget() -> None:
    with pytest.raises(ValueError, match="greater than thinking_budget"):
        AnthropicSettings(model="m", thinking_budget=2048, max_output_tokens=1000)
    settings = AnthropicSettings(model="m", thinking_budget=2048)
    provider = AnthropicProvider("t", settings.model_copy(update={"api_key": "k"}))
    assert provider.max_tokens() > 2048
    assert AnthropicProvider("t", AnthropicSettings(model="m", api_key="k")).max_tokens() == 4096


async def test_from_targets_yaml_to_the_wire(
    repo: Path, llm_server: FakeLLMServer, eval_request: EvalRequest
) -> None:
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n"
        "  - name: gateway\n    provider: openai-compatible\n"
        "    baseUrl: http://${{ GATEWAY }}/v1\n    apiKey: ${{ GATEWAY_KEY }}\n"
        "    model: served-model\n    systemPrompt: You are the gateway's model.\n",
    )
    eval_file = write(repo, "evals/x.yaml", "")
    targets = load_targets_file(discover_targets_file(eval_file, repo, repo))
    env = {"GATEWAY": llm_server.url.removeprefix("http://"), "GATEWAY_KEY": "gw-key-123"}
    provider = create_provider(targets.get("gateway"), env)
    try:
        request = eval_request("- {role: user, content: Hi}", target=provider)
        await provider.invoke(request)
    finally:
        await provider.aclose()
    rec = llm_server.requests[0]
    assert rec.headers["authorization"] == "Bearer gw-key-123"
    assert rec.body == {
        "model": "served-model",
        "messages": [
            {"role": "system", "content": "You are the gateway's model."},
            {"role": "user", "content": "Hi"},
        ],
    }
