"""Masking comes before shortening in the LM API providers' errors: a key placed across
every cut point of an API's error message (cut in the middle) and of a body that is not JSON
(start and end kept) leaves no part of itself behind, and the record of a case whose text
was masked says ``masked_secrets: true``. (Agents: tests/providers/agents/test_agent_masking_cuts.py; code
evaluators: tests/evaluators/test_code_evaluator.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentv.errors import ProviderError
from agentv.providers.llm import MAX_MESSAGE, NON_JSON_SHOWN
from agentv.providers.registry import provider_class
from agentv.system.masking import Masker, masking_scope
from support.cli import agentv_cli
from support.fakes import FakeLLMServer, Fault
from support.files import write
from support.masking import KEY, OFFSETS, across, clean, fragments, middle_cuts
from support.providers import LM_KINDS, ask, provider_fields
from support.results import rows


async def _errors(kind: str, faults: list[Fault]) -> list[str]:
    """What a target of ``kind`` (whose key is KEY) says of each of ``faults``."""
    with FakeLLMServer() as server:
        server.script(*faults)
        cls = provider_class(kind)
        settings = cls.Settings.model_validate(
            provider_fields(kind, server, api_key=KEY, max_retries=0)
        )
        provider = cls("t", settings)
        said = []
        try:
            for _ in faults:
                with pytest.raises(ProviderError) as info:
                    await provider.invoke(ask("hi"))
                said.append(str(info.value))
        finally:
            await provider.aclose()
    return said


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_an_api_error_message_is_masked_before_its_middle_is_cut(kind: str) -> None:
    size = MAX_MESSAGE + 500
    cuts = middle_cuts(size, MAX_MESSAGE)
    messages = [across(size, cuts, offset) for offset in OFFSETS]
    said = await _errors(kind, [Fault.bad_request(m) for m in messages])
    head = f"target 't' ({kind}): HTTP 400: "
    for offset, text in zip(OFFSETS, said, strict=True):
        assert text.startswith(head) and clean(text[len(head) :]), f"offset {offset}: {text}"
        assert " … " in text and len(text) < MAX_MESSAGE + 100


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_a_body_that_is_not_json_is_masked_before_it_is_cut(kind: str) -> None:
    size = NON_JSON_SHOWN + 400
    cuts = middle_cuts(size, NON_JSON_SHOWN)
    bodies = [across(size, cuts, offset) for offset in OFFSETS]
    said = await _errors(kind, [Fault.body(b) for b in bodies])
    head = f"target 't' ({kind}): the API answered with a body that is not JSON: '"
    for offset, text in zip(OFFSETS, said, strict=True):
        assert text.startswith(head) and text.endswith("'"), text
        assert clean(text[len(head) : -1]), f"offset {offset}: {text}"


async def test_the_runs_secrets_are_masked_too_and_the_case_is_told() -> None:
    # a secret the target does not send itself (another target's key, a ${{ VAR }})
    other = "gw-token-0000-RUNSECRET-9999"
    size = MAX_MESSAGE + 200
    message = across(size, middle_cuts(size, MAX_MESSAGE), 5, other)
    with masking_scope(Masker([other])) as scope:
        (said,) = await _errors("openai", [Fault.bad_request(message)])
    assert fragments(said, other) == []
    assert scope.masked
    with masking_scope(Masker([other])) as scope:
        await _errors("openai", [Fault.bad_request("nothing secret here")])
    assert not scope.masked


@pytest.mark.slow
def test_a_record_whose_error_was_masked_before_its_cut_says_masked_secrets(
    repo: Path, llm_server: FakeLLMServer
) -> None:
    size = MAX_MESSAGE + 300
    llm_server.script(Fault.bad_request(across(size, middle_cuts(size, MAX_MESSAGE), 7)))
    write(
        repo,
        ".agentv/targets.yaml",
        f"""$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: openai
    base_url: {llm_server.url}/v1
    api_key: ${{{{ GATEWAY_KEY }}}}
    model: m
    max_retries: 0
""",
    )
    write(repo, ".env", f"GATEWAY_KEY={KEY}\n")
    write(
        repo,
        "evals/one.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        "  - id: one\n    outcome: anything\n"
        "    input_messages: [{role: user, content: hi}]\n"
        "    execution: {evaluators: [{type: contains, value: x}]}\n",
    )
    proc = agentv_cli(repo, "eval", "evals/one.yaml", "--out", "r.jsonl", "--allow-errors")
    assert proc.returncode == 0, proc.stderr
    (record,) = rows(repo / "r.jsonl")
    assert record["status"] == "error"
    assert record["error"].startswith("target 'default' (openai): HTTP 400: ....")
    assert record["masked_secrets"] is True
    assert fragments(json.dumps(record)) == []
    assert fragments(proc.stdout + proc.stderr) == []
