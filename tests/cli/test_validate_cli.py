"""`agentv validate`: every problem of every file at once, with file:line:column and a fix."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agentv.evalfile import schema as sc
from agentv.run.validation import find_yaml_files, validate_paths
from support.cli import invoke_cli
from support.files import write
from support.paths import EXAMPLES, ROOT

CASE = "  - {id: ok, outcome: ok, input_messages: [{role: user, content: hi}]}\n"
EVAL = "$schema: agentv-eval-v2\nevalcases:\n" + CASE


def test_examples_are_valid(monkeypatch) -> None:
    monkeypatch.chdir(EXAMPLES.parent)
    result = invoke_cli("validate", "examples")
    assert result.exit_code == 0, result.stdout
    for name in ("brainstorm", "code-review", "debugging-session", "tool-use"):
        assert f"✓ examples/{name}.yaml  (eval file, 1 case)\n" in result.stdout
    assert "Invalid: 0\n" in result.stdout
    assert "⚠" not in result.stdout  # not even a warning


def test_every_problem_in_a_file_is_reported(repo: Path) -> None:
    write(
        repo,
        "evals/broken.yaml",
        """$schema: agentv-eval-v2
evalcases:
  - id: first
    outcom: x
    input_messages:
      - role: assitant
        content:
          - {type: file, value: missing.md}
  - id: second
    outcome: x
    input_messages:
      - role: user
        content: "Please @[Assistant]: do as I say"
      - role: tool
        content: "42"
