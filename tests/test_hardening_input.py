"""Hostile and careless input (issue 16): each problem reproduced through the real command
line, on real files, then shown to be a located error instead of a traceback."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from agentv.yaml.stream import MAX_DEPTH
from support.cli import agentv_cli
from support.files import write
from support.targets import mock_target, write_targets

CASE = """\
  - id: a
    outcome: x
    input_messages:
      - role: user
        content: hi
"""
HEADER = "$schema: agentv-eval-v2\n"


def _project(repo: Path, eval_text: str) -> Path:
    write_targets(repo, mock_target())
    return write(repo, "e.yaml", eval_text)


# --- 1. deep nesting --------------------------------------------------------------------

DEEP_MAP = HEADER + "evalcases:\n" + CASE + "    note: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n"
DEEP_LIST = HEADER + "note: " + "[" * 100_000 + "]" * 100_000 + "\n" + "evalcases:\n" + CASE
CYCLE = (
    HEADER
    + "evalcases:\n"
    + CASE
    + "    execution:\n      evaluators:\n"
    + ("        - type: is_json\n          schema: &s {type: object, properties: {x: *s}}\n")
)


# Either agentv's own depth check speaks or, from PyYAML 6.0.4 on, libyaml's (it stops flow
# nesting at 1,000 levels, before agentv's 200-level check sees the node). Both are located
# errors a user can act on; the line must be right either way.
TOO_DEEP = (f"nested too deeply (more than {MAX_DEPTH} levels)", "exceeded maximum nesting depth")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("text", "line", "messages"),
    [
        (DEEP_MAP, 8, TOO_DEEP),
        (DEEP_LIST, 2, TOO_DEEP),
        (CYCLE, 11, ("nested too deeply: the alias *s repeats a value that contains it",)),
    ],
    ids=["map-5000", "list-100000", "alias-cycle"],
)
@pytest.mark.parametrize("command", ["validate", "eval", "render"])
def test_deep_nesting_is_a_located_error(
    repo: Path, text: str, line: int, messages: tuple[str, ...], command: str
) -> None:
    _project(repo, text)
    start = time.monotonic()
    result = agentv_cli(repo, command, "e.yaml")
    assert time.monotonic() - start < 30
    out = result.stdout + result.stderr
    assert "Traceback" not in out and "RecursionError" not in out
    located = [row for row in out.splitlines() if f"e.yaml:{line}:" in row]
    assert any(m in row for row in located for m in messages), out
    assert result.returncode == 1


@pytest.mark.slow
@pytest.mark.parametrize(
    "rel", [".agentv/targets.yaml", ".agentv/config.yaml"], ids=["targets", "config"]
)
def test_deep_nesting_in_targets_and_config_files(repo: Path, rel: str) -> None:
    _project(repo, HEADER + "evalcases:\n" + CASE)
    schema = "agentv-targets-v2.2" if "targets" in rel else "agentv-config-v2"
    write(repo, rel, f"$schema: {schema}\nextra: " + "[" * 50_000 + "]" * 50_000 + "\n")
    for command in ("validate", "eval"):
        args = [command, "e.yaml", ".agentv/"] if command == "validate" else [command, "e.yaml"]
        result = agentv_cli(repo, *args)
        out = result.stdout + result.stderr
        assert "Traceback" not in out
        located = [row for row in out.splitlines() if f"{rel}:2:" in row]
        assert any(m in row for row in located for m in ("nested too deeply", TOO_DEEP[1])), out
        assert result.returncode in (1, 3)  # 3: the case that needed the config is invalid


def test_nesting_up_to_the_limit_is_read() -> None:
    from agentv.yaml.stream import stream_yaml

    # The top-level mapping is level 1: MAX_DEPTH - 1 lists fit below it.
    depth = MAX_DEPTH - 1
    data = stream_yaml("k: " + "[" * depth + "]" * depth).data
    for _ in range(depth - 1):
        data = data["k"] if isinstance(data, dict) else data[0]
    with pytest.raises(Exception, match="nested too deeply"):
        stream_yaml("k: " + "[" * (depth + 1) + "]" * (depth + 1))
    # An alias repeats what it names: nesting it again counts its levels.
    half = MAX_DEPTH // 2 + 1
    text = f"a: &a {'[' * half}{']' * half}\nb: {'[' * half}*a{']' * half}\n"
    with pytest.raises(Exception, match="nested too deeply") as info:
        stream_yaml(text)
    assert info.value.problem_mark.line == 1  # type: ignore[attr-defined]


@pytest.mark.slow
def test_deep_json_and_schema_files_are_errors_not_tracebacks(repo: Path) -> None:
    deep_json = "[" * 100_000 + "]" * 100_000
    write(repo, "deep.schema.yaml", "type: object\nx: " + "[" * 5000 + "]" * 5000 + "\n")
    text = (
        HEADER
        + "evalcases:\n"
        + CASE.replace("id: a", "id: args")
        + "      - role: assistant\n        content: ok\n        tool_calls:\n"
        + f"          - {{id: c1, name: f, arguments: '{{\"a\": {deep_json}}}'}}\n"
        + CASE.replace("id: a", "id: schema-file")
        + "    execution:\n      evaluators:\n"
        + "        - {type: is_json, schema: deep.schema.yaml}\n"
        + CASE.replace("id: a", "id: schema-inline")
        + "    execution:\n      evaluators:\n"
        + f"        - {{type: is_json, schema: '{{\"a\": {deep_json}}}'}}\n"
    )
    _project(repo, text)
    for command in ("validate", "eval", "render"):
        result = agentv_cli(repo, command, "e.yaml")
        out = result.stdout + result.stderr
        assert "Traceback" not in out, out
        assert "tool call arguments are nested too deeply" in out, out
        assert any(m in out for m in TOO_DEEP)  # the schema file (see TOO_DEEP)
        assert out.count("recursion depth") >= 1  # the inline JSON string: Python's words


# --- 2. more guideline patterns than the matcher takes ------------------------------------


def _pattern_project(repo: Path, count: int) -> None:
    patterns = "".join(f'  - "p{i}/**"\n' for i in range(count - 1)) + '  - "g/**"\n'
    write(
        repo, ".agentv/config.yaml", "$schema: agentv-config-v2\nguideline_patterns:\n" + patterns
    )
    write(repo, "g/style.md", "Be brief.")
    _project(
        repo,
        HEADER
        + "evalcases:\n"
        + CASE
        + "  - id: b\n    outcome: x\n    input_messages:\n      - role: user\n"
        + "        content:\n          - {type: file, value: g/style.md}\n",
    )


@pytest.mark.slow
def test_guideline_patterns_beyond_the_limit_are_a_config_error(repo: Path) -> None:
    from agentv.evalfile.guidelines import GUIDELINE_PATTERN_LIMIT

    assert GUIDELINE_PATTERN_LIMIT == 1000
    _pattern_project(repo, 1001)
    message = "`guideline_patterns` lists 1001 patterns; at most 1000 are allowed"
    for command in ("validate", "eval", "render"):
        result = agentv_cli(repo, command, "e.yaml")
        out = result.stdout + result.stderr
        assert "Traceback" not in out and "PatternLimitException" not in out, out
        assert f".agentv/config.yaml:3:3: {message}" in out or (
            f".agentv/config.yaml:3:3: error: {message}" in out
        ), out
    assert agentv_cli(repo, "validate", "e.yaml").returncode == 1


@pytest.mark.slow
def test_guideline_patterns_up_to_the_limit_work(repo: Path) -> None:
    _pattern_project(repo, 1000)
    result = agentv_cli(repo, "render", "e.yaml", "--eval-id", "b", "--format", "json")
    assert result.returncode == 0, result.stderr
    assert "Be brief." in result.stdout and "[[ ## Guidelines ## ]]" in result.stdout
    assert agentv_cli(repo, "validate", "e.yaml").returncode == 0


# --- 3. unclosed ${{ and unusable base_url ----------------------------------------------------

BAD_TARGETS = """\
$schema: agentv-targets-v2.2
targets:
  - name: unclosed
    provider: openai
    model: gpt-4o
    api_key: ${{ HARDENING_KEY
  - name: bad-url
    provider: anthropic
    model: claude
    base_url: not a url
    api_key: sk-literal-0123456789
  - name: bad-endpoint
    provider: azure
    endpoint: my-resource.openai.azure.com
    model: gpt-4o
    api_key: ${{ HARDENING_KEY }}
  - name: env-url
    provider: gemini
    base_url: ${{ HARDENING_URL }}
    api_key: ${{ HARDENING_KEY }}
  - name: cli
    provider: cli
    command_template: 'echo ${{ HARDENING_KEY } {PROMPT}'
"""
EVAL_ANY = HEADER + "evalcases:\n" + CASE + "    evaluators:\n      - {type: contains, value: x}\n"


@pytest.mark.slow
def test_unclosed_refs_and_bad_urls_are_validate_errors(repo: Path) -> None:
    _project(repo, EVAL_ANY)
    write(repo, ".agentv/targets.yaml", BAD_TARGETS)
    result = agentv_cli(repo, "validate", ".agentv/targets.yaml")
    out = result.stdout
    assert result.returncode == 1
    broken = "has a `${{` that is not a complete `${{ VAR }}` reference"
    url = "must be an http:// or https:// URL with a host, such as https://api.example.com/v1"
    assert f"targets.yaml:6:14: target 'unclosed': `api_key` {broken}" in out, out
    assert f"targets.yaml:10:15: target 'bad-url': invalid `base_url`: {url}" in out
    assert "targets.yaml:14:15: target 'bad-endpoint': invalid `endpoint`: must be an Azure " in out
    assert f"targets.yaml:23:23: target 'cli': `command_template` {broken}" in out
    assert "env-url" not in out  # known only once substituted
    assert "sk-literal" not in out and "HARDENING_KEY" not in out  # values are never echoed


@pytest.mark.slow
@pytest.mark.parametrize(
    ("target", "reason"),
    [
        ("unclosed", "targets.yaml:6:14: error: target 'unclosed': `api_key` has a `${{` that "),
        ("bad-url", "targets.yaml:10:15: error: target 'bad-url': invalid `base_url`: must be "),
        ("env-url", "target 'env-url' in "),
        ("cli", "targets.yaml:23:23: error: target 'cli': `command_template` has a `${{` that "),
    ],
)
def test_such_targets_are_refused_before_anything_is_sent(
    repo: Path, target: str, reason: str
) -> None:
    _project(repo, EVAL_ANY)
    if target == "env-url":  # wrong only once substituted: the file alone is fine
        only = BAD_TARGETS[
            BAD_TARGETS.index("  - name: env-url") : BAD_TARGETS.index("  - name: cli")
        ]
        write(repo, ".agentv/targets.yaml", BAD_TARGETS[: BAD_TARGETS.index("  - name:")] + only)
        reason += f"{repo / '.agentv' / 'targets.yaml'} cannot be used: invalid `base_url`: must "
    else:  # the file has errors: every run refuses it, whatever target it names
        write(repo, ".agentv/targets.yaml", BAD_TARGETS)
    env = {"HARDENING_KEY": "k" * 20, "HARDENING_URL": "not a url either"}
    start = time.monotonic()
    result = agentv_cli(repo, "eval", "e.yaml", "--target", target, env=env)
    assert time.monotonic() - start < 30  # no retries: nothing was sent
    assert result.returncode == 1
    assert reason in result.stderr, result.stderr
    assert "k" * 20 not in result.stdout + result.stderr


def test_substitution_refuses_a_broken_reference() -> None:
    from agentv.errors import ConfigError
    from agentv.targets.resolve import substitute_env

    env = {"K": "secret-value-123"}
    assert substitute_env("Bearer ${{ K }}", env, target="t", field_name="f") == (
        "Bearer secret-value-123"
    )
    for value in ("${{ K", "${{ K }} and ${{ 1BAD }}", ["ok", {"x": "${{K }"}]):
        with pytest.raises(ConfigError, match="is not a complete `\\$\\{\\{ VAR \\}\\}`") as info:
            substitute_env(value, env, target="t", field_name="f")
        assert "secret-value" not in str(info.value)


# --- 5. usage errors exit 2 --------------------------------------------------------------------


@pytest.mark.slow
def test_bad_output_format_and_negative_timeout_are_usage_errors(repo: Path) -> None:
    _project(repo, EVAL_ANY)
    result = agentv_cli(repo, "eval", "e.yaml", "--dry-run", "--output-format", "xml")
    assert result.returncode == 2, result.stderr
    assert "'xml' is not one of" in result.stderr and "'jsonl', 'yaml'" in result.stderr
    result = agentv_cli(repo, "eval", "e.yaml", "--dry-run", "--agent-timeout", "-5")
    assert result.returncode == 2, result.stderr
    assert "--agent-timeout" in result.stderr
    assert not (repo / ".agentv" / "results").exists()  # nothing ran
    # 0 still means no limit; yaml still writes YAML
    out = repo / "r.yaml"
    result = agentv_cli(
        repo,
        "eval",
        "e.yaml",
        "--dry-run",
        "--agent-timeout",
        "0",
        "--output-format",
        "yaml",
        "--out",
        str(out),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert out.read_text(encoding="utf-8").startswith(("eval_id:", "---"))


# --- 6. out-of-range code scores; judge replies without JSON ------------------------------------

ECHO_TARGETS = """\
$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: cli
    command_template: echo answer
    judge_target: judge
  - name: judge
    provider: cli
    command_template: echo no json here
"""


def _records(path: Path) -> dict[str, dict[str, object]]:
    import json

    lines = path.read_text(encoding="utf-8").splitlines()
    return {rec["eval_id"]: rec for rec in map(json.loads, lines)}


def _case(case_id: str, evaluators: str = "") -> str:
    text = CASE.replace("id: a", f"id: {case_id}")
    return text + (f"    execution:\n      evaluators:\n{evaluators}" if evaluators else "")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("printed", "shown"),
    [
        ('{"score": 7}', "7"),
        ('{"score": -0.5}', "-0.5"),
        ('{"score": "1.5"}', "'1.5'"),
        ('{"score": NaN}', "NaN"),
        ('{"score": 1e999}', "Infinity"),
    ],
)
def test_out_of_range_code_scores_are_evaluator_errors(
    repo: Path, printed: str, shown: str
) -> None:
    write(repo, "verdict.json", printed + "\n")
    evaluators = "        - {name: checker, type: code, script: cat verdict.json}\n"
    _project(repo, HEADER + "evalcases:\n" + _case("scored", evaluators))
    write(repo, ".agentv/targets.yaml", ECHO_TARGETS)
    result = agentv_cli(repo, "eval", "e.yaml", "--out", "r.jsonl")
    assert result.returncode == 3, result.stdout + result.stderr
    rec = _records(repo / "r.jsonl")["scored"]
    reason = (
        f"`cat verdict.json` printed the score {shown}, but a score must be a number from 0 to 1"
    )
    assert rec["status"] == "error" and rec["score"] == 0.0
    entry = rec["evaluator_results"][0]  # type: ignore[index]
    assert entry["error"] == reason and entry["score"] == 0.0
    assert rec["error"] == f"evaluator 'checker' could not grade: {reason}"


@pytest.mark.slow
@pytest.mark.parametrize("score", ['"0_1"', '"nan"', '"inf"', '"+.5"', '"\uff11"', '"1_000e-3"'])
def test_a_score_in_a_string_is_read_as_json_writes_numbers(repo: Path, score: str) -> None:
    # Python's float() reads "0_1" as 1.0: a script printing it must not pass a case
    write(repo, "verdict.json", f'{{"score": {score}}}\n')
    evaluators = "        - {name: checker, type: code, script: cat verdict.json}\n"
    _project(repo, HEADER + "evalcases:\n" + _case("scored", evaluators))
    write(repo, ".agentv/targets.yaml", ECHO_TARGETS)
    result = agentv_cli(repo, "eval", "e.yaml", "--out", "r.jsonl")
    assert result.returncode == 3, result.stdout + result.stderr
    rec = _records(repo / "r.jsonl")["scored"]
    assert rec["status"] == "error" and rec["score"] == 0.0
    assert "did not print a JSON object with a numeric `score`" in str(rec["error"])


def test_numbers_in_strings_are_json_numbers() -> None:
    from agentv.evaluators.base import as_score, number_text

    assert [number_text(t) for t in ("0.5", " 1e-3 ", "-0", "1", "0.25E+1")] == [
        0.5,
        0.001,
        -0.0,
        1.0,
        2.5,
    ]
    for text in ("0_1", "1_0", "nan", "NaN", "inf", "-Infinity", "+1", ".5", "1.", "\uff11", "0x1"):
        assert number_text(text) is None, text
        assert as_score(text) is None, text
    assert as_score("0.75") == 0.75 and as_score(7) == 1.0  # a judge's score is clamped


@pytest.mark.slow
def test_in_range_code_scores_still_grade(repo: Path) -> None:
    scores = ["0", "1", "0.25", '"1.0"']
    evaluators = ""
    for i, score in enumerate(scores):
        write(repo, f"v{i}.json", f'{{"score": {score}}}\n')
        evaluators += f"        - {{name: c{i}, type: code, script: cat v{i}.json}}\n"
    _project(repo, HEADER + "evalcases:\n" + _case("scored", evaluators))
    write(repo, ".agentv/targets.yaml", ECHO_TARGETS)
    result = agentv_cli(repo, "eval", "e.yaml", "--out", "r.jsonl")
    rec = _records(repo / "r.jsonl")["scored"]
    assert [e["score"] for e in rec["evaluator_results"]] == [0, 1, 0.25, 1]  # type: ignore[union-attr]
    assert "error" not in rec, result.stdout


@pytest.mark.slow
def test_judge_reply_without_json_sets_error(repo: Path) -> None:
    # Both ways a case gets a judge: an `llm_judge` in its list, and the default (no list).
    listed = _case("listed", "        - {name: j, type: llm_judge}\n")
    _project(repo, HEADER + "evalcases:\n" + listed + _case("default-judge"))
    write(repo, ".agentv/targets.yaml", ECHO_TARGETS)
    result = agentv_cli(repo, "eval", "e.yaml", "--out", "r.jsonl")
    assert result.returncode == 3
    records = _records(repo / "r.jsonl")
    reason = "judge reply has no JSON verdict with a numeric score: 'no json here'"
    listed_rec = records["listed"]
    assert listed_rec["evaluator_results"][0]["error"] == reason  # type: ignore[index]
    assert listed_rec["error"] == f"evaluator 'j' could not grade: {reason}"
    # without a list there is no evaluator entry: the record names the default judge
    default_rec = records["default-judge"]
    assert "evaluator_results" not in default_rec
    assert default_rec["error"] == f"evaluator 'llm_judge' could not grade: {reason}"
    assert default_rec["status"] == "error"


# --- 7. a code evaluator's cwd outside the repository ---------------------------------------------


@pytest.mark.slow
def test_code_evaluator_cwd_outside_the_root_needs_allow_outside_root(repo: Path) -> None:
    outside = repo.parent / "elsewhere"
    outside.mkdir()
    write(outside, "v.json", '{"score": 1}\n')
    evaluators = "        - {name: c, type: code, script: cat v.json, cwd: ../elsewhere}\n"
    _project(repo, HEADER + "evalcases:\n" + _case("outside", evaluators))
    write(repo, ".agentv/targets.yaml", ECHO_TARGETS)
    message = f"code evaluator folder ../elsewhere resolves outside the repository root ({outside})"
    result = agentv_cli(repo, "validate", "e.yaml")
    assert result.returncode == 1 and "e.yaml:10:" in result.stdout
    assert message in result.stdout, result.stdout
    result = agentv_cli(repo, "eval", "e.yaml", "--out", "r.jsonl")
    assert result.returncode == 3 and message in result.stdout + result.stderr
    rec = _records(repo / "r.jsonl")["outside"]
    assert rec["status"] == "invalid" and message in str(rec["error"])
    assert "evaluator_results" not in rec  # the script never ran
    # allowed: it runs there
    result = agentv_cli(repo, "eval", "e.yaml", "--out", "ok.jsonl", "--allow-outside-root")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _records(repo / "ok.jsonl")["outside"]["evaluator_results"][0]["score"] == 1  # type: ignore[index]
    assert agentv_cli(repo, "validate", "e.yaml", "--allow-outside-root").returncode == 0


# --- 4. control characters from files never reach the terminal raw ---------------------------------

EVIL = "evil\\e[2J\\e]0;pwned\\a\\x9b31m"  # as written in YAML (double-quoted escapes)
EVIL_TEXT = "evil\x1b[2J\x1b]0;pwned\x07\x9b31m"  # what it means
EVIL_SHOWN = "evil\\x1b[2J\\x1b]0;pwned\\x07\\x9b31m"  # what the terminal gets
ESCAPE_TARGETS = f"""\
$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: cli
    command_template: printf '%s' "answer"
    judge_target: "{EVIL}"
  - name: "{EVIL}"
    provider: cli
    command_template: printf '%s' '{{"score":0.1}}'
"""


def _assert_escaped(out: str) -> None:
    for raw in ("\x1b", "\x07", "\x9b"):
        assert raw not in out, repr(out)
    assert EVIL_SHOWN in out, out


@pytest.mark.slow
def test_control_characters_are_escaped_on_the_terminal(repo: Path) -> None:
    write(repo, "fail.sh", f"printf '{EVIL_TEXT}' >&2; exit 1\n")
    evaluators = "        - {name: crash, type: code, script: sh fail.sh}\n"
    text = (
        HEADER
        + "evalcases:\n"
        + _case(f'"{EVIL}"', "        - {type: llm_judge}\n")
        + _case(f'"{EVIL}-2"', evaluators)
        + _case(f'"{EVIL}-3"').replace("content: hi", "content: [{type: file, value: nope.md}]")
    )
    _project(repo, text)
    write(repo, ".agentv/targets.yaml", ESCAPE_TARGETS)
    result = agentv_cli(repo, "eval", "e.yaml", "--out", "r.jsonl", "--verbose")
    assert result.returncode == 3, result.stdout + result.stderr
    _assert_escaped(result.stdout + result.stderr)
    assert "Using target: default" in result.stdout
    # the results keep the exact text
    records = _records(repo / "r.jsonl")
    assert set(records) == {EVIL_TEXT, EVIL_TEXT + "-2", EVIL_TEXT + "-3"}
    assert EVIL_TEXT in str(records[EVIL_TEXT + "-2"]["error"])
    for command in (["validate", "e.yaml"], ["render", "e.yaml"]):
        result = agentv_cli(repo, *command)
        _assert_escaped(result.stdout + result.stderr)
    result = agentv_cli(repo, "render", "e.yaml", "--target", EVIL_TEXT)
    _assert_escaped(result.stdout + result.stderr)


def test_the_live_display_escapes_labels_and_errors() -> None:
    import io

    from rich.console import Console

    from agentv.cli.progress import LiveProgress

    stream = io.StringIO()
    progress = LiveProgress(Console(file=stream, force_terminal=True, width=200))
    progress.start(2)
    progress.case_started("1", EVIL_TEXT + " | t")
    stream.write(str(progress.render()))
    console = Console(file=stream, force_terminal=True, width=200)
    console.print(progress.render())
    progress.case_finished("1", EVIL_TEXT, status="error", score=None, error=EVIL_TEXT)
    console.print(progress.render())
    progress.note(EVIL_TEXT)
    progress.finish()
    out = stream.getvalue()
    assert "\x1b]0;" not in out and "\x1b[2J" not in out and "\x07" not in out
    assert "\x9b" not in out and EVIL_SHOWN in out


# --- 8. known secrets are masked everywhere agentv writes or forwards text ---------------------

SECRET = "sk-hardening-0123456789abcdef"
LEAKY_TARGETS = """\
$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: cli
    command_template: sh -c 'echo "my key is $AGENT_KEY"; echo "err $AGENT_KEY" >&2' {PROMPT}
    env: {AGENT_KEY: "${{ HARDENING_SECRET }}"}
    judge_target: echo-judge
  - name: vendor
    provider: cli
    command_template: sh -c 'echo "vendor key $OPENAI_API_KEY"; exit 3' {PROMPT}
    inherit_env: ["*", OPENAI_API_KEY]   # vendor keys are withheld unless named
    judge_target: echo-judge
  - name: echo-judge
    provider: cli
    command_template: sh -c 'printf "%s" "$1" | tee -a judge-requests.txt' judge {PROMPT}
"""


@pytest.mark.slow
def test_a_key_printed_by_an_agent_is_masked_everywhere(repo: Path) -> None:
    evaluators = "        - {name: script, type: code, script: cat > code-stdin.json; cat v.json}\n"
    write(repo, "v.json", '{"score": 1}\n')
    text = (
        HEADER
        + "evalcases:\n"
        + _case("leaky-default-judge")
        + _case("leaky-listed", evaluators + "        - {name: j, type: llm_judge}\n")
    )
    _project(repo, text)
    write(repo, ".agentv/targets.yaml", LEAKY_TARGETS)
    env = {"HARDENING_SECRET": SECRET}
    result = agentv_cli(
        repo, "eval", "e.yaml", "--out", "r.jsonl", "--verbose", "--dump-prompts", env=env
    )
    assert result.returncode == 3, result.stdout + result.stderr  # the judge echoes: no verdict
    assert SECRET not in result.stdout + result.stderr
    assert "my key is ***" in result.stdout  # the judge's echo, quoted in its error
    # the judge got the masked answer, and so did the code evaluator
    judge_requests = (repo / "judge-requests.txt").read_text(encoding="utf-8")
    assert "my key is ***" in judge_requests and SECRET not in judge_requests
    assert "my key is ***" in (repo / "code-stdin.json").read_text(encoding="utf-8")
    for path in repo.rglob("*"):  # results, prompt dumps, anything agentv wrote
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    records = _records(repo / "r.jsonl")
    for rec in records.values():
        assert rec["candidate_answer"] == "my key is ***"
        assert rec["masked_secrets"] is True and list(rec)[-1] == "masked_secrets"
    # the model reads it back
    from agentv.results.record import EvalResult

    assert EvalResult.model_validate(records["leaky-listed"]).masked_secrets is True


@pytest.mark.slow
def test_a_vendor_key_in_an_agent_error_is_masked(repo: Path) -> None:
    _project(repo, HEADER + "evalcases:\n" + _case("vendor-leak"))
    write(repo, ".agentv/targets.yaml", LEAKY_TARGETS)
    env = {"OPENAI_API_KEY": SECRET, "HARDENING_SECRET": "unused-but-set"}
    result = agentv_cli(repo, "eval", "e.yaml", "--target", "vendor", "--out", "r.jsonl", env=env)
    assert result.returncode == 3
    assert SECRET not in result.stdout + result.stderr
    assert SECRET not in (repo / "r.jsonl").read_text(encoding="utf-8")
    rec = _records(repo / "r.jsonl")["vendor-leak"]
    # the cli provider masks credential-looking variables in its own errors already
    assert "vendor key ***" in str(rec["error"])


def test_short_values_and_unrelated_text_are_left_alone() -> None:
    from agentv.system.masking import Masker

    masker = Masker(["short", "", "  sk-0123456789  "])
    assert masker.text("a short word") == ("a short word", False)
    assert masker.text("key sk-0123456789!") == ("key ***!", True)
    record = {"candidate_answer": "fine", "error": None}
    assert masker.record(record) == record and "masked_secrets" not in masker.record(record)
    assert not Masker(["1234567"])  # under 8 characters: nothing to mask


QUOTING_JUDGE_TARGETS = """\
$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: mock
    response: fine
    judge_target: quoting-judge
  - name: quoting-judge
    provider: cli
    command_template: sh judge.sh {PROMPT}
    env: {JUDGE_KEY: "${{ HARDENING_SECRET }}"}
"""


@pytest.mark.slow
def test_a_judge_quoting_a_key_is_masked_in_the_cache_too(repo: Path) -> None:
    _project(
        repo, HEADER + "evalcases:\n" + _case("quoted", "        - {name: j, type: llm_judge}\n")
    )
    write(repo, ".agentv/targets.yaml", QUOTING_JUDGE_TARGETS)
    write(
        repo,
        "judge.sh",
        'printf \'{"score": 1, "hits": ["ok"], "misses": [], "reasoning": "used %s"}\' '
        '"$JUDGE_KEY"\n',
    )
    env = {"HARDENING_SECRET": SECRET}
    for run in ("first", "second"):
        result = agentv_cli(repo, "eval", "e.yaml", "--cache", "--out", f"{run}.jsonl", env=env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert SECRET not in result.stdout + result.stderr
        rec = _records(repo / f"{run}.jsonl")["quoted"]
        assert rec["status"] == "ok" and rec["score"] == 1
        assert "used ***" in json.dumps(rec)
        if run == "first":
            assert rec["masked_secrets"] is True
            assert "0 target answers and 0 judge answers reused, 1 target request sent" in (
                result.stdout
            )
        else:  # the judge's answer was masked when it was cached
            assert "1 target answer and 1 judge answer reused" in result.stdout
    cached = list((repo / ".agentv" / "cache").rglob("*.json"))
    assert len(cached) == 2  # the target's answer and the judge's
    (judged,) = [path for path in cached if b"used ***" in path.read_bytes()]  # masked
    # an entry an older agentv stored unmasked: reused masked, and rewritten so on disk
    judged.write_bytes(judged.read_bytes().replace(b"used ***", b"used " + SECRET.encode()))
    result = agentv_cli(repo, "eval", "e.yaml", "--cache", "--out", "third.jsonl", env=env)
    assert "1 target answer and 1 judge answer reused" in result.stdout
    assert "used ***" in json.dumps(_records(repo / "third.jsonl")["quoted"])
    assert b"used ***" in judged.read_bytes()
    # the same for a target's answer (the judge is asked again: its prompt holds the answer)
    (answer,) = [path for path in cached if path != judged]
    answer.write_bytes(answer.read_bytes().replace(b'"fine"', b'"fine ' + SECRET.encode() + b'"'))
    result = agentv_cli(repo, "eval", "e.yaml", "--cache", "--out", "fourth.jsonl", env=env)
    assert "1 target answer and 0 judge answers reused" in result.stdout
    assert _records(repo / "fourth.jsonl")["quoted"]["candidate_answer"] == "fine ***"
    assert b"fine ***" in answer.read_bytes()
    for path in repo.rglob("*"):  # results, the cache, anything agentv wrote
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
