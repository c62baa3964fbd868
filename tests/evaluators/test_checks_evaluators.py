"""Evaluator settings checked before the first request (each evaluator's ``check``).

A broken regex, an invalid JSON Schema or a missing script would make an evaluator fail on
every answer, after the answer was paid for. The loader finds them first: the case is
invalid, the message is located at the setting, and ``validate`` says the same. Each check
agrees with what the evaluator does at run time (the last tests compare them).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentv.evalfile.loader import load_eval_file
from agentv.evaluators.deterministic import IsJsonSpec, regex_problem
from agentv.system.scripts import script_file
from support.cli import invoke_cli
from support.files import write


@pytest.fixture(autouse=True)
def _fresh_regex_cache() -> None:
    """``regex_problem`` is cached per process: each test starts from an empty cache."""
    regex_problem.cache_clear()


HEADER = "$schema: agentv-eval-v2\nevalcases:\n"
GOOD = "  - {id: good, outcome: ok, input_messages: [{role: user, content: hi}]}\n"


def suite(repo: Path, evaluators: str) -> Path:
    """An eval file: one good case, then case `bad` (line 4) with ``evaluators``."""
    bad = (
        "  - id: bad\n"
        "    outcome: ok\n"
        "    input_messages: [{role: user, content: hi}]\n"
        "    evaluators:\n" + evaluators
    )
    return write(repo, "evals/e.yaml", HEADER + GOOD + bad)


def only_error(path: Path) -> tuple[int | None, int | None, str, str | None]:
    """The one error of the file, which made case `bad` invalid and left `good` alone."""
    loaded = load_eval_file(path)
    assert [c.id for c in loaded.cases] == ["good"]
    (diag,) = loaded.errors
    (bad,) = loaded.invalid
    assert (bad.id, bad.index, bad.line, bad.diagnostics) == ("bad", 1, 4, (diag,))
    return diag.line, diag.column, diag.message, diag.hint


def loads_cleanly(path: Path) -> None:
    loaded = load_eval_file(path)
    assert [d.format() for d in loaded.errors] == []
    assert loaded.invalid == []


# --- regex ------------------------------------------------------------------------------------


def test_regex_that_does_not_compile(repo: Path) -> None:
    path = suite(repo, "      - {type: regex, value: 'a(b'}\n")
    line, column, message, hint = only_error(path)
    assert (line, column) == (8, 30)
    assert message == (
        "case 'bad': invalid regular expression \"a(b\": missing ), unterminated subpattern "
        "at position 1"
    )
    assert hint is not None and hint.startswith("fix `value` (Python `re` syntax)")


def test_a_long_or_non_ascii_pattern_is_shown_shortened_and_as_written() -> None:
    whole = regex_problem("(" + "a" * 79, None)  # 80 characters, 82 with the quotes
    assert whole is not None
    assert whole.message.startswith('invalid regular expression "(' + "a" * 79 + '": ')
    cut = regex_problem("(" + "a" * 80, None)  # one more: cut to 80 and an ellipsis
    assert cut is not None
    assert cut.message.startswith('invalid regular expression "(' + "a" * 78 + '…": ')
    accented = regex_problem("é(", None)
    assert accented is not None
    assert accented.message.startswith('invalid regular expression "é(": ')


def test_regex_flags_are_checked_and_used(repo: Path) -> None:
    path = suite(repo, "      - {type: regex, value: 'x', flags: iq}\n")
    line, column, message, hint = only_error(path)
    assert (line, column, message) == (8, 42, "case 'bad': unknown regex flag 'q' in 'iq'")
    assert hint is not None and hint.startswith("valid flags: i (ignore case), m (multi-line)")
    # `(?x)`-style verbose patterns compile only with their flag: it is taken into account
    loads_cleanly(suite(repo, "      - {type: regex, value: 'a  # letter', flags: x}\n"))


def test_good_regex_evaluators_load(repo: Path) -> None:
    loads_cleanly(suite(repo, "      - {type: regex, value: '^\\d+$', flags: im}\n"))


# --- is_json ------------------------------------------------------------------------------------


def test_inline_schema_that_is_not_a_json_schema(repo: Path) -> None:
    path = suite(repo, "      - {type: is_json, schema: {type: object, required: answer}}\n")
    line, column, message, _ = only_error(path)
    assert (line, column) == (8, 33)
    assert message == (
        "case 'bad': invalid JSON Schema (inline) at `required`: 'answer' is not of type 'array'"
    )


def test_inline_schema_string_that_is_not_json(repo: Path) -> None:
    path = suite(repo, "      - type: is_json\n        schema: '{\"type\": }'\n")
    line, column, message, hint = only_error(path)
    assert (line, column) == (9, 17)
    assert message == (
        "case 'bad': invalid JSON Schema (inline string): not valid JSON: "
        "Expecting value at character 10"
    )
    assert hint == (
        "write the schema as a YAML mapping under `schema:`, or give the path of a schema file"
    )


def test_inline_schema_string_that_is_json_is_checked_as_a_schema(repo: Path) -> None:
    path = suite(repo, "      - type: is_json\n        schema: '{\"type\": 5}'\n")
    _, _, message, _ = only_error(path)
    assert message.startswith("case 'bad': invalid JSON Schema (inline string) at `type`: 5 is not")


def test_schema_whose_draft_is_not_text(repo: Path) -> None:
    """jsonschema looks the draft up by the `$schema` string and crashed on a number."""
    from agentv.errors import Problem
    from agentv.evaluators.schemas import check_schema

    assert check_schema({"$schema": 5}, "(inline)") == Problem(
        "schema",
        "invalid JSON Schema (inline) at `$schema`: 5 is not a string",
        "`$schema` names the draft by its URI, such as "
        "`https://json-schema.org/draft/2020-12/schema`, or leave it out",
    )
    path = suite(repo, "      - {type: is_json, schema: {$schema: 5, type: object}}\n")
    line, column, message, hint = only_error(path)
    assert (line, column) == (8, 33)
    assert message == "case 'bad': invalid JSON Schema (inline) at `$schema`: 5 is not a string"
    assert hint == (
        "`$schema` names the draft by its URI, such as "
        "`https://json-schema.org/draft/2020-12/schema`, or leave it out"
    )
    # a targets file, so that validate checks the targets as a run would (no warning)
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets: [{name: default, provider: mock}]\n",
    )
    result = invoke_cli("validate", "evals/e.yaml")
    assert (result.exit_code, type(result.exception)) == (1, SystemExit)  # not a crash
    assert result.stdout == (
        "\nValidation Summary\n\n"
        "✗ evals/e.yaml  (eval file, 2 cases, 1 with errors)\n"
        "  ✗ evals/e.yaml:8:33: case 'bad': invalid JSON Schema (inline) at `$schema`: 5 is not "
        "a string\n"
        "      hint: `$schema` names the draft by its URI, such as "
        "`https://json-schema.org/draft/2020-12/schema`, or leave it out\n"
        "\nTotal files: 1\nValid: 0\nInvalid: 1\n\n"
    )


def test_schema_file_not_found(repo: Path) -> None:
    path = suite(repo, "      - {type: is_json, schema: schemas/answer.json}\n")
    line, column, message, hint = only_error(path)
    assert (line, column) == (8, 33)
    assert message == "case 'bad': JSON Schema file not found: schemas/answer.json"
    assert hint is not None and str(repo / "evals" / "schemas" / "answer.json") in hint


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "list.json",
            "[1, 2]",
            "invalid JSON Schema in list.json: a schema must be a mapping, not a list",
        ),
        (
            "scalar.yaml",
            "just words\n",
            "invalid JSON Schema in scalar.yaml: a schema must be a mapping, not text",
        ),
        (
            "number.json",
            "42",
            "invalid JSON Schema in number.json: a schema must be a mapping, not a number",
        ),
        (
            "broken.json",
            '{"type": ',
            "cannot read JSON Schema file broken.json: Expecting value: line 1 column 10 (char 9)",
        ),
        (
            "bad-keyword.yaml",
            "type: object\nproperties: [a, b]\n",
            "invalid JSON Schema in bad-keyword.yaml at `properties`: ['a', 'b'] is not of "
            "type 'object'",
        ),
    ],
)
def test_schema_file_that_is_not_a_schema(repo: Path, name: str, text: str, message: str) -> None:
    write(repo, f"evals/{name}", text)
    path = suite(repo, f"      - {{type: is_json, schema: {name}}}\n")
    assert only_error(path)[2] == f"case 'bad': {message}"


@pytest.mark.parametrize(
    ("name", "kind"),
    [("a.yaml", "YAML"), ("b.yml", "YAML"), ("C.YML", "YAML"), ("d.json", "JSON")],
)
def test_a_schema_file_that_cannot_be_read_says_how_it_must_be_written(
    repo: Path, name: str, kind: str
) -> None:
    write(repo, f"evals/{name}", "a: [\n" if kind == "YAML" else "{")
    path = suite(repo, f"      - {{type: is_json, schema: {name}}}\n")
    line, column, message, hint = only_error(path)
    assert (line, column) == (8, 33)  # at `schema`
    assert message.startswith(f"case 'bad': cannot read JSON Schema file {name}: ")
    assert hint == f"the file must hold one JSON Schema written as {kind} (UTF-8)"


def test_schema_hints_say_how_to_fix_it() -> None:
    from agentv.evaluators.schemas import check_schema

    not_a_mapping = check_schema([1], "(inline)")
    assert not_a_mapping is not None and not_a_mapping.hint == (
        "write the schema as a mapping, such as `{type: object, required: [answer]}`"
    )
    bad_keyword = check_schema({"type": 5}, "(inline)")
    assert bad_keyword is not None
    assert bad_keyword.hint == "fix the schema (https://json-schema.org/understanding-json-schema/)"


def test_a_schema_path_that_is_a_folder(repo: Path) -> None:
    (repo / "evals" / "schemas").mkdir(parents=True)
    path = suite(repo, "      - {type: is_json, schema: schemas}\n")
    line, column, message, hint = only_error(path)
    assert (line, column) == (8, 33)
    assert message == "case 'bad': JSON Schema file is a folder, not a file: schemas"
    folder = repo / "evals"
    assert hint == (
        f"`schema` is a file path relative to the eval file's folder ({folder}), or the schema "
        f"itself as a mapping; looked at {folder / 'schemas'}"
    )


def test_each_case_naming_a_missing_schema_file_is_invalid(repo: Path) -> None:
    case = (
        "  - id: c{i}\n    outcome: ok\n    input_messages: [{{role: user, content: hi}}]\n"
        "    evaluators:\n      - {{type: is_json, schema: gone.json}}\n"
    )
    loaded = load_eval_file(
        write(repo, "evals/two.yaml", HEADER + case.format(i=1) + case.format(i=2))
    )
    assert [c.id for c in loaded.invalid] == ["c1", "c2"]  # the second from the cache
    assert loaded.cases == []


def test_inline_schemas_are_told_apart_by_value(repo: Path) -> None:
    path = write(
        repo,
        "evals/e.yaml",
        HEADER + "  - {id: a, outcome: ok, input_messages: [{role: user, content: hi}],"
        " evaluators: [{type: is_json, schema: {type: object}}]}\n"
        "  - {id: b, outcome: ok, input_messages: [{role: user, content: hi}],"
        " evaluators: [{type: is_json, schema: {type: 5}}]}\n",
    )
    loaded = load_eval_file(path)
    assert [c.id for c in loaded.cases] == ["a"]
    assert [c.id for c in loaded.invalid] == ["b"]
    (error,) = loaded.errors
    assert error.message.startswith("case 'b': invalid JSON Schema (inline) at `type`: 5 is not")


def test_a_mapping_whose_keys_cannot_be_sorted_is_checked_as_it_is() -> None:
    from agentv.evaluators.schemas import SchemaChecker

    # eval files only have text keys; the checker does not depend on it
    problem = SchemaChecker().problem({"type": 5, 1: "x"}, Path("."))
    assert problem is not None
    assert problem.message.startswith("invalid JSON Schema (inline) at `type`: 5 is not")


def test_an_inline_schema_string_nested_too_deeply() -> None:
    from agentv.evaluators.schemas import SchemaChecker

    problem = SchemaChecker().problem('{"a":' * 100_000, Path("."))
    assert problem is not None and problem.message.startswith(
        "invalid JSON Schema (inline string): not valid JSON: maximum recursion depth exceeded"
    )


def test_good_schemas_load(repo: Path) -> None:
    write(repo, "evals/answer.json", '{"type": "object", "required": ["answer"]}')
    write(repo, "evals/anything.json", "true")  # a boolean is a JSON Schema
    write(repo, "evals/answer.yaml", "type: object\nrequired: [answer]\n")
    loads_cleanly(
        suite(
            repo,
            "      - {type: is_json, schema: answer.json}\n"
            "      - {type: is_json, schema: anything.json}\n"
            "      - {type: is_json, schema: ./answer.yaml}\n"
            "      - {type: is_json, schema: {type: array, items: {type: integer}}}\n"
            "      - type: is_json\n"
            '        schema: \'{"type": "string"}\'\n'
            "      - {type: is_json}\n",
        )
    )


def test_a_schema_is_checked_once_for_the_whole_file(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentv.evaluators import schemas

    calls = []
    real = schemas.check_schema

    def counting(schema: object, label: str) -> object:
        calls.append(label)
        return real(schema, label)

    monkeypatch.setattr(schemas, "check_schema", counting)
    write(repo, "evals/answer.json", '{"type": "object"}')
    cases = "".join(
        f"  - id: c{i}\n    outcome: ok\n    input_messages: [{{role: user, content: hi}}]\n"
        "    evaluators:\n      - {type: is_json, schema: answer.json}\n"
        "      - {type: is_json, schema: {type: object}}\n"
        + (
            "      - {type: is_json, schema: {type: object, minProperties: 1}}\n"
            if i % 2
            else "      - {type: is_json, schema: {minProperties: 1, type: object}}\n"
        )
        + "      - {type: is_json, schema: {type: object, default: 2024-01-01}}\n"
        for i in range(50)
    )
    loaded = load_eval_file(write(repo, "evals/many.yaml", HEADER + cases))
    assert len(loaded.cases) == 50
    # the same mapping in another key order, and a date (no JSON value), are each one schema
    assert calls == ["in answer.json", "(inline)", "(inline)", "(inline)"]


# --- code ---------------------------------------------------------------------------------------


def test_code_script_that_does_not_exist(repo: Path) -> None:
    path = suite(repo, "      - {type: code, script: python3 check.py}\n")
    line, column, message, hint = only_error(path)
    assert (line, column) == (8, 30)
    assert message == "case 'bad': code evaluator script not found: check.py"
    assert hint == (
        f"the command runs in {repo / 'evals'}, where check.py does not exist; create it, fix "
        "the path, or set `cwd` on the evaluator to the folder that holds it"
    )


def test_code_script_is_looked_for_in_its_cwd(repo: Path) -> None:
    write(repo, "evals/check.py", "print('{\"score\": 1}')\n")
    write(repo, "evals/checks/grade.sh", "echo '{\"score\": 1}'\n")
    loads_cleanly(
        suite(
            repo,
            "      - {type: code, script: python3 check.py}\n"
            "      - {type: code, script: uv run --quiet check.py --strict}\n"
            "      - {type: code, script: ./grade.sh, cwd: checks}\n"
            "      - {type: code, script: sh checks/grade.sh}\n"
            "      - {type: code, script: 'FOO=1 python3 ./check.py'}\n",
        )
    )
    path = suite(repo, "      - {type: code, script: ./check.py, cwd: checks}\n")
    assert only_error(path)[2] == "case 'bad': code evaluator script not found: ./check.py"


def test_missing_cwd_is_the_only_error(repo: Path) -> None:
    path = suite(repo, "      - {type: code, script: python3 check.py, cwd: nowhere}\n")
    assert only_error(path)[2] == "case 'bad': code evaluator folder not found: nowhere"


def test_commands_that_name_no_file_are_not_checked(repo: Path) -> None:
    loads_cleanly(
        suite(
            repo,
            "      - type: code\n"
            '        script: "echo \'{\\"score\\": 1}\'"\n'
            "      - {type: code, script: python3 -m graders.answer}\n"
            "      - type: code\n"
            "        script: python3 -c 'import sys; print(1)' missing.py\n"
            "      - {type: code, script: my-grader --strict}\n"
            "      - {type: code, script: 'cat | grade.py'}\n"
            "      - type: code\n"
            "        script: npm run grade\n",
        )
    )


@pytest.mark.parametrize(
    ("command", "file"),
    [
        ("python check.py", "check.py"),
        ("python3.12 -u check.py --flag", "check.py"),
        ("./check.sh", "./check.sh"),
        ("scripts/grade", "scripts/grade"),
        ("node dist/check.js", "dist/check.js"),
        ("npx tsx check.ts", "check.ts"),
        ("uv run grade.py", "grade.py"),
        ("bash grade.sh > out.txt", "grade.sh"),
        ("X=1 Y=2 ./run.sh", "./run.sh"),
        ("'./my check.sh'", None),  # a path with a space: the shell's business
        ("python", None),
        ("python -m pkg.check", None),
        ("node -e 'console.log(1)'", None),
        ("bash -c 'python check.py'", None),
        ("grep -q yes out/log.txt", None),  # not a runner: its arguments are not scripts
        ("echo https://example.com/a.py", None),
        ("python $HOME/check.py", None),  # expanded by the shell, not checked
        ("python 'unbalanced", None),
        ("", None),
        ("python https://example.com/a.py", None),  # a URL, even after a runner
        ("-v/check.sh", None),  # an option, not a path
        ("python3 tools/X.py", "tools/X.py"),
        ("python 'my.py'", "my.py"),  # the shell's quotes are not part of the name
        ("python a#b.py", "a#b.py"),  # a `#` inside a word is no comment to the shell
        ("x=1 ./run.sh", "./run.sh"),  # a lower-case assignment is not the command
        ("python -c check.py", None),  # inline code, whatever it looks like
    ],
)
def test_which_word_of_a_command_is_its_script(command: str, file: str | None) -> None:
    assert script_file(command) == file


def test_only_the_command_itself_is_looked_for_on_path(
    repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from agentv.system.scripts import script_problem

    bin_dir = tmp_path / "bin"
    write(bin_dir, "grade.py", "#!/bin/sh\n").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    cwd = repo / "evals"
    cwd.mkdir(parents=True, exist_ok=True)
    assert script_problem("grade.py", cwd) is None  # the command, found on PATH
    # a runner's argument is a file in the evaluator's folder, whatever PATH holds
    problem = script_problem("python3 grade.py", cwd)
    assert problem is not None and problem.message == "code evaluator script not found: grade.py"
    # a path is never looked up on PATH, nor from the folder agentv was started in
    monkeypatch.chdir(tmp_path)
    problem = script_problem("bin/grade.py", cwd)
    assert (
        problem is not None and problem.message == "code evaluator script not found: bin/grade.py"
    )


def test_a_missing_script_is_said_of_what_runs_it(tmp_path: Path) -> None:
    from agentv.errors import Problem
    from agentv.system.scripts import script_problem

    def hint(what: str) -> str:
        return (
            f"the command runs in {tmp_path}, where answer.py does not exist; create it, fix "
            f"the path, or set `cwd` on the {what} to the folder that holds it"
        )

    assert script_problem("python3 answer.py", tmp_path, "tool") == Problem(
        "script", "tool script not found: answer.py", hint("tool")
    )
    assert script_problem("python3 answer.py", tmp_path) == Problem(
        "script", "code evaluator script not found: answer.py", hint("evaluator")
    )


def test_a_program_on_path_is_never_checked(
    repo: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    tool = write(bin_dir, "grade.py", "#!/bin/sh\necho '{\"score\": 1}'\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{__import__('os').environ['PATH']}")
    loads_cleanly(suite(repo, "      - {type: code, script: grade.py --strict}\n"))


# --- trajectory evaluators ------------------------------------------------------------------------


def every_error(path: Path) -> list[tuple[int | None, int | None, str, str | None]]:
    """The errors of the file, all on case `bad` (the good case loads)."""
    loaded = load_eval_file(path)
    assert [c.id for c in loaded.cases] == ["good"]
    return [(d.line, d.column, d.message, d.hint) for d in loaded.errors]


NO_COUNT = "no count could pass"
NEEDS_ARGS = (
    "case 'bad': `args_match: exact` needs `args`: the arguments the call must have",
    "give `args`, or leave `args_match` out",
)


def test_counts_that_cannot_both_hold(repo: Path) -> None:
    path = suite(
        repo,
        "      - {type: tool_used, tool: search, args_match: exact, min: 3, max: 1}\n"
        "      - {type: step_count}\n"
        "      - {type: step_count, min: 4, max: 2}\n"
        "      - {type: step_count, min: 2, max: 2}\n"
        "      - {type: tool_used, tool: search, min: 0, max: 0}\n"
        "      - {type: step_count, max: 3}\n"
        "      - {type: step_count, max: null}\n",
    )
    assert every_error(path) == [
        (8, 53, *NEEDS_ARGS),
        (8, 73, "case 'bad': `max` (1) is less than `min` (3)", NO_COUNT),
        (
            9,
            9,
            "case 'bad': `step_count` needs `min`, `max` or both",
            "give the fewest (`min`) and/or the most (`max`) tool calls allowed",
        ),
        (10, 41, "case 'bad': `max` (2) is less than `min` (4)", NO_COUNT),
        (
            14,
            33,
            "case 'bad': `step_count` needs `min`, `max` or both",
            "give the fewest (`min`) and/or the most (`max`) tool calls allowed",
        ),
    ]


def test_a_mode_and_what_it_needs(repo: Path) -> None:
    path = suite(
        repo,
        "      - {type: tool_trajectory, mode: any_order}\n"
        "      - {type: tool_trajectory, mode: any_order, minimums: {a: 1}, expected: [a]}\n"
        "      - {type: tool_trajectory, mode: exact}\n"
        "      - {type: tool_trajectory, mode: in_order, expected: [a], minimums: {a: 1}}\n"
        "      - {type: tool_trajectory, mode: any_order, minimums: {a: 1}}\n"
        "      - {type: tool_trajectory, mode: superset, expected: [a]}\n"
        "      - {type: tool_trajectory, mode: any_order, minimums: {}}\n"
        "      - {type: tool_trajectory, mode: exact, expected: []}\n",
    )
    needs_minimums = (
        "case 'bad': `mode: any_order` needs `minimums`: each tool and its fewest calls",
        "write `minimums: {search: 2, fetch: 1}`, or use `mode: superset` with `expected` calls",
    )
    needs_expected = (
        "case 'bad': `mode: exact` needs `expected`: the calls, in order",
        "list them: `- search` or `- {tool: search, args: {query: ...}}`",
    )
    assert every_error(path) == [
        (8, 9, *needs_minimums),
        (
            9,
            78,
            "case 'bad': `mode: any_order` counts `minimums`; it takes no `expected` list",
            "use `mode: superset` (these calls, in any order, others allowed) or `unordered` "
            "(these calls and no other)",
        ),
        (10, 9, *needs_expected),
        (
            11,
            74,
            "case 'bad': `minimums` is for `mode: any_order`, not `in_order`",
            "remove `minimums`, or use `mode: any_order`",
        ),
        (14, 60, *needs_minimums),  # written empty: said at the key
        (15, 56, *needs_expected),
    ]


def test_the_expected_calls_are_checked_one_by_one(repo: Path) -> None:
    path = suite(
        repo,
        "      - {type: tool_call_f1, expected: []}\n"
        "      - {type: tool_call_f1, expected: [a, {tool: b, args_match: exact}]}\n"
        "      - {type: tool_trajectory, mode: exact, expected: [{tool: b, args_match: exact}]}\n"
        "      - {type: tool_trajectory, mode: exact, expected: [a, {tool: b, args: {x: 1}}]}\n"
        "      - {type: tool_trajectory, mode: in_order, expected:\n"
        "          [{tool: a, args_match: exact}, {tool: b, args_match: exact}]}\n",
    )
    assert every_error(path) == [
        (
            8,
            40,
            "case 'bad': `expected` must list at least one call",
            "list the calls the candidate should make",
        ),
        (9, 66, *NEEDS_ARGS),
        (10, 79, *NEEDS_ARGS),
        (13, 34, *NEEDS_ARGS),  # each expected call is checked
        (13, 64, *NEEDS_ARGS),
    ]


def test_argument_schemas_are_checked_and_said_as_args_schema(repo: Path) -> None:
    write(repo, "evals/args.json", '{"properties": {"command": {"pattern": "pytest"}}}')
    path = suite(
        repo,
        "      - {type: tool_not_used, tool: rm, args_schema: missing.json}\n"
        "      - {type: tool_used, tool: rm, args_schema: '{\"a\":'}\n"
        "      - {type: tool_used, tool: rm, args_schema: {type: 5}}\n"
        "      - {type: tool_used, tool: sh, args_schema: args.json}\n",
    )
    evals = repo / "evals"
    assert every_error(path) == [
        (
            8,
            54,
            "case 'bad': JSON Schema file not found: missing.json",
            f"`args_schema` is a file path relative to the eval file's folder ({evals}), or "
            f"the schema itself as a mapping; looked at {evals / 'missing.json'}",
        ),
        (
            9,
            50,
            "case 'bad': invalid JSON Schema (inline string): not valid JSON: Expecting value "
            "at character 6",
            "write the schema as a YAML mapping under `args_schema:`, or give the path of a "
            "schema file",
        ),
        (
            10,
            50,
            "case 'bad': invalid JSON Schema (inline) at `type`: 5 is not valid under any of "
            "the given schemas",
            "fix the schema (https://json-schema.org/understanding-json-schema/)",
        ),
    ]


# --- the file-level `execution:` defaults are checked too ----------------------------------------


def test_file_level_evaluators_are_checked_as_header_problems(repo: Path) -> None:
    path = write(
        repo,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\nexecution:\n  evaluators:\n"
        "    - {type: regex, value: '(('}\n" + "evalcases:\n" + GOOD,
    )
    from agentv.errors import InputError

    with pytest.raises(InputError) as info:
        load_eval_file(path)
    (diag,) = info.value.diagnostics
    # the header of a streamed file is located by its top-level keys: the key path says where
    assert (diag.line, diag.column, diag.location) == (3, 3, "execution.evaluators[0].value")
    assert diag.message.startswith(
        '`execution.evaluators[0].value`: invalid regular expression "((": missing ),'
    )


# --- validate says the same -----------------------------------------------------------------------


def test_validate_reports_the_same_message_and_place(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(repo, "evals/list.json", "[]")
    suite(
        repo,
        "      - {type: regex, value: 'a(b'}\n"
        "      - {type: is_json, schema: list.json}\n"
        "      - {type: code, script: python3 check.py}\n",
    )
    result = invoke_cli("validate", "evals/e.yaml")
    assert result.exit_code == 1
    out = result.stdout
    assert "✗ evals/e.yaml  (eval file, 2 cases, 1 with errors)\n" in out
    for where, message in [
        ("8:30", 'invalid regular expression "a(b": missing ), unterminated subpattern'),
        ("9:33", "invalid JSON Schema in list.json: a schema must be a mapping, not a list"),
        ("10:30", "code evaluator script not found: check.py"),
    ]:
        assert f"  ✗ evals/e.yaml:{where}: case 'bad': {message}" in out


# --- the checks agree with the evaluators at run time --------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "flags"),
    [("a(b", None), ("[z-a]", ""), ("x", "iq"), ("ok", "imsx"), ("(?P<n>a)", "s"), ("*", None)],
)
def test_regex_check_agrees_with_the_regex_evaluator(pattern: str, flags: str | None) -> None:
    from agentv.evaluators.deterministic import _compile

    at_run_time = _compile(pattern, flags or "")
    assert (regex_problem(pattern, flags) is None) == (not isinstance(at_run_time, str))


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object"},
        {"type": "nope"},
        {"$schema": 5},
        {"$schema": None, "type": "object"},
        '{"type": "object"}',
        '{"type": ',
        '{"minLength": -1}',
        "answer.json",
        "missing.json",
        "list.json",
        "bool.json",
        "answer.yaml",
        "bad.yaml",
    ],
)
def test_schema_check_agrees_with_the_is_json_evaluator(tmp_path: Path, schema: object) -> None:
    from agentv.evaluators import schemas
    from agentv.evaluators.schemas import SchemaChecker

    write(tmp_path, "answer.json", '{"type": "object"}')
    write(tmp_path, "list.json", "[]")
    write(tmp_path, "bool.json", "false")
    write(tmp_path, "answer.yaml", "type: object\n")
    write(tmp_path, "bad.yaml", "type: [object\n")
    spec = IsJsonSpec.model_validate({"type": "is_json", "schema": schema})
    schemas._SCHEMAS.clear()  # files are cached by path across tests
    at_run_time = schemas.resolve_schema(spec.schema_, tmp_path / "e.yaml")
    problem = SchemaChecker().problem(spec.schema_, tmp_path)
    assert (problem is None) == (not isinstance(at_run_time, str))


@pytest.mark.slow
def test_script_check_agrees_with_a_real_run(repo: Path) -> None:
    """A script the check accepts runs; one it refuses fails to start at run time."""
    from agentv.system.process import run_process

    write(repo, "evals/check.py", "print('ok')\n")
    for command, exists in [("python3 check.py", True), ("python3 gone.py", False)]:
        result = asyncio.run(run_process(command, cwd=repo / "evals", stdin=b"", timeout=30))
        assert (result.exit_code == 0) == exists