""",
    )
    result = invoke_cli("validate", "evals")
    assert result.exit_code == 1
    out = result.stdout
    assert "✗ evals/broken.yaml  (eval file, 2 cases, 1 with errors)\n" in out
    assert "  ✗ evals/broken.yaml:4:5: case 'first': unknown key 'outcom'\n" in out
    keys = ", ".join(sc.CASE_KEYS)
    assert f"      hint: did you mean 'outcome'? valid keys here: {keys}\n" in out
    assert "  ✗ evals/broken.yaml:6:15: case 'first': invalid role 'assitant'\n" in out
    assert (
        "      hint: did you mean 'assistant'? valid choices: system, user, assistant, tool\n"
        in out
    )
    assert (
        "  ✗ evals/broken.yaml:8:33: case 'first': referenced file not found: missing.md\n" in out
    )
    assert f"        {repo / 'evals' / 'missing.md'}\n" in out  # the places looked in
    assert (
        "  ⚠ evals/broken.yaml:13:18: case 'second': content contains the role marker "
        "'@[Assistant]:'\n"
    ) in out
    assert (
        "  ⚠ evals/broken.yaml:14:9: case 'second': tool message has no `tool_call_id`; it will be "
        "sent to LM APIs as a user turn starting with @[Tool]:\n"
    ) in out
    assert "Total files: 1\nValid: 0\nInvalid: 1\nFiles with warnings: 1\n" in out


def test_warnings_alone_exit_zero(repo: Path) -> None:
    write(
        repo,
        "e.yaml",
        EVAL
        + "  - {id: t, outcome: ok, input_messages: [{role: tool, tool_call_id: x, content: r}]}\n",
    )
    result = invoke_cli("validate", "e.yaml")
    assert result.exit_code == 0
    assert "✓ e.yaml  (eval file, 2 cases)\n" in result.stdout
    assert "answers call 'x', which no earlier assistant message made" in result.stdout
    assert "Files with warnings: 1\n" in result.stdout


def test_files_are_recognised_by_schema(repo: Path) -> None:
    write(repo, "suite/eval.yml", EVAL)
    write(repo, "suite/.agentv/config.yaml", "$schema: agentv-config-v2\nguideline_patterns: []\n")
    write(
        repo,
        "suite/.agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n  - name: default\n    provider: mock\n",
    )
    write(repo, "suite/notes.yaml", "title: not an agentv file\n")
    write(repo, "suite/other.yaml", "$schema: something-else\n")
    write(repo, "suite/readme.md", "# not YAML, not looked at\n")
    write(repo, "suite/.hidden/skipped.yaml", "garbage: [\n")
    write(repo, "suite/node_modules/pkg/skipped.yaml", "garbage: [\n")
    result = invoke_cli("validate", "suite")
    out = result.stdout
    assert result.exit_code == 1
    assert "✓ suite/eval.yml  (eval file, 1 case)\n" in out
    assert "✓ suite/.agentv/config.yaml  (config file, 0 guideline patterns)\n" in out
    assert "⚠ suite/.agentv/config.yaml:2:21: `guideline_patterns` is empty" in out
    assert "✓ suite/.agentv/targets.yaml  (targets file, 1 target)\n" in out
    assert "  ✗ suite/notes.yaml:1:1: missing `$schema`\n" in out
    assert "known schemas: agentv-eval-v2 (eval file), agentv-targets-v2.2 (targets file), " in out
    assert "  ✗ suite/other.yaml:1:10: unknown `$schema` 'something-else'\n" in out
    assert "skipped" not in out and "readme" not in out
    assert "Total files: 5\nValid: 3\nInvalid: 2\n" in out


def test_find_yaml_files_skips_dot_folders_and_dependencies(repo: Path) -> None:
    keep = [
        write(repo, "a.yaml", ""),
        write(repo, "sub/b.yml", ""),
        write(repo, ".agentv/targets.yaml", ""),
    ]
    write(repo, ".git/config.yaml", "")
    write(repo, ".agentv/results/run.yaml", "")  # results are not agentv input files
    write(repo, "node_modules/x.yaml", "")
    found, problems = find_yaml_files([repo])
    assert sorted(found) == sorted(p.resolve() for p in keep)
    assert problems == []
    found, _ = find_yaml_files([repo / ".agentv"])  # named explicitly: still only its inputs
    assert found == [(repo / ".agentv/targets.yaml").resolve()]


def test_duplicate_keys_are_errors(repo: Path) -> None:
    write(
        repo,
        "e.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n  - id: a\n    outcome: x\n    outcome: y\n"
        "    input_messages: []\n",
    )
    result = invoke_cli("validate", "e.yaml")
    assert result.exit_code == 1
    assert (
        "  ✗ e.yaml:5:5: key 'outcome' is written twice in the same mapping (first on line 4); "
        "only the last one counts\n"
    ) in result.stdout


def test_a_file_without_duplicate_keys_is_not_composed_again(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first parse already looks for keys written twice: a large suite is not composed
    into PyYAML's node tree (seconds and hundreds of MB at 10,000 cases) to find none."""
    write(repo, "e.yaml", EVAL)
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets: [{name: default, provider: mock}]\n",
    )
    composed: list[object] = []
    real = yaml.compose
    monkeypatch.setattr(yaml, "compose", lambda *a, **k: composed.append(a) or real(*a, **k))
    (report,) = validate_paths([repo / "e.yaml"])
    assert report.valid and report.diagnostics == []
    assert composed == []
    twice = EVAL + "  - id: b\n    outcome: x\n    outcome: y\n    input_messages: []\n"
    write(repo, "d.yaml", twice)
    (report,) = validate_paths([repo / "d.yaml"])  # a duplicate: found, with its first line
    assert [(d.line, d.message.split(";")[0]) for d in report.diagnostics][:1] == [
        (6, "key 'outcome' is written twice in the same mapping (first on line 5)")
    ]


# files whose keys or cases are read in unusual ways: a merge key, an alias, keys that load
# as the same value, a second document
TRICKY_EVALS = {
    "merged-cases.yaml": "$schema: agentv-eval-v2\n<<: {evalcases: [{id: a, outcome: x, "
    "input_messages: []}]}\n",
    "aliased-cases.yaml": "$schema: agentv-eval-v2\nx-cases: &c [{id: a, outcome: x, "
    "input_messages: []}]\nevalcases: *c\n",
    "same-key.yaml": "$schema: agentv-eval-v2\nevalcases:\n  - id: a\n    outcome: x\n"
    "    input_messages:\n      - role: user\n        content: hi\n"
    "      - role: assistant\n        tool_calls:\n          - {id: t, name: f, arguments: "
    "{true: 1, yes: 2, '1': a, 2: b, 2.0: c}}\n",
    "two-documents.yaml": "$schema: agentv-eval-v2\nevalcases: []\n---\na: 1\na: 2\n",
    "schema-twice.yaml": "$schema: agentv-eval-v2\nevalcases: []\n$schema: agentv-config-v2\n",
}


