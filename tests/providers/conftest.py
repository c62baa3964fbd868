"""Fixtures for provider tests: the loopback fake LM server, providers pointed at it, and
requests built from real eval YAML (loader -> prompt builder -> request)."""

from __future__ import annotations

import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentv.evalfile.loader import load_eval_file
from agentv.prompts.builder import LM, PromptSettings, build_prompt
from agentv.providers.base import Provider, ProviderRequest, request_for_case
from agentv.providers.registry import provider_class
from support.fakes import FakeLLMServer
from support.files import write
from support.providers import EvalRequest, MakeProvider, provider_fields


@pytest.fixture
def llm_server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as server:
        yield server


@pytest.fixture
async def make_provider(llm_server: FakeLLMServer) -> AsyncIterator[MakeProvider]:
    """``make_provider(kind, **fields)``: a provider of that kind aimed at ``llm_server``."""
    made: list[Provider] = []

    def factory(kind: str, name: str = "t", **extra: Any) -> Provider:
        cls = provider_class(kind)
        settings = cls.Settings.model_validate(provider_fields(kind, llm_server, **extra))
        provider = cls(name, settings)
        made.append(provider)
        return provider

    yield factory
    for provider in made:
        await provider.aclose()


@pytest.fixture
def eval_request(repo: Path) -> EvalRequest:
    """``eval_request(input_messages_yaml, files={}, target=None)``: the request ``target``
    (an LM API target when None) gets for a one-case eval file, built as a run builds it."""
    counter = iter(range(1000))

    def build(
        input_messages: str,
        files: dict[str, str] | None = None,
        target: Provider | None = None,
    ) -> ProviderRequest:
        for rel, text in (files or {}).items():
            write(repo, rel, text)
        body = textwrap.indent(textwrap.dedent(input_messages).strip("\n"), " " * 6)
        path = write(
            repo,
            f"evals/case{next(counter)}.yaml",
            "$schema: agentv-eval-v2\nevalcases:\n  - id: the-case\n    outcome: a good answer\n"
            f"    input_messages:\n{body}\n",
        )
        loaded = load_eval_file(path)
        assert not loaded.errors, [d.format() for d in loaded.errors]
        case = loaded.cases[0]
        prompt = build_prompt(case, PromptSettings.of(target) if target else LM)
        return request_for_case(case, prompt)

    return build
