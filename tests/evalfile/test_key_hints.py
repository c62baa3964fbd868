"""An unknown key anywhere gets a "did you mean" (when a valid key is close) and the valid
keys of its block, read from the model that validates the block; one mistake is one error."""

from __future__ import annotations

from pathlib import Path

from agentv.errors import Diagnostic
from agentv.evalfile.guidelines import parse_config
from agentv.evalfile.loader import load_eval_file
from agentv.targets import validate_targets_file
from support.files import write

TURN_KEYS = "content, outcome, expected_messages, evaluators"
USER_KEYS = (
    "target, persona, goal, instructions, facts, first_message, max_turns, stop_when, seed, "
    "temperature, role_judge"
)
TOOL_KEYS = (
    "name, description, parameters, result, results, script, cwd, timeout_seconds, inherit_env"
)
CONTAINS_KEYS = "name, weight, required, threshold, type, value"


def _said(diags: list[Diagnostic]) -> list[tuple[int | None, int | None, str, str | None]]:
    return [(d.line, d.column, d.message, d.hint) for d in diags if d.severity == "error"]


def test_unknown_keys_in_every_block_of_an_eval_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "evals/keys.yaml",
        """$schema: agentv-eval-v2
user_target: sim
evalcases:
  - id: live
    outcome: greets, then says goodbye
    turns:
      - contnet: hello
        outcom: greets back
      - content: bye
  - id: simulated
    outcome: gets a refund
    user:
      persna: a customer
      goal: a refund
      max_turn: 3
  - id: tools
    outcome: uses the tool
    input_messages:
      - {role: user, content: what is the weather?}
    tools:
      - name: forecast
        resutl: sunny
    evaluators:
      - type: contains
        vaule: sunny
""",
    )
    loaded = load_eval_file(path)
    assert _said(loaded.diagnostics) == [
        (
            7,
            9,
            "case 'live': unknown key 'contnet'",
            f"did you mean 'content'? valid keys here: {TURN_KEYS}",
        ),
        (
            8,
            9,
            "case 'live': unknown key 'outcom'",
            f"did you mean 'outcome'? valid keys here: {TURN_KEYS}",
        ),
        (
            13,
            7,
            "case 'simulated': unknown key 'persna'",
            f"did you mean 'persona'? valid keys here: {USER_KEYS}",
        ),
        (
            15,
            7,
            "case 'simulated': unknown key 'max_turn'",
            f"did you mean 'max_turns'? valid keys here: {USER_KEYS}",
        ),
        (
            22,
            9,
            "case 'tools': unknown key 'resutl'",
            f"did you mean 'result'? valid keys here: {TOOL_KEYS}",
        ),
        (
            25,
            9,
            "case 'tools': unknown key 'vaule'",
            f"did you mean 'value'? valid keys here: {CONTAINS_KEYS}",
        ),
    ]


def test_a_key_close_to_none_lists_the_valid_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "evals/keys.yaml",
        """$schema: agentv-eval-v2
evalcases:
  - id: a
    outcome: x
    input_messages: [{role: user, content: hi}]
    tools:
      - name: forecast
        zzz: 1
""",
    )
    assert _said(load_eval_file(path).diagnostics) == [
        (8, 9, "case 'a': unknown key 'zzz'", f"valid keys here: {TOOL_KEYS}")
    ]


def test_a_simulated_user_or_turns_need_no_input_messages(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "evals/open.yaml",
        """$schema: agentv-eval-v2
user_target: sim
evalcases:
  - id: simulated
    outcome: gets a refund
    user: {persona: a customer, goal: a refund}
  - id: live
    outcome: greets back
    turns:
      - {content: hello, outcome: greets back}
  - id: neither
    outcome: x
""",
    )
    loaded = load_eval_file(path)
    assert [c.id for c in loaded.cases] == ["simulated", "live"]
    assert [c.input_messages for c in loaded.cases] == [(), ()]
    assert _said(loaded.diagnostics) == [
        (
            11,
            5,
            "case 'neither': missing required key `input_messages`",
            "add `input_messages:` with at least one `- role: user` turn (or `turns:` for a "
            "live conversation, `user:` for a simulated user)",
        )
    ]


