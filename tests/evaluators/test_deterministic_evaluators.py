"""contains, icontains, equals, regex and is_json, graded in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentv.cases import EvaluatorConfig
from agentv.evaluators import deterministic, schemas
from agentv.evaluators.base import EvaluatorScore
from agentv.evaluators.deterministic import parse_json_answer
from agentv.evaluators.grading import run_evaluator
from support.evaluator_kit import contains, equals, is_json, make_case, make_ctx, regex


@pytest.fixture(autouse=True)
def _fresh_caches() -> None:
    """Each test compiles what it uses: a cache filled by an earlier test (or by mutmut's
    first pass) must not answer for the code under test."""
    schemas._SCHEMAS.clear()
    for cached in (
        deterministic._show,
        deterministic._contains_lines,
        deterministic._equals_lines,
        deterministic._compile,
        deterministic.regex_problem,
    ):
        getattr(cached, "cache_clear", lambda: None)()


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


async def test_many_evaluations_in_a_row_give_the_same_verdict(tmp_path: Path) -> None:
    # The cached hit/miss lines and compiled values are reused, never mixed up. How fast
    # this is belongs to the benchmarks (benchmarks/micro.py), not to a test.
    case = make_case(tmp_path, evaluators=[contains("Paris")])
    ctx = make_ctx(case, "The capital is Paris.")
    config = case.evaluators[0]
    results = [await run_evaluator(ctx, config) for _ in range(2000)]
    assert {(r.score, tuple(r.hits), tuple(r.misses)) for r in results} == {
        (1.0, ('answer contains "Paris"',), ())
    }


# --- exact verdicts and messages (issue 17: behaviours no test pinned) -------------------


def _failure(error: str, name: str = "is_json") -> tuple[float, list[str], list[str], str]:
    """(score, hits, misses, error) of an evaluator that could not grade."""
    return 0.0, [], [f"Evaluator '{name}' failed: {error}"], error


def _verdict(result: EvaluatorScore) -> tuple[float, list[str], list[str], str | None]:
    # each verdict keeps its entry's name and type (the results file shows both)
    assert result.name in ("is_json", "shape", "contains", "equals", "regex")
    assert result.type in ("is_json", "contains", "icontains", "equals", "regex")
    return result.score, result.hits, result.misses, result.error


@pytest.mark.parametrize(
    "answer",
    [
        '\n```json\n{"city": "Paris"}\n```\n',  # a model's usual blank lines around the fence
        '  ```json  \n{"city": "Paris"}\n  ```  ',
        '```JSON\n{"city": "Paris"}```',
        '```c++\n\n{"city": "Paris"}\n\n```',
        '\t{"city": "Paris"}\r\n',
    ],
)
async def test_is_json_strips_whitespace_around_a_fenced_answer(
    tmp_path: Path, answer: str
) -> None:
    result = await grade(tmp_path, is_json(SCHEMA), answer)
    assert _verdict(result) == (1.0, ["answer is valid JSON matching the schema"], [], None)


@pytest.mark.parametrize(
    ("answer", "miss"),
    [
        ("", "answer is not valid JSON: the answer is empty"),
        (" \n\t", "answer is not valid JSON: the answer is empty"),
        ("NaN", "answer is not valid JSON: NaN is not valid JSON"),
        ('{"x": -Infinity}', "answer is not valid JSON: -Infinity is not valid JSON"),
        (
            '{"city": "Paris",}',
            "answer is not valid JSON: Expecting property name enclosed in double quotes: "
            "line 1 column 18 (char 17)",
        ),
        (
            "The city is Paris",
            "answer is not valid JSON: Expecting value: line 1 column 1 (char 0)",
        ),
        (
            'Here:\n```json\n{"a": 1}\n```',
            "answer is not valid JSON: Expecting value: line 1 column 1 (char 0)",
        ),
        ("```json\n```", "answer is not valid JSON: Expecting value: line 1 column 1 (char 0)"),
    ],
)
async def test_is_json_miss_lines_in_full(tmp_path: Path, answer: str, miss: str) -> None:
    result = await grade(tmp_path, is_json(), answer)
    assert _verdict(result) == (0.0, [], [miss], None)


async def test_is_json_keeps_integers_beyond_64_bits_exact(tmp_path: Path) -> None:
    # 2**64 + 1 read as a float would equal 2**64 and pass `maximum: 2**64`.
    schema = {"type": "integer", "maximum": 2**64}
    assert parse_json_answer(str(2**64 + 1)) == 2**64 + 1
    assert parse_json_answer('{"n": 123456789012345678901234567890}') == {
        "n": 123456789012345678901234567890
    }
    over = await grade(tmp_path, is_json(schema), str(2**64 + 1))
    assert _verdict(over) == (
        0.0,
        [],
        [
            "answer does not match the JSON Schema: 18446744073709551617 is greater than the "
            "maximum of 18446744073709551616 (at `/`)"
        ],
        None,
    )
    at = await grade(tmp_path, is_json(schema), str(2**64))
    assert at.score == 1.0
    # a long fraction takes the same exact path and reads as the same float
    assert parse_json_answer("3.14159265358979323846") == 3.14159265358979323846


async def test_invalid_inline_schema_string_is_an_error_not_no_schema(tmp_path: Path) -> None:
    # Treating it as "no schema" would pass every JSON answer.
    for schema in ("{bad", "  {bad  "):
        result = await grade(tmp_path, is_json(schema), "{}")
        assert _verdict(result) == _failure(
            "invalid JSON Schema (inline string): not valid JSON: "
            "Expecting property name enclosed in double quotes at character 2"
        )


@pytest.mark.parametrize(
    ("file", "text", "kind"),
    [
        ("list.json", "[1, 2]", "a list"),
        ("number.json", "42", "a number"),
        ("float.yaml", "1.5\n", "a number"),
        ("text.yaml", "just words\n", "text"),
        ("empty.yaml", "", "nothing"),
        ("null.json", "null", "nothing"),
        ("date.yaml", "2024-01-31\n", "date"),
    ],
)
async def test_schema_file_holding_no_mapping_is_an_error(
    tmp_path: Path, file: str, text: str, kind: str
) -> None:
    (tmp_path / file).write_text(text, encoding="utf-8")
    result = await grade(tmp_path, is_json(file), '{"city": "Paris"}')
    assert _verdict(result) == _failure(
        f"invalid JSON Schema in {tmp_path / file}: a schema must be a mapping, not {kind}"
    )


@pytest.mark.parametrize("name", ["city.yml", "CITY.YAML", "City.Yml", "city.JSON"])
async def test_schema_file_extensions_any_case(tmp_path: Path, name: str) -> None:
    yaml_text = "type: object\nrequired: [city]\n"
    text = json.dumps(SCHEMA) if name.lower().endswith(".json") else yaml_text
    (tmp_path / name).write_text(text, encoding="utf-8")
    ok = await grade(tmp_path, is_json(name), '{"city": "Paris"}')
    assert _verdict(ok) == (1.0, ["answer is valid JSON matching the schema"], [], None)
    bad = await grade(tmp_path, is_json(name), '{"town": "Paris"}')
    assert _verdict(bad) == (
        0.0,
        [],
        ["answer does not match the JSON Schema: 'city' is a required property (at `/`)"],
        None,
    )


async def test_yaml_schema_read_as_json_when_its_name_says_json(tmp_path: Path) -> None:
    (tmp_path / "city.json").write_text("type: object\n", encoding="utf-8")
    result = await grade(tmp_path, is_json("city.json"), "{}")
    assert _verdict(result) == _failure(
        f"cannot read JSON Schema file {tmp_path / 'city.json'}: "
        "Expecting value: line 1 column 1 (char 0)"
    )


async def test_schema_file_found_by_absolute_and_home_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "city.json").write_text(json.dumps(SCHEMA), encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    evals = tmp_path / "evals"
    evals.mkdir()
    for ref in (str(home / "city.json"), "~/city.json", " ~/city.json "):
        assert (await grade(evals, is_json(ref), '{"city": "Paris"}')).score == 1.0
        assert (await grade(evals, is_json(ref), "{}")).score == 0.0


async def test_schema_file_messages_in_full(tmp_path: Path) -> None:
    (tmp_path / "folder.json").mkdir()
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    (tmp_path / "latin1.json").write_bytes(b'{"title": "caf\xe9"}')
    cases = {
        "nope.json": "JSON Schema file not found: nope.json (looked at {path}); "
        "`schema` is relative to the eval file's folder",
        "folder.json": "JSON Schema file is a folder, not a file: folder.json (looked at "
        "{path}); `schema` is relative to the eval file's folder",
        "broken.json": "cannot read JSON Schema file {path}: Expecting property name enclosed "
        "in double quotes: line 1 column 2 (char 1)",
        "latin1.json": "cannot read JSON Schema file {path}: 'utf-8' codec can't decode byte "
        "0xe9 in position 14: invalid continuation byte",
    }
    for ref, message in cases.items():
        result = await grade(tmp_path, is_json(ref, name="shape"), "{}")
        assert _verdict(result) == _failure(message.format(path=tmp_path / ref), "shape")


async def test_a_schema_file_is_read_once(tmp_path: Path) -> None:
    schema = tmp_path / "once.json"
    schema.write_text(json.dumps({"type": "object"}), encoding="utf-8")
    assert (await grade(tmp_path, is_json("once.json"), "{}")).score == 1.0
    schema.write_text(json.dumps({"type": "array"}), encoding="utf-8")
    # the run's first reading stands (schemas are checked before the run)
    assert (await grade(tmp_path, is_json("once.json"), "{}")).score == 1.0
    broken = tmp_path / "later.json"
    assert (await grade(tmp_path, is_json("later.json"), "{}")).error is not None
    broken.write_text("{}", encoding="utf-8")
    assert (await grade(tmp_path, is_json("later.json"), "{}")).error is not None


async def test_schemas_orjson_cannot_encode_still_work_and_stay_apart(tmp_path: Path) -> None:
    # integers beyond 64 bits make orjson refuse the schema: the standard encoder keys it
    low = {"type": "integer", "maximum": 2**70}
    high = {"type": "integer", "maximum": 2**72}
    answer = str(2**71)
    assert (await grade(tmp_path, is_json(low), answer)).misses == [
        f"answer does not match the JSON Schema: {2**71} is greater than the maximum of "
        f"{2**70} (at `/`)"
    ]
    assert _verdict(await grade(tmp_path, is_json(high), answer)) == (
        1.0,
        ["answer is valid JSON matching the schema"],
        [],
        None,
    )
    broken = {"type": "integer", "maximum": 2**70, "minimum": "zero"}
    assert _verdict(await grade(tmp_path, is_json(broken), "1")) == _failure(
        "invalid JSON Schema (inline) at `minimum`: 'zero' is not of type 'number'"
    )


async def test_schema_string_and_mapping_give_the_same_verdicts(tmp_path: Path) -> None:
    as_text = json.dumps(SCHEMA)
    for answer in ('{"city": "Paris"}', '{"city": 3}'):
        by_text = await grade(tmp_path, is_json(as_text), answer)
        by_mapping = await grade(tmp_path, is_json(SCHEMA), answer)
        assert _verdict(by_text) == _verdict(by_mapping)
    # a string that does not start with "{" names a file
    (tmp_path / "[1]").write_text('{"type": "array"}', encoding="utf-8")
    assert (await grade(tmp_path, is_json("[1]"), "[]")).score == 1.0


@pytest.mark.parametrize(
    ("schema", "answer", "miss"),
    [
        (
            SCHEMA,
            '{"city": "Paris", "population": "many"}',
            "'many' is not of type 'integer' (at `population`)",
        ),
        (SCHEMA, "{}", "'city' is a required property (at `/`)"),
        (
            {"type": "object", "properties": {"a": {"properties": {"b": {"type": "string"}}}}},
            '{"a": {"b": 1}}',
            "1 is not of type 'string' (at `a/b`)",
        ),
        (
            {"type": "array", "items": {"type": "integer"}},
            '[1, "2"]',
            "'2' is not of type 'integer' (at `1`)",
        ),
        ({"type": "string", "maxLength": 3}, '"' + "x" * 400 + '"', "'" + "x" * 299 + "… (at `/`)"),
    ],
)
async def test_schema_miss_lines_in_full(
    tmp_path: Path, schema: dict[str, object], answer: str, miss: str
) -> None:
    result = await grade(tmp_path, is_json(schema), answer)
    assert _verdict(result) == (0.0, [], [f"answer does not match the JSON Schema: {miss}"], None)


@pytest.mark.parametrize(
    ("schema", "error"),
    [
        (
            {"type": "nope"},
            "(inline) at `type`: 'nope' is not valid under any of the given schemas",
        ),
        (
            {"type": "object", "required": "city"},
            "(inline) at `required`: 'city' is not of type 'array'",
        ),
        ({"minLength": -1}, "(inline) at `minLength`: -1 is less than the minimum of 0"),
        ('{"minLength": -1}', "(inline) at `minLength`: -1 is less than the minimum of 0"),
        (
            {"properties": {"a": {"type": "nope"}}},
            "(inline) at `properties/a/type`: 'nope' is not valid under any of the given schemas",
        ),
        (  # an error about the schema as a whole has no location
            {"$schema": "http://json-schema.org/draft-04/schema#", "exclusiveMinimum": True},
            "(inline): 'minimum' is a dependency of 'exclusiveMinimum'",
        ),
    ],
)
async def test_invalid_schema_errors_in_full(
    tmp_path: Path, schema: dict[str, object] | str, error: str
) -> None:
    result = await grade(tmp_path, is_json(schema), '{"city": "Paris"}')
    assert _verdict(result) == _failure(f"invalid JSON Schema {error}")


async def test_a_schema_whose_dollar_schema_is_not_text_is_an_error_not_a_crash(
    tmp_path: Path,
) -> None:
    (tmp_path / "s.json").write_text('{"$schema": 5}', encoding="utf-8")
    result = await grade(tmp_path, is_json("s.json"), "{}")
    assert (
        result.error
        == f"invalid JSON Schema in {tmp_path / 's.json'} at `$schema`: 5 is not a string"
    )


# --- contains / equals / regex: the shown value in full ----------------------------------


async def test_shown_values_are_json_quoted_and_shortened_past_80_characters(
    tmp_path: Path,
) -> None:
    exact = "x" * 80  # quoted: 82 characters, shown whole
    assert (await grade(tmp_path, contains(exact), "no")).misses == [
        f'answer does not contain "{exact}"'
    ]
    longer = "y" * 81  # quoted: 83 characters, cut to 80 and an ellipsis
    assert (await grade(tmp_path, contains(longer), "no")).misses == [
        'answer does not contain "' + "y" * 79 + '…"'
    ]
    quoted = 'say "hi"\n\tthen é'
    assert (await grade(tmp_path, contains(quoted), "no")).misses == [
        'answer does not contain "say \\"hi\\"\\n\\tthen é"'
    ]
    assert (await grade(tmp_path, equals(quoted), "no")).misses == [
        'answer does not equal "say \\"hi\\"\\n\\tthen é"'
    ]


async def test_icontains_lines_in_full(tmp_path: Path) -> None:
    hit = await grade(tmp_path, contains("ParIS", ignore_case=True), "the capital: PARIS")
    assert _verdict(hit) == (1.0, ['answer contains "ParIS" (ignoring case)'], [], None)
    miss = await grade(tmp_path, contains("Lyon", ignore_case=True), "PARIS")
    assert _verdict(miss) == (0.0, [], ['answer does not contain "Lyon" (ignoring case)'], None)
    # plain contains does not fold case in the needle either
    assert (await grade(tmp_path, contains("paris"), "PARIS")).score == 0.0


async def test_equals_strips_both_sides(tmp_path: Path) -> None:
    assert (await grade(tmp_path, equals("Paris"), "  Paris\n")).score == 1.0
    assert (await grade(tmp_path, equals("\tParis "), "Paris")).hits == ['answer equals "Paris"']
    assert (await grade(tmp_path, equals("Paris"), "paris")).score == 0.0


async def test_regex_shown_pattern_is_shortened_past_82_characters(tmp_path: Path) -> None:
    exact = "a" * 80  # /a…a/ is 82 characters: shown whole
    assert (await grade(tmp_path, regex(exact), "b")).misses == [f"answer does not match /{exact}/"]
    longer = "b" * 79  # with flags "im": 83 characters
    assert (await grade(tmp_path, regex(longer, "im"), "c")).misses == [
        "answer does not match /" + "b" * 79 + "…"
    ]
    assert (await grade(tmp_path, regex("^b", "im"), "a\nB")).hits == ["answer matches /^b/im"]


async def test_broken_pattern_error_in_full(tmp_path: Path) -> None:
    result = await grade(tmp_path, regex("(unclosed[", name="shape"), "anything")
    assert _verdict(result) == _failure(
        'invalid regular expression "(unclosed[": unterminated character set at position 9; '
        "fix `value` (Python `re` syntax)",
        "shape",
    )
    bad_flag = await grade(tmp_path, regex("a", "xq"), "a")
    assert bad_flag.error == "unknown regex flag 'q' in 'xq'; valid flags: i, m, s, x"
