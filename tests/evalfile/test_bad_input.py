"""Broken eval files (``tests/data/bad/``): each gives one exact message at an exact place.

Checked three ways: through the loader, through ``agentv render`` (a bad case is skipped
with a warning on stderr, never a traceback) and through ``agentv validate``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentv.errors import Diagnostic, InputError
from agentv.evalfile.loader import load_eval_file
from support.cli import invoke_cli
from support.paths import DATA

BAD = DATA / "bad"


@dataclass(frozen=True)
class Expected:
    file: str
    line: int | None
    column: int | None
    message: str
    hint: str | None = None  # the hint starts with this
    severity: str = "error"
    whole_file: bool = False  # the file cannot be used at all
    usable_cases: int = 0
    #: `validate` tells files apart by `$schema`, so a file without an eval schema is
    #: described as "not one of agentv's files" rather than as a broken eval file
    validate_message: str | None = None
    #: `validate` is stricter than a run where it says so (a key written twice)
    validate_severity: str | None = None


EXPECTED = [
    Expected(
        "malformed-yaml.yaml",
        4,
        14,
        "invalid YAML: while scanning a quoted scalar, found unexpected end of stream",
        "the quote opened at line 4 is never closed: end the value with the same quote",
        whole_file=True,
    ),
    Expected(
        "missing-schema.yaml",
        1,
        1,
        "missing `$schema`",
        "add `$schema: agentv-eval-v2` at the top",
        whole_file=True,
    ),
    Expected(
        "wrong-schema.yaml",
        1,
        10,
        "`$schema` is 'agentv-eval-v1', expected 'agentv-eval-v2'",
        "set `$schema: agentv-eval-v2`",
        whole_file=True,
        validate_message="unknown `$schema` 'agentv-eval-v1'",
    ),
    Expected(
        "targets-not-eval.yaml",
        1,
        10,
        "`$schema` is 'agentv-targets-v2.2', expected 'agentv-eval-v2'",
        "this is a targets file, not an eval file",
        whole_file=True,
    ),
    Expected(
        "not-a-mapping.yaml",
        1,
        1,
        "an eval file must be a YAML mapping",
        "start the file with `$schema: agentv-eval-v2`",
        whole_file=True,
        validate_message="the file is not a YAML mapping, so it has no `$schema`",
    ),
    Expected(
        "empty.yaml",
        None,
        None,
        "the file is empty",
        "start the file",
        whole_file=True,
        validate_message="the file is empty, so it has no `$schema`",
    ),
    Expected(
        "no-evalcases.yaml",
        1,
        1,
        "`evalcases` is missing",
        "list the cases under `evalcases:`",
        whole_file=True,
    ),
    Expected(
        "not-utf8.yaml",
        4,
        None,
        "not UTF-8 text (byte 0xe9)",
        "save the file with UTF-8 encoding",
        whole_file=True,
    ),
    Expected(
        "case-without-id.yaml",
        3,
        5,
        "missing required key `id`",
        "give every case a unique `id: some-name`",
    ),
    Expected(
        "case-without-outcome.yaml",
        3,
        5,
        "case 'no-outcome': missing required key `outcome`",
        "describe what a good answer achieves in `outcome:`",
    ),
    Expected(
        "case-without-input-messages.yaml",
        3,
        5,
        "case 'no-input': missing required key `input_messages`",
        "add `input_messages:` with at least one `- role: user` turn",
    ),
    Expected(
        "bad-role.yaml",
        6,
        15,
        "case 'bad-role': invalid role 'human'",
        "valid choices: system, user, assistant, tool",
    ),
    Expected(
        "one-good-one-bad.yaml",
        11,
        15,
        "case 'bad': invalid role 'usr'",
        "did you mean 'user'? valid choices: system, user, assistant, tool",
        usable_cases=1,
    ),
    Expected(
        "unknown-key.yaml",
        8,
        5,
        "case 'typo': unknown key 'expected_mesages'",
        "did you mean 'expected_messages'?",
    ),
    Expected(
        "missing-file.yaml",
        11,
        20,
        "case 'missing-file': referenced file not found: does-not-exist.py",
        "create the file or fix the path; looked in:\n",
    ),
    Expected(
        "outside-root.yaml",
        9,
        20,
        "case 'steals-a-file': referenced file /etc/passwd resolves outside the repository "
        "root (/etc/passwd)",
        "keep referenced files inside ",
    ),
    Expected(
        "bad-content-block.yaml",
        8,
        19,
        "case 'bad-block': unknown content block type 'txt'",
        "did you mean 'text'? valid choices: text, file",
    ),
    Expected(
        "bare-string-block.yaml",
        8,
        13,
        "case 'bare-string': content list items must be mappings like {type: text, value: ...}",
        "write `- {type: text, value: your text}` instead of a bare string",
    ),
    Expected(
        "numeric-id.yaml", 3, 9, "`id` must be text (a string)", 'put the value in quotes: id: "42"'
    ),
    Expected(
        "bad-tool-arguments.yaml",
        11,
        24,
        "case 'bad-arguments': tool call arguments are not valid JSON: Expecting value at "
        "character 10",
        "write the arguments as a YAML mapping instead of a string",
    ),
    Expected(
        "unknown-evaluator.yaml",
        9,
        15,
        "case 'judge-typo': unknown evaluator type 'llm_judje'",
        "did you mean 'llm_judge'? valid choices: llm_judge, code,",
    ),
    Expected(
        "text-block-without-value.yaml",
        8,
        26,
        "case 'text-key': text block needs `value`, not `text`",
        "write `{type: text, value: ...}`",
    ),
    Expected(
        "grader-key.yaml",
        5,
        5,
        "case 'old-grader': unknown key 'grader'",
        "did you mean `evaluator`?",
    ),
    Expected(
        "duplicate-id.yaml",
        8,
        9,
        "case id 'greet' is used more than once (first on line 3)",
        "give every case its own id",
        usable_cases=1,
    ),
    Expected(
        "bad-regex.yaml",
        10,
        16,
        "case 'broken-pattern': invalid regular expression \"[0-9+\": unterminated character "
        "set at position 0",
        "fix `value` (Python `re` syntax)",
    ),
    Expected(
        "unpaired-tool.yaml",
        8,
        9,
        "case 'orphan-result': tool message has no `tool_call_id`; it will be sent to LM APIs "
        "as a user turn starting with @[Tool]:",
        "add `tool_calls` with a matching `id` to the assistant message before it",
        severity="warning",
        usable_cases=1,
    ),
    Expected(
        "key-twice.yaml",
        12,
        5,
        "key 'execution' is written twice in the same mapping (first on line 8); only the "
        "last one counts",
        "remove or merge one of them",
        severity="warning",
        usable_cases=1,
        validate_severity="error",
    ),
    Expected(
        "role-marker-in-content.yaml",
        7,
        18,
        "case 'injection': content contains the role marker '@[System]:'",
        "agentv writes role markers itself",
        severity="warning",
        usable_cases=1,
    ),
]


def test_every_bad_file_has_an_expectation() -> None:
    assert sorted(p.name for p in BAD.glob("*.yaml")) == sorted(e.file for e in EXPECTED)


def _only_diagnostic(expected: Expected) -> Diagnostic:
    path = BAD / expected.file
    if expected.whole_file:
        with pytest.raises(InputError) as info:
            load_eval_file(path)
        diags = info.value.diagnostics
    else:
        loaded = load_eval_file(path)
        assert len(loaded.cases) == expected.usable_cases
        diags = loaded.diagnostics
    assert len(diags) == 1, [d.format() for d in diags]
    return diags[0]


@pytest.mark.parametrize("expected", EXPECTED, ids=lambda e: e.file)
def test_loader_message(expected: Expected) -> None:
    diag = _only_diagnostic(expected)
    assert diag.file == (BAD / expected.file).resolve()
    assert (diag.line, diag.column) == (expected.line, expected.column)
    assert diag.severity == expected.severity
    assert diag.message == expected.message
    if expected.hint is not None:
        assert diag.hint is not None and diag.hint.startswith(expected.hint)


@pytest.mark.parametrize(
    "expected", [e for e in EXPECTED if not e.whole_file], ids=lambda e: e.file
)
def test_a_case_with_an_error_is_kept_as_invalid(expected: Expected) -> None:
    loaded = load_eval_file(BAD / expected.file)
    (diag,) = loaded.diagnostics
    if expected.severity == "warning":
        assert loaded.invalid == []  # a warning alone does not stop a case
        return
    (bad,) = loaded.invalid
    assert bad.diagnostics == (diag,)  # the same diagnostic object as printed
    assert bad.eval_file == (BAD / expected.file).resolve()
    assert bad.dataset == Path(expected.file).stem
    assert bad.line is not None and bad.line <= (diag.line or 0)


def _where(expected: Expected) -> str:
    where = expected.file
    if expected.line is not None:
        where += f":{expected.line}"
        if expected.column is not None:
            where += f":{expected.column}"
    return where


@pytest.mark.parametrize("expected", EXPECTED, ids=lambda e: e.file)
def test_render_skips_or_fails_with_the_message(
    expected: Expected, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(BAD)
    result = invoke_cli("render", expected.file, "--format", "json")
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    assert f"{_where(expected)}: {expected.severity}: {expected.message}\n" in result.stderr
    assert len(json.loads(result.stdout)) == expected.usable_cases
    assert result.exit_code == (0 if expected.usable_cases else 1)


@pytest.mark.parametrize("expected", EXPECTED, ids=lambda e: e.file)
def test_validate_reports_the_message(expected: Expected, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(BAD)
    result = invoke_cli("validate", expected.file)
    assert result.exception is None or isinstance(result.exception, SystemExit)
    severity = expected.validate_severity or expected.severity
    mark = "✗" if severity == "error" else "⚠"
    if expected.file == "targets-not-eval.yaml":
        assert result.exit_code == 0  # a fine targets file; no targets to check here
        return
    message = expected.validate_message or expected.message
    assert f"  {mark} {_where(expected)}: {message}\n" in result.stdout
    assert result.exit_code == (1 if severity == "error" else 0)


def test_many_problems_in_one_file_are_reported_together(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "e.yaml").write_text(
        """$schema: agentv-eval-v2
evalcases:
  - id: a
    outcome: x
    input_messages:
      - role: usr
        content:
          - {type: file, value: gone.md}
  - id: b
    outcom: x
    input_messages: []
  - id: c
    outcome: x
    input_messages: [{role: user, content: fine}]
""",
        encoding="utf-8",
    )
    result = invoke_cli("render", "e.yaml", "--format", "json")
    assert result.exit_code == 0  # case c still renders
    assert [c["eval_id"] for c in json.loads(result.stdout)] == ["c"]
    err = result.stderr
    assert "e.yaml:6:15: error: case 'a': invalid role 'usr'" in err
    assert "e.yaml:8:33: error: case 'a': referenced file not found: gone.md" in err
    assert "e.yaml:10:5: error: case 'b': unknown key 'outcom'" in err
    assert "skipped 2 of 3 case(s)" in err
