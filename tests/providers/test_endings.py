"""How an answer ended and what was asked, on the loopback fake: ``finish_reason`` in the
same words for the four APIs (with the API's own), the settings as sent, a limit the
server ignored, and requests a strict compatible server accepts."""

from __future__ import annotations

import pytest

from agentv.errors import ProviderHTTPError
from support.cli import agentv_cli
from support.fakes import FakeLLMServer, Fault
from support.files import write
from support.providers import LM_KINDS, EvalRequest, MakeProvider, ask
from support.results import rows

LONG_REPLY = "one two three four five six seven eight nine ten"
#: how each API says "cut at the output limit"
LENGTH = {"openai": "length", "azure": "length", "anthropic": "max_tokens", "gemini": "MAX_TOKENS"}
STOP = {"openai": "stop", "azure": "stop", "anthropic": "end_turn", "gemini": "STOP"}


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_an_answer_cut_at_the_limit_ends_with_length(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.reply = LONG_REPLY
    response = await make_provider(kind, max_output_tokens=3).invoke(ask("Count."))
    assert response.text == "one two three"
    assert (response.finish_reason, response.finish_reason_raw) == ("length", LENGTH[kind])
    assert not response.token_limit_ignored  # the server honoured it
    whole = await make_provider(kind, max_output_tokens=30).invoke(ask("Count."))
    assert (whole.finish_reason, whole.finish_reason_raw) == ("stop", STOP[kind])


@pytest.mark.parametrize(
    ("kind", "raw", "reason"),
    [
        ("openai", "content_filter", "content_filter"),
        ("azure", "content_filter", "content_filter"),
        ("anthropic", "refusal", "content_filter"),
        ("gemini", "SAFETY", "content_filter"),
        ("gemini", "RECITATION", "content_filter"),
        ("openai", "tool_calls", "tool_calls"),
        ("anthropic", "tool_use", "tool_calls"),
        ("openai", "eos", "other"),  # a compatible server's own word
        ("anthropic", "pause_turn", "other"),
        ("gemini", "MALFORMED_FUNCTION_CALL", "other"),
    ],
)
async def test_finish_reasons_in_one_vocabulary_with_the_apis_own_word(
    kind: str, raw: str, reason: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(Fault.finishing(raw))
    response = await make_provider(kind).invoke(ask("hi"))
    assert (response.finish_reason, response.finish_reason_raw) == (reason, raw)


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_an_empty_answer_says_how_it_ended_when_it_was_not_a_plain_stop(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    raw = {"anthropic": "refusal", "gemini": "SAFETY"}.get(kind, "content_filter")
    llm_server.script(*[Fault(200, empty=True, finish=raw)] * 2)
    with pytest.raises(Exception, match=rf"empty answer \(finish_reason: {raw}\)"):
        await make_provider(kind).invoke(ask("hi"))


async def test_a_server_that_ignores_the_limits_name_is_caught(
    llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    # an older compatible server: it knows only max_tokens, and ignores the other name
    llm_server.limit_params = ("max_tokens",)
    llm_server.reply = LONG_REPLY
    provider = make_provider(
        "openai", max_output_tokens=3, max_tokens_param="max_completion_tokens"
    )
    response = await provider.invoke(ask("Count."))
    assert response.text == LONG_REPLY
    assert response.usage is not None and response.usage.output_tokens == 10
    assert response.token_limit_ignored
    # the default for a server other than OpenAI's: the name it knows
    response = await make_provider("openai", max_output_tokens=3).invoke(ask("Count."))
    assert response.text == "one two three"
    assert not response.token_limit_ignored
    assert llm_server.requests[-1].body["max_tokens"] == 3


# --- a strict compatible server ------------------------------------------------------------

TOOL_TURNS = """
- role: user
  content: Weather in Paris?
- role: assistant
  tool_calls:
    - {id: call_1, name: get_weather, arguments: {city: Paris}}
- {role: tool, tool_call_id: call_1, content: "21"}
- role: assistant
  content: It is 21 degrees.
- role: user
  content: Warm?
"""


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_a_strict_server_accepts_every_request_agentv_sends(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider, eval_request: EvalRequest
) -> None:
    llm_server.strict = True
    llm_server.limit_params = ("max_tokens",)  # and knows only the older name
    provider = make_provider(kind, temperature=0.5, max_output_tokens=50, name="s")
    response = await provider.invoke(eval_request(TOOL_TURNS))
    assert response.text == "Hello from the fake LLM."
    assert len(llm_server.requests) == 1


async def test_a_strict_server_refuses_what_it_does_not_know_and_the_error_says_what(
    llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.strict = True
    llm_server.limit_params = ("max_tokens",)
    provider = make_provider(
        "openai", max_output_tokens=50, max_tokens_param="max_completion_tokens", max_retries=3
    )
    with pytest.raises(ProviderHTTPError) as info:
        await provider.invoke(ask("hi"))
    assert info.value.status == 422
    assert len(llm_server.requests) == 1  # a request a retry cannot fix
    assert str(info.value) == (
        "target 't' (openai): HTTP 422: body.max_completion_tokens: Extra inputs are not permitted"
    )


async def test_the_strict_fake_refuses_null_content_and_wrong_types(
    llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    # what agentv used to send; the fake must catch it, or it proves nothing
    from support.fakes.strict import openai_problems

    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "hi"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}
                ],
            },
        ],
        "temperature": "hot",
    }
    problems = openai_problems(body, ("max_tokens",))
    assert [(p["loc"], p["type"]) for p in problems] == [
        (["body", "temperature"], "float_type"),
        (["body", "messages", 1, "content"], "string_type"),
        (["body", "messages", 1, "tool_calls", 0, "function", "arguments"], "string_type"),
    ]


# --- the record and the screen ----------------------------------------------------------------


@pytest.mark.slow
def test_the_record_says_how_the_answer_ended_and_what_was_asked(repo, llm_server) -> None:
    llm_server.reply = LONG_REPLY
    llm_server.limit_params = ("max_tokens",)
    write(
        repo,
        ".agentv/targets.yaml",
        f"""$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: openai
    base_url: {llm_server.url}/v1
    model: small-model
    temperature: 0
    max_output_tokens: 3
    max_retries: 0
  - name: old-name
    provider: openai
    base_url: {llm_server.url}/v1
    model: small-model
    max_output_tokens: 3
    max_tokens_param: max_completion_tokens
    max_retries: 0
""",
    )
    write(
        repo,
        "evals/count.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        "  - id: count\n    outcome: counts\n"
        "    input_messages: [{role: user, content: Count to ten.}]\n"
        "    execution: {evaluators: [{type: contains, value: one}]}\n",
    )
    proc = agentv_cli(
        repo, "eval", "evals/", "--target", "default", "--target", "old-name", "--out", "r.jsonl"
    )
    assert proc.returncode == 0, proc.stderr
    by_target = {r["target"]: r for r in rows(repo / "r.jsonl")}

    cut = by_target["default"]
    assert cut["candidate_answer"] == "one two three"
    assert (cut["finish_reason"], cut["finish_reason_raw"]) == ("length", "length")
    assert "token_limit_ignored" not in cut
    assert cut["raw_request"]["settings"] == {
        "model": "small-model",
        "temperature": 0.0,
        "max_tokens": 3,
    }
    assert cut["raw_request"]["token_limit"] == {"param": "max_tokens", "value": 3}
    assert "the answer to 'count' was cut at the output token limit" in proc.stdout

    ignored = by_target["old-name"]
    assert ignored["candidate_answer"] == LONG_REPLY
    assert (ignored["finish_reason"], ignored["token_limit_ignored"]) == ("stop", True)
    assert ignored["raw_request"]["token_limit"] == {"param": "max_completion_tokens", "value": 3}
    assert (
        "old-name: the server ignored the output token limit: the answer to 'count' has 10 "
        "tokens, the limit sent was 3 (as max_completion_tokens)"
    ) in proc.stdout
