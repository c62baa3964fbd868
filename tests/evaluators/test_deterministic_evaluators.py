"""contains, icontains, equals, regex and is_json, graded in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from evaluator_kit import contains, equals, is_json, make_case, make_ctx, regex

from agentv.cases import EvaluatorConfig
from agentv.evaluators import EvaluatorScore, run_evaluator
from agentv.evaluators.deterministic import parse_json_answer


async def grade(tmp_path: Path, config: EvaluatorConfig, answer: str) -> EvaluatorScore:
    case = make_case(tmp_path, evaluators=[config])
    return await run_evaluator(make_ctx(case, answer), config)


# --- contains / icontains ---------------------------------------------------------------------


async def test_contains_hit_and_miss(tmp_path: Path) -> None:
    hit = await grade(tmp_path, contains("Paris"), "The capital is Paris.")
    assert (hit.score, hit.hits, hit.misses, hit.error) == (
        1.0,
        ['answer contains "Paris"'],
        [],
        None,
    )
    miss = await grade(tmp_path, contains("Paris"), "The capital is paris.")
    assert (miss.score, miss.hits, miss.misses) == (0.0, [], ['answer does not contain "Paris"'])
    assert miss.error is None  # a miss is a verdict, not a failure


async def test_icontains_ignores_case_including_unicode_folding(tmp_path: Path) -> None:
    result = await grade(tmp_path, contains("PARIS", ignore_case=True), "it is paris")
    assert result.score == 1.0
    assert result.hits == ['answer contains "PARIS" (ignoring case)']
    folded = await grade(tmp_path, contains("STRASSE", ignore_case=True), "die Hauptstraße")
    assert folded.score == 1.0
    assert (await grade(tmp_path, contains("Lyon", ignore_case=True), "PARIS")).misses == [
        'answer does not contain "Lyon" (ignoring case)'
    ]


async def test_long_values_are_shortened_in_the_message(tmp_path: Path) -> None:
    result = await grade(tmp_path, contains("x" * 500), "no")
    (line,) = result.misses
    assert len(line) < 120 and line.endswith('…"')


# --- equals -----------------------------------------------------------------------------------


async def test_equals_compares_trimmed_text(tmp_path: Path) -> None:
    result = await grade(tmp_path, equals("  Paris\n"), "\n Paris  \n")
    assert (result.score, result.hits) == (1.0, ['answer equals "Paris"'])
    result = await grade(tmp_path, equals("Paris"), "Paris.")
    assert (result.score, result.misses) == (0.0, ['answer does not equal "Paris"'])


# --- regex ------------------------------------------------------------------------------------


async def test_regex_searches_anywhere(tmp_path: Path) -> None:
    result = await grade(tmp_path, regex(r"\b\d{4}\b"), "It was founded in 1889, I think.")
    assert (result.score, result.hits) == (1.0, [r"answer matches /\b\d{4}\b/"])
    result = await grade(tmp_path, regex(r"^\d+$"), "12 apples")
    assert (result.score, result.misses) == (0.0, [r"answer does not match /^\d+$/"])


@pytest.mark.parametrize(
    ("pattern", "flags", "answer", "expected"),
    [
        ("paris", None, "PARIS", 0.0),
        ("paris", "i", "PARIS", 1.0),
        ("^b$", None, "a\nb\nc", 0.0),
        ("^b$", "m", "a\nb\nc", 1.0),
        ("a.c", None, "a\nc", 0.0),
        ("a.c", "s", "a\nc", 1.0),
        ("a b c  # spaces ignored", "x", "abc", 1.0),
        ("^B$", "im", "a\nb", 1.0),
    ],
)
async def test_regex_flags(
    tmp_path: Path, pattern: str, flags: str | None, answer: str, expected: float
) -> None:
    result = await grade(tmp_path, regex(pattern, flags), answer)
    assert result.error is None
    assert result.score == expected


async def test_broken_pattern_is_a_clear_evaluator_error(tmp_path: Path) -> None:
    result = await grade(tmp_path, regex("(unclosed[", name="shape"), "anything")
    assert result.score == 0.0
    assert result.hits == []
    assert result.error is not None
    assert result.error.startswith('invalid regular expression "(unclosed[":')
    assert "position" in result.error and "fix `value`" in result.error
    assert result.misses == [f"Evaluator 'shape' failed: {result.error}"]


async def test_unknown_regex_flag_is_an_error(tmp_path: Path) -> None:
    result = await grade(tmp_path, regex("a", "ig"), "a")
    assert result.score == 0.0
    assert result.error == "unknown regex flag 'g' in 'ig'; valid flags: i, m, s, x"


async def test_patterns_are_compiled_once_per_value(tmp_path: Path) -> None:
    from agentv.evaluators.deterministic import _compile

    first = _compile(r"caching-\d+", "i")
    assert _compile(r"caching-\d+", "i") is first
    assert _compile(r"caching-\d+", "") is not first


# --- is_json ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        '{"city": "Paris"}',
        "  [1, 2, 3]\n",
        '```json\n{"city": "Paris"}\n```',
        '```\n{"city": "Paris"}\n```',
        '"just a string"',
        '{"big": 123456789012345678901234567890}',
    ],
)
async def test_is_json_accepts_json(tmp_path: Path, answer: str) -> None:
    result = await grade(tmp_path, is_json(), answer)
    assert (result.score, result.hits, result.error) == (1.0, ["answer is valid JSON"], None)


@pytest.mark.parametrize(
    "answer",
    ["The city is Paris", '{"city": "Paris",}', "NaN", '{"x": Infinity}', "", "```json\n{\n```"],
)
async def test_is_json_rejects_non_json(tmp_path: Path, answer: str) -> None:
    result = await grade(tmp_path, is_json(), answer)
    assert result.score == 0.0
    assert result.error is None
    (line,) = result.misses
    assert line.startswith("answer is not valid JSON: ")


def test_parse_json_answer_strips_only_a_surrounding_fence() -> None:
    assert parse_json_answer('```json\n{"a": 1}\n```') == {"a": 1}
    with pytest.raises(ValueError):
        parse_json_answer('Here you go:\n```json\n{"a": 1}\n```')


SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "population": {"type": "integer"}},
    "required": ["city"],
}


async def test_is_json_with_inline_schema(tmp_path: Path) -> None:
    ok = await grade(tmp_path, is_json(SCHEMA), '{"city": "Paris", "population": 2100000}')
    assert (ok.score, ok.hits) == (1.0, ["answer is valid JSON matching the schema"])
    bad = await grade(tmp_path, is_json(SCHEMA), '{"city": "Paris", "population": "many"}')
    assert bad.score == 0.0 and bad.error is None
    (line,) = bad.misses
    assert line.startswith("answer does not match the JSON Schema: ")
    assert "'many' is not of type 'integer'" in line and "(at `population`)" in line
    missing = await grade(tmp_path, is_json(SCHEMA), "{}")
    assert "'city' is a required property" in missing.misses[0]


async def test_is_json_schema_file_relative_to_the_eval_file(tmp_path: Path) -> None:
    (tmp_path / "schemas").mkdir()
    (tmp_path / "schemas" / "city.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    (tmp_path / "schemas" / "city.yaml").write_text(
        "type: object\nrequired: [city]\n", encoding="utf-8"
    )
    for ref in ("schemas/city.json", "./schemas/city.yaml"):
        assert (await grade(tmp_path, is_json(ref), '{"city": "Paris"}')).score == 1.0
        assert (await grade(tmp_path, is_json(ref), '{"town": "Paris"}')).score == 0.0


async def test_is_json_schema_given_as_a_json_string(tmp_path: Path) -> None:
    config = is_json('{"type": "array"}')
    assert (await grade(tmp_path, config, "[1]")).score == 1.0
    assert (await grade(tmp_path, config, "{}")).score == 0.0


async def test_missing_schema_file_is_an_evaluator_error(tmp_path: Path) -> None:
    result = await grade(tmp_path, is_json("schemas/nope.json", name="shape"), "{}")
    assert result.score == 0.0
    assert result.error is not None
    assert result.error.startswith("JSON Schema file not found: schemas/nope.json")
    assert "relative to the eval file's folder" in result.error
    assert result.misses == [f"Evaluator 'shape' failed: {result.error}"]


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "nope"}, "invalid JSON Schema (inline) at `type`:"),
        ({"type": "object", "required": "city"}, "invalid JSON Schema (inline) at `required`:"),
        ({"minLength": -1}, "invalid JSON Schema (inline) at `minLength`:"),
    ],
)
async def test_invalid_schema_is_an_evaluator_error(
    tmp_path: Path, schema: dict[str, object], expected: str
) -> None:
    result = await grade(tmp_path, is_json(schema), '{"city": "Paris"}')
    assert result.score == 0.0
    assert result.error is not None and result.error.startswith(expected)
    # the answer itself is fine: the failure must not read like a verdict on it
    assert result.hits == []


async def test_unreadable_schema_file_is_an_evaluator_error(tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    result = await grade(tmp_path, is_json("broken.json"), "{}")
    assert result.error is not None
    assert result.error.startswith("cannot read JSON Schema file ")
    assert "broken.json" in result.error


async def test_deterministic_results_are_fast(tmp_path: Path) -> None:
    # a sanity bound far above what they take (micro-seconds), not a benchmark
    import time

    case = make_case(tmp_path, evaluators=[contains("Paris")])
    ctx = make_ctx(case, "The capital is Paris.")
    config = case.evaluators[0]
    started = time.perf_counter()
    for _ in range(2000):
        await run_evaluator(ctx, config)
    assert time.perf_counter() - started < 2.0