def test_a_misspelt_input_messages_is_one_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "evals/typo.yaml",
        """$schema: agentv-eval-v2
evalcases:
  - id: a
    outcome: x
    input_mesages: [{role: user, content: hi}]
""",
    )
    (diag,) = load_eval_file(path).diagnostics
    assert (diag.line, diag.message) == (5, "case 'a': unknown key 'input_mesages'")
    assert diag.hint is not None and diag.hint.startswith("did you mean 'input_messages'? ")


def test_unknown_keys_in_a_targets_file_one_error_each(tmp_path: Path) -> None:
    common = "name, provider, judge_target, workers, provider_batching, price"
    path = write(
        tmp_path,
        "targets.yaml",
        """$schema: agentv-targets-v2.2
targets:
  - name: quiet
    provider: mock
    respnse: hi
  - name: shell
    provider: cli
    command_templat: echo {PROMPT}
  - name: probed
    provider: cli
    command_template: echo {PROMPT}
    healthcheck: {type: http, url: "http://127.0.0.1:1", timout_seconds: 3}
  - name: priced
    provider: mock
    price: {input_per_mtk: 1, output_per_mtok: 2}
""",
    )
    assert _said(validate_targets_file(path)) == [
        (
            5,
            5,
            "target 'quiet': unknown setting 'respnse' for mock targets",
            "did you mean 'response'? valid keys here: response, responses, seed, answers, delay_ms, "
            "delay_min_ms, "
            f"delay_max_ms, system_prompt, report_usage, {common}",
        ),
        (
            8,
            5,
            "target 'shell': unknown setting 'command_templat' for cli targets",
            "did you mean 'command_template'? valid keys here: command_template, files_format, "
            "cwd, env, inherit_env, timeout_seconds, max_output_bytes, healthcheck, "
            f"{common}",
        ),
        (
            12,
            58,
            "target 'probed': unknown key 'timout_seconds' in `healthcheck`",
            "did you mean 'timeout_seconds'? valid keys here: type, url, timeout_seconds",
        ),
        (
            15,
            13,
            "target 'priced': unknown price 'input_per_mtk'",
            "did you mean 'input_per_mtok'? valid keys here: input_per_mtok, output_per_mtok, "
            "cached_input_per_mtok",
        ),
    ]


def test_an_unknown_config_key_is_a_warning_with_the_same_hint(tmp_path: Path) -> None:
    path = write(tmp_path, ".agentv/config.yaml", "$schema: agentv-config-v2\npass_treshold: 0.5\n")
    config, diags = parse_config(path)
    assert config is not None and config.pass_threshold is None  # the key is ignored
    assert [(d.line, d.column, d.message, d.hint, d.severity) for d in diags] == [
        (
            2,
            1,
            "unknown key 'pass_treshold' in config (ignored)",
            "did you mean 'pass_threshold'? valid keys here: $schema, guideline_patterns, "
            "pass_threshold, user_target, run_store, register_runs",
            "warning",
        )
    ]


def test_rows_keys_are_checked_even_when_the_template_is_missing(tmp_path: Path) -> None:
    path = write(tmp_path, "evals/rows.yaml", "$schema: agentv-eval-v2\nrows:\n  pth: x.csv\n")
    write(tmp_path, "evals/x.csv", "q\nhi\n")
    diags = _said(load_eval_file_diags(path))
    assert diags == [
        (
            3,
            3,
            "unknown key 'pth'",
            "did you mean 'path'? valid keys here: path, format, hf, config, split, revision, "
            "id, limit, sample, filter",
        ),
        (
            2,
            1,
            "`template` is missing: the case each row fills",
            "add `template:` with `outcome`, `input_messages` and `evaluators`, using "
            "{{ column }} placeholders",
        ),
    ]


def load_eval_file_diags(path: Path) -> list[Diagnostic]:
    from agentv.errors import InputError

    try:
        return load_eval_file(path).diagnostics
    except InputError as exc:
        return exc.diagnostics
