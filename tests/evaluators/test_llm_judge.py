"""llm_judge: the exact prompts sent, the request, tolerant parsing and failures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentv.errors import ProviderError, ProviderTimeout
from agentv.evaluators.grading import grade_case, run_evaluator
from agentv.evaluators.llm_judge import parse_verdict
from agentv.messages import FileSegment, GuidelineFile, GuidelineRef, TextSegment
from agentv.providers.base import ProviderResponse, Usage
from agentv.providers.mock import MockProvider, MockSettings
from agentv.providers.openai import OpenAIProvider, OpenAISettings
from support.evaluator_kit import FakeJudge, judge, make_case, make_ctx, msg, user
from support.fakes import FakeLLMServer

SYSTEM = (
    "You are an expert evaluator. Your goal is to grade the candidate_answer based on how "
    "well it achieves the expected_outcome for the original task.\n"
    "\n"
    "Be concise and focused in your evaluation. Provide succinct, specific feedback rather "
    "than verbose explanations.\n"
    "\n"
    "You must respond with a single JSON object matching this schema:\n"
    "\n"
    "{\n"
    '  "score": <number between 0.0 and 1.0>,\n'
    '  "hits": [<array of strings, max 4 items, brief specific achievements>],\n'
    '  "misses": [<array of strings, max 4 items, brief specific failures or omissions, '
    "empty if none>],\n"
    '  "reasoning": "<string, concise explanation for the score, 1-2 sentences max>"\n'
    "}"
)
REFERENCE_PARAGRAPH = (
    "Use the reference_answer as a gold standard for a high-quality response. The "
    "candidate_answer does not need to match it verbatim, but should capture the key points "
    "and follow the same spirit.\n\n"
)
SYSTEM_WITH_REFERENCE = SYSTEM.replace(
    "\n\nBe concise", "\n\n" + REFERENCE_PARAGRAPH + "Be concise", 1
)

VERDICT = '{"score": 0.75, "hits": ["names Paris"], "misses": ["no source"], "reasoning": "ok"}'


def test_system_prompts_differ_only_by_the_reference_paragraph() -> None:
    from agentv.evaluators.llm_judge import SYSTEM_PROMPT, SYSTEM_PROMPT_WITH_REFERENCE

    assert SYSTEM_PROMPT == SYSTEM
    assert SYSTEM_PROMPT_WITH_REFERENCE == SYSTEM_WITH_REFERENCE
    assert REFERENCE_PARAGRAPH in SYSTEM_WITH_REFERENCE


async def test_single_turn_prompts_and_request(tmp_path: Path) -> None:
    fake = FakeJudge(VERDICT)
    case = make_case(tmp_path, outcome="  Names the capital of France.  ")
    ctx = make_ctx(case, "  Paris.\n", judge=fake, attempt=2)
    result = await run_evaluator(ctx, judge("quality"))

    (request,) = fake.requests
    assert request.messages[0].content == SYSTEM
    assert request.question == (
        "[[ ## expected_outcome ## ]]\n"
        "Names the capital of France.\n"
        "\n"
        "[[ ## question ## ]]\n"
        "What is the capital of France?\n"
        "\n"
        "[[ ## candidate_answer ## ]]\n"
        "Paris."
    )
    # nothing but the two prompts as the judge's own messages: no guidelines or files
    assert [(m.role, m.content) for m in request.messages] == [
        ("system", SYSTEM),
        ("user", request.question),
    ]
    assert request.guidelines == ""
    assert request.input_files == [] and request.guideline_paths == []
    assert (request.eval_id, request.attempt, request.model) == ("capital", 2, None)

    assert result.score == 0.75
    assert (result.hits, result.misses, result.reasoning) == (["names Paris"], ["no source"], "ok")
    assert result.expected_aspect_count == 2
    assert result.error is None
    assert result.usage == Usage(10, 5, 15) and result.latency_ms == 12.0
    assert result.raw_request == {
        "id": result.raw_request["id"],
        "provider": "fake:judge-target",
        "prompt": request.question,
        "system_prompt": SYSTEM,
        "target": "candidate-target",
        "reply": VERDICT,  # the judge's words, as it said them
    }


async def test_multi_turn_question_is_exactly_the_candidates_question(tmp_path: Path) -> None:
    guide = tmp_path / "style.instructions.md"
    attached = tmp_path / "data.csv"
    messages = [
        msg("system", TextSegment("You are terse.")),
        msg("user", GuidelineRef("style.instructions.md", guide), TextSegment("Total of:")),
        msg("assistant", TextSegment("Send the file.")),
        msg("user", FileSegment("data.csv", attached, "a,b\n1,2\n")),
    ]
    case = make_case(
        tmp_path,
        messages=messages,
        outcome="Adds the numbers.",
        reference=" 3 ",
        guideline_files=[GuidelineFile("style.instructions.md", guide, "SECRET STYLE RULES")],
        input_files=[attached],
    )
    for mode, file_part in (
        ("lm", '<file path="data.csv">\na,b\n1,2\n</file>'),
        ("agent", '<file: path="data.csv">'),
    ):
        fake = FakeJudge(VERDICT)
        ctx = make_ctx(case, "3", judge=fake, mode=mode)
        await run_evaluator(ctx, judge())
        (request,) = fake.requests
        question = (
            "@[System]:\nYou are terse.\n\n"
            "@[User]:\n<Attached: style.instructions.md>\nTotal of:\n\n"
            "@[Assistant]:\nSend the file.\n\n"
            f"@[User]:\n{file_part}"
        )
        assert ctx.prompt.question == question
        assert request.question == (
            "[[ ## expected_outcome ## ]]\nAdds the numbers.\n\n"
            f"[[ ## question ## ]]\n{question}\n\n"
            "[[ ## reference_answer ## ]]\n3\n\n"
            "[[ ## candidate_answer ## ]]\n3"
        )
        assert request.messages[0].content == SYSTEM_WITH_REFERENCE
        assert "SECRET STYLE RULES" not in request.question + request.messages[0].content


async def test_blank_reference_answer_leaves_the_section_out(tmp_path: Path) -> None:
    fake = FakeJudge(VERDICT)
    await run_evaluator(make_ctx(make_case(tmp_path, reference=" \n "), "x", judge=fake), judge())
    assert "reference_answer ##" not in fake.requests[0].question
    assert fake.requests[0].messages[0].content == SYSTEM


async def test_judge_model_is_sent_and_recorded(tmp_path: Path) -> None:
    fake = FakeJudge(VERDICT)
    result = await run_evaluator(
        make_ctx(make_case(tmp_path), "Paris", judge=fake), judge(model="gpt-judge")
    )
    assert fake.requests[0].model == "gpt-judge"
    assert result.raw_request is not None and result.raw_request["model"] == "gpt-judge"


async def test_request_id_is_stable_for_identical_requests(tmp_path: Path) -> None:
    case = make_case(tmp_path)
    a = await run_evaluator(make_ctx(case, "Paris", judge=FakeJudge(VERDICT)), judge())
    b = await run_evaluator(make_ctx(case, "Paris", judge=FakeJudge(VERDICT)), judge())
    c = await run_evaluator(make_ctx(case, "Lyon", judge=FakeJudge(VERDICT)), judge())
    assert a.raw_request and b.raw_request and c.raw_request
    assert a.raw_request["id"] == b.raw_request["id"] != c.raw_request["id"]


# --- custom prompts ---------------------------------------------------------------------------


async def test_custom_prompt_with_variables_becomes_the_user_prompt(tmp_path: Path) -> None:
    expected = [msg("assistant", TextSegment("Paris"))]
    case = make_case(tmp_path, reference="Paris", expected=expected)
    template = (
        "Q={{ question }}|O={{expected_outcome}}|R=${reference_answer}|C=${ candidate_answer }|"
        "unknown={{ nope }} ${nope}|IN=${input_messages}|OUT={{ output_messages }}"
    )
    fake = FakeJudge(VERDICT)
    await run_evaluator(make_ctx(case, "Paris!", judge=fake), judge(prompt=template))
    (request,) = fake.requests
    assert request.messages[0].content == SYSTEM_WITH_REFERENCE
    input_json = json.dumps(
        [
            {
                "role": "user",
                "content": [{"type": "text", "value": "What is the capital of France?"}],
            }
        ],
        indent=2,
    )
    output_json = json.dumps(
        [{"role": "assistant", "content": [{"type": "text", "value": "Paris"}]}], indent=2
    )
    assert request.question == (
        "Q=What is the capital of France?|O=Names the capital of France.|R=Paris|C=Paris!|"
        f"unknown={{{{ nope }}}} ${{nope}}|IN={input_json}|OUT={output_json}"
    )


async def test_custom_prompt_without_variables_replaces_the_system_prompt(tmp_path: Path) -> None:
    fake = FakeJudge(VERDICT)
    custom = "You grade geography answers strictly. Reply with JSON {score, hits, misses}."
    await run_evaluator(make_ctx(make_case(tmp_path), "Paris", judge=fake), judge(prompt=custom))
    (request,) = fake.requests
    assert request.messages[0].content == custom
    assert request.question.startswith("[[ ## expected_outcome ## ]]\nNames the capital")
    assert request.question.endswith("[[ ## candidate_answer ## ]]\nParis")


async def test_guideline_text_never_reaches_the_custom_prompt(tmp_path: Path) -> None:
    guide = tmp_path / "g.instructions.md"
    case = make_case(
        tmp_path,
        messages=[msg("user", GuidelineRef("g.instructions.md", guide), TextSegment("Hi"))],
        guideline_files=[GuidelineFile("g.instructions.md", guide, "GUIDELINE BODY")],
    )
    fake = FakeJudge(VERDICT)
    await run_evaluator(
        make_ctx(case, "x", judge=fake), judge(prompt="{{question}}\n{{input_messages}}")
    )
    sent = fake.requests[0].question
    assert "GUIDELINE BODY" not in sent
    assert '"type": "guideline"' in sent and '"path": "g.instructions.md"' in sent


# --- parsing the reply ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ('{"score": 1, "hits": [], "misses": []}', 1.0),
        ('```json\n{"score": 0.5, "hits": ["a"], "misses": []}\n```', 0.5),
        ('Here is my grade:\n```\n{"score": 0.25}\n```\nThanks.', 0.25),
        ('Sure! {"score": 0.6, "reasoning": "fine"} Hope that {helps}.', 0.6),
        ('I think {"score": 0.4} and also {"score": 0.9}', 0.4),
        ('{"score": "0.3"}', 0.3),
        ('{"score": 1.7}', 1.0),
        ('{"score": -0.2}', 0.0),
    ],
)
def test_parse_verdict_tolerates_fences_prose_and_range(reply: str, score: float) -> None:
    verdict = parse_verdict(reply)
    assert verdict is not None
    assert verdict.score == score


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "   ",
        "The answer is great, 10/10.",
        '{"hits": ["no score"]}',
        '{"score": true}',
        '{"score": "high"}',
        '{"score": NaN}',
        "[0.5]",
        '{"score": 0.5',
    ],
)
def test_parse_verdict_rejects_replies_without_a_numeric_score(reply: str) -> None:
    assert parse_verdict(reply) is None


def test_hits_and_misses_are_non_blank_strings_capped_at_four() -> None:
    verdict = parse_verdict(
        json.dumps(
            {
                "score": 0.5,
                "hits": ["a", " ", "b", 3, None, "c", "d", "e"],
                "misses": "only one",
                "reasoning": "  ",
            }
        )
    )
    assert verdict is not None
    assert verdict.hits == ["a", "b", "c", "d"]
    assert verdict.misses == ["only one"]
    assert verdict.reasoning is None


async def test_out_of_range_score_is_clamped_not_failed(tmp_path: Path) -> None:
    result = await run_evaluator(
        make_ctx(make_case(tmp_path), "Paris", judge=FakeJudge('{"score": 7}')), judge()
    )
    assert (result.score, result.error, result.expected_aspect_count) == (1.0, None, 1)


async def test_reasoning_falls_back_to_the_providers_reasoning(tmp_path: Path) -> None:
    reply = ProviderResponse(text='{"score": 0.9}', reasoning="thought about it")
    result = await run_evaluator(
        make_ctx(make_case(tmp_path), "Paris", judge=FakeJudge(reply)), judge()
    )
    assert result.reasoning == "thought about it"


# --- failures ----------------------------------------------------------------------------------


async def test_garbage_reply_is_a_judge_failure(tmp_path: Path) -> None:
    garbage = "I cannot grade this. " * 30
    fake = FakeJudge(garbage)
    ctx = make_ctx(make_case(tmp_path), "Paris", judge=fake)
    grade = await grade_case(ctx)
    assert grade.judge_failed
    assert grade.score == 0.0
    assert grade.error is not None
    assert grade.error.startswith("judge reply has no JSON verdict with a numeric score: ")
    assert "I cannot grade this." in grade.error
    assert len(grade.error) < 300  # a short excerpt, not the whole reply
    assert grade.misses == [f"Evaluator 'llm_judge' failed: {grade.error}"]
    assert grade.evaluator_raw_request is not None  # what was asked is still recorded


async def test_empty_reply_is_a_judge_failure(tmp_path: Path) -> None:
    result = await run_evaluator(
        make_ctx(make_case(tmp_path), "Paris", judge=FakeJudge("")), judge()
    )
    assert (result.score, result.error) == (0.0, "judge returned an empty reply")


async def test_judge_exception_is_recorded_not_raised(tmp_path: Path) -> None:
    error = ProviderError("judge-target", "HTTP 500 from the API", status=500)
    result = await run_evaluator(
        make_ctx(make_case(tmp_path), "Paris", judge=FakeJudge(error)), judge("q")
    )
    assert result.score == 0.0
    assert result.error == "judge target 'judge-target' failed: HTTP 500 from the API"
    assert result.misses == [f"Evaluator 'q' failed: {result.error}"]

    timeout = ProviderTimeout("judge-target", "no answer within 30 s")
    grade = await grade_case(make_ctx(make_case(tmp_path), "Paris", judge=FakeJudge(timeout)))
    assert grade.judge_failed and "no answer within 30 s" in (grade.error or "")

    crash = await run_evaluator(
        make_ctx(make_case(tmp_path), "Paris", judge=FakeJudge(RuntimeError("boom"))), judge()
    )
    assert crash.error == "judge call failed: boom"


async def test_no_judge_available(tmp_path: Path) -> None:
    grade = await grade_case(make_ctx(make_case(tmp_path), "Paris", judge=None))
    assert grade.judge_failed and grade.score == 0.0
    assert grade.error is not None and "no judge target available" in grade.error


async def test_api_key_never_appears_in_the_result(tmp_path: Path) -> None:
    secret = "sk-test-do-not-leak-123"
    fake = FakeJudge(VERDICT, ProviderError("judge-target", "bad request"), api_key=secret)
    case = make_case(tmp_path, evaluators=[judge("a"), judge("b")])
    grade = await grade_case(make_ctx(case, "Paris", judge=fake))
    assert grade.evaluator_results is not None
    dumped = json.dumps([r.to_dict() for r in grade.evaluator_results])
    assert secret not in dumped
    assert "fake:judge-target" in dumped


async def test_real_mock_provider_as_judge(tmp_path: Path) -> None:
    mock = MockProvider("mock-judge", MockSettings(response='{"score": 0.8, "hits": ["ok"]}'))
    grade = await grade_case(make_ctx(make_case(tmp_path), "Paris", judge=mock))
    assert (grade.score, grade.hits, grade.judge_failed) == (0.8, ["ok"], False)
    assert grade.evaluator_raw_request is not None
    assert grade.evaluator_raw_request["provider"] == "mock:mock-judge"
    # the mock's default answer is not a verdict: a judge failure, not a zero score
    dry = MockProvider("mock-judge", MockSettings())
    assert (await grade_case(make_ctx(make_case(tmp_path), "Paris", judge=dry))).judge_failed


async def test_a_conversation_with_user_only_turns_stays_flat(tmp_path: Path) -> None:
    fake = FakeJudge(VERDICT)
    case = make_case(tmp_path, messages=[user("Line one"), msg("user", TextSegment("  "))])
    await run_evaluator(make_ctx(case, "x", judge=fake), judge())
    assert "[[ ## question ## ]]\nLine one\n\n" in fake.requests[0].question


async def test_a_verdict_cut_at_the_judges_token_limit_says_so(tmp_path: Path) -> None:
    # a real judge target (OpenAI's SDK) on the loopback fake, which honours the limit
    verdict = '{"score": 0.9, "hits": ["names Paris"], "misses": [], "reasoning": "Right."}'
    with FakeLLMServer(reply=verdict) as server:
        settings = OpenAISettings.model_validate(
            {"model": "judge-model", "base_url": f"{server.url}/v1", "max_output_tokens": 3}
        )
        target = OpenAIProvider("judge-target", settings)
        try:
            result = await run_evaluator(
                make_ctx(make_case(tmp_path), "Paris", judge=target), judge()
            )
        finally:
            await target.aclose()
    assert result.error is not None
    assert result.error.startswith("judge reply has no JSON verdict with a numeric score: ")
    assert result.error.endswith(
        "(the reply was cut at the judge's output token limit; raise max_output_tokens on the "
        "judge target)"
    )
    assert server.requests[0].body["max_tokens"] == 3