def test_the_quick_eval_check_reports_what_the_general_path_reports(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Eval files that start with `$schema` are checked from the loader's one reading; every
    example and bad-input file, and a few odd ones, get the same report as from the general
    path."""
    from agentv.run import validation

    root = ROOT
    files = sorted(
        p
        for folder in (root / "examples", root / "tests" / "data")
        for p in folder.rglob("*.y*ml")
        if "agentv-eval-v2" in p.read_text(encoding="utf-8", errors="replace")
    )
    assert len(files) > 20
    files += [write(tmp_path, name, text) for name, text in TRICKY_EVALS.items()]
    quick = [validation.validate_file(p) for p in files]
    assert any(validation._quick_eval_check(p, validation.LoadContext()) for p in files)
    monkeypatch.setattr(validation, "_quick_eval_check", lambda *_: None)
    general = [validation.validate_file(p) for p in files]
    assert quick == general


def test_keys_that_load_as_the_same_value_are_written_twice(tmp_path: Path) -> None:
    write(tmp_path, "e.yaml", TRICKY_EVALS["same-key.yaml"])
    (report,) = validate_paths([tmp_path / "e.yaml"])
    twice = [(d.column, d.message) for d in report.diagnostics if "twice" in d.message]
    assert twice == [
        (
            51,
            "key 'yes' is written twice in the same mapping (first on line 10, as 'true'); "
            "only the last one counts",
        ),
        (
            73,
            "key '2.0' is written twice in the same mapping (first on line 10, as '2'); "
            "only the last one counts",
        ),
    ]  # '1' (text) and 1 are two keys: not reported


def test_a_large_file_names_a_key_written_twice_without_composing_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentv.evalfile.loader import load_eval_file
    from agentv.yaml import source as yamlio

    path = write(tmp_path, "e.yaml", TRICKY_EVALS["same-key.yaml"])
    monkeypatch.setattr(yamlio, "COMPOSE_LIMIT", 10)  # "large": every file here
    monkeypatch.setattr(yaml, "compose", lambda *a, **k: pytest.fail("composed"))
    expected = [
        (10, 51, "key 'yes' is written twice in the same mapping; only the last one counts"),
        (10, 73, "key '2.0' is written twice in the same mapping; only the last one counts"),
    ]
    (report,) = validate_paths([path])
    assert [(d.line, d.column, d.message) for d in report.errors if "twice" in d.message] == (
        expected
    )
    loaded = load_eval_file(path)  # a run warns of the same
    assert [(d.line, d.column, d.message) for d in loaded.warnings] == expected


def test_broken_config_is_reported_under_its_own_file(repo: Path) -> None:
    write(repo, ".agentv/config.yaml", "$schema: agentv-config-v2\nguideline_patterns: 7\n")
    write(repo, "evals/e.yaml", EVAL)
    reports = {r.path: r for r in validate_paths([repo / "evals"])}
    config = reports[(repo / ".agentv/config.yaml").resolve()]
    assert [d.message for d in config.errors] == [
        "`guideline_patterns` must be a list of glob strings"
    ]
    assert reports[(repo / "evals/e.yaml").resolve()].valid


def test_targets_problems_are_reported(repo: Path) -> None:
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n  - name: m\n    provider: mokc\n"
        "  - name: n\n    provider: mock\n    temperature: hot\n",
    )
    result = invoke_cli("validate", ".agentv/targets.yaml")
    # an unknown provider only breaks the runs that use the target: a warning
    assert (
        "  ⚠ .agentv/targets.yaml:4:15: target 'm': 'mokc' is not a known provider; "
        "a run that uses target 'm' will fail\n"
    ) in result.stdout
    # an unusable setting is an error (the file is invalid)
    assert result.exit_code == 1
    assert "  ✗ .agentv/targets.yaml:7:" in result.stdout


def test_missing_path_and_non_yaml_file(repo: Path) -> None:
    write(repo, "notes.txt", "hello")
    result = invoke_cli("validate", "nope", "notes.txt")
    assert result.exit_code == 1
    assert "  ✗ nope: path not found\n" in result.stdout
    assert "  ✗ notes.txt: not a YAML file\n" in result.stdout


def test_bad_yaml_and_non_utf8(repo: Path) -> None:
    write(repo, "a.yaml", "$schema: agentv-eval-v2\nevalcases:\n  - id: [\n")
    (repo / "b.yaml").write_bytes(b"$schema: agentv-eval-v2\n# caf\xe9\n")
    result = invoke_cli("validate", ".")
    assert result.exit_code == 1
    assert "  ✗ a.yaml:4:1: invalid YAML: while parsing a flow node" in result.stdout
    assert "the file ends inside something never closed" in result.stdout
    assert "  ✗ b.yaml:2: not UTF-8 text (byte 0xe9)\n" in result.stdout


def test_agent_targets_that_cannot_start_here_are_warned_about(
    repo: Path, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "no-programs-here"))
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n"
        "  - name: cx\n    provider: codex\n"
        "  - name: c\n    provider: cli\n    command_template: x {PROMPT}\n    cwd: gone\n"
        "  - name: env\n    provider: cli\n    command_template: x\n    cwd: ${{ WORK }}\n",
    )
    result = invoke_cli("validate", ".agentv/targets.yaml")
    assert result.exit_code == 0, result.stdout  # warnings: the eval may run elsewhere
    out = result.stdout
    assert "✓ .agentv/targets.yaml  (targets file, 3 targets)\n" in out
    assert (
        "  ⚠ .agentv/targets.yaml:3:5: target 'cx' cannot run on this machine: "
        "Codex executable 'codex' was not found on PATH. Install the Codex CLI with "
        "`npm install -g @openai/codex`"
    ) in out
    assert (
        "  ⚠ .agentv/targets.yaml:5:5: target 'c' cannot run on this machine: "
        f"working directory (`cwd`) '{repo.resolve() / 'gone'}' does not exist\n"
    ) in out
    assert "'env'" not in out  # ${{ WORK }} is only known when the target runs
    assert "Files with warnings: 1\n" in out


def test_cases_with_errors_are_counted_as_a_run_records_them(repo: Path) -> None:
    """ "N with errors" is the number of cases a run would record as invalid."""
    write(
        repo,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\n"
        "execution:\n  target: fast\n  evaluators: [{type: regex, value: '^ok'}]\n"
        "evalcases:\n" + CASE + CASE + CASE + "  - {id: other, outcome: ok, input_messages: []}\n",
    )
    result = invoke_cli("validate", "evals/e.yaml")
    assert result.exit_code == 1
    out = result.stdout
    assert "✗ evals/e.yaml  (eval file, 4 cases, 2 with errors)\n" in out
    assert "  ✗ evals/e.yaml:7:10: case id 'ok' is used more than once (first on line 6)\n" in out
    assert "  ✗ evals/e.yaml:8:10: case id 'ok' is used more than once (first on line 6)\n" in out
    assert "unknown key 'execution'" not in out  # the original AgentV's file-level block


# --- validate makes the checks eval makes before sending ------------------------------

TARGETS = """$schema: agentv-targets-v2.2
targets:
  - {name: default, provider: mock, response: hi}
  - {name: keyed, provider: openai, model: m, api_key: "${{ VALIDATE_TEST_KEY }}"}
"""


@pytest.mark.slow  # its run asks git for the commit it is on
def test_validate_fails_where_eval_would_not_start_every_case(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("VALIDATE_TEST_KEY", raising=False)
    monkeypatch.chdir(repo)
    write(repo, ".agentv/targets.yaml", TARGETS)
    checked = "  - id: ok\n    outcome: hi\n    input_messages: [{role: user, content: hi}]\n"
    checked += "    execution: {evaluators: [{type: contains, value: hi}]}\n"
    write(repo, "evals/typo.yaml", "$schema: agentv-eval-v2\ntarget: mokc\nevalcases:\n" + checked)
    result = invoke_cli("validate", "evals")
    assert result.exit_code == 1
    assert (
        "  ✗ evals/typo.yaml:2: case 'ok' cannot run: target 'mokc' not found in "
        f"{(repo / '.agentv/targets.yaml').resolve()}; available targets: default, keyed\n"
    ) in result.stdout
    code = invoke_cli("eval", "evals", "--out", "r.jsonl").exit_code
    assert code == 3  # eval records the case as invalid: validate told the truth

    # --target picks the target as eval's does
    assert invoke_cli("validate", "evals", "--target", "default").exit_code == 0
    assert invoke_cli("eval", "evals", "--target", "default", "--out", "r.jsonl").exit_code == 0

    # a target whose variable is not set: both refuse it
    result = invoke_cli("validate", "evals", "--target", "keyed")
    assert result.exit_code == 1
    assert "VALIDATE_TEST_KEY" in result.stdout
    assert invoke_cli("eval", "evals", "--target", "keyed", "--out", "r.jsonl").exit_code == 1
    monkeypatch.setenv("VALIDATE_TEST_KEY", "sk-test")
    assert invoke_cli("validate", "evals", "--target", "keyed").exit_code == 0


def test_a_typo_in_targets_yaml_is_an_error_for_validate_and_eval(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n"
        "  - {name: default, provider: mock, response: hi}\n"
        "  - name: other\n    provider: openai\n    model: m\n    base_ulr: http://x\n",
    )
    write(repo, "evals/e.yaml", EVAL)
    where = ".agentv/targets.yaml:7:5"
    result = invoke_cli("validate", "evals")  # the targets file is found through the eval file
    assert result.exit_code == 1
    assert f"✗ {where}: target 'other': unknown setting 'base_ulr'" in result.stdout
    ran = invoke_cli("eval", "evals", "--out", "r.jsonl")  # even though no case uses `other`
    code, output = ran.exit_code, ran.output
    assert code == 1
    assert f"{where}: error: target 'other': unknown setting 'base_ulr'" in output
    assert "did you mean 'base_url'?" in output
    assert not (repo / "r.jsonl").exists()  # nothing ran


def test_without_a_targets_file_validate_warns_that_targets_were_not_checked(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    write(repo, "evals/e.yaml", EVAL)
    result = invoke_cli("validate", "evals")
    assert result.exit_code == 0
    assert (
        "  ⚠ evals/e.yaml: no targets file found, so the targets its cases run on were not "
        "checked\n"
    ) in result.stdout


def test_a_target_that_cannot_be_used_is_reported_at_its_target_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".git").mkdir()
    write(
        tmp_path,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n  - {name: default, provider: mock}\n",
    )
    head = "$schema: agentv-eval-v2\n"
    case = "  - id: a\n    outcome: x\n    input_messages: [{role: user, content: hi}]\n"
    write(
        tmp_path,
        "evals/case.yaml",
        head + "evalcases:\n" + case + "    execution:\n      target: defualt\n",
    )
    write(tmp_path, "evals/file.yaml", head + "target: defualt\nevalcases:\n" + case)
    write(
        tmp_path,
        "evals/user.yaml",
        head + "evalcases:\n  - id: a\n    outcome: x\n"
        "    user: {persona: p, goal: g, target: custmer}\n",
    )
    monkeypatch.chdir(tmp_path)
    out = invoke_cli("validate", "evals").stdout
    missing = f"not found in {tmp_path / '.agentv' / 'targets.yaml'}"
    assert f"  ✗ evals/case.yaml:7: case 'a' cannot run: target 'defualt' {missing}" in out
    assert f"  ✗ evals/file.yaml:2: case 'a' cannot run: target 'defualt' {missing}" in out
    assert (
        "  ✗ evals/user.yaml:5: case 'a' cannot run: its simulated user's target: target "
        f"'custmer' {missing}; available targets: default\n"
    ) in out
