"""targets.yaml: discovery, parsing, ${{ VAR }} substitution, validation messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentv.errors import ConfigError, InputError
from agentv.providers.anthropic import AnthropicProvider
from agentv.providers.gemini import GeminiProvider
from agentv.providers.mock import MockProvider
from agentv.providers.openai import AzureOpenAIProvider, OpenAIProvider
from agentv.targets import (
    TargetDefinition,
    create_provider,
    discover_targets_file,
    load_targets_file,
    validate_targets_file,
)
from support.files import write
from support.providers import ask

HEADER = "$schema: agentv-targets-v2.2\ntargets:\n"

# --- discovery ---------------------------------------------------------------------------------


def test_discovery_walks_up_from_the_eval_file_to_the_repo_root(repo: Path) -> None:
    root_file = write(repo, ".agentv/targets.yaml", HEADER)
    eval_file = write(repo, "evals/deep/suite.yaml", "")
    assert discover_targets_file(eval_file, repo, repo) == root_file
    nearer = write(repo, "evals/targets.yaml", HEADER)
    assert discover_targets_file(eval_file, repo, repo) == nearer


def test_discovery_prefers_the_agentv_folder_within_one_folder(repo: Path) -> None:
    write(repo, "targets.yaml", HEADER)
    agentv = write(repo, ".agentv/targets.yml", HEADER)
    assert discover_targets_file(write(repo, "e.yaml", ""), repo, repo) == agentv


def test_discovery_falls_back_to_the_working_directory(repo: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    in_cwd = write(elsewhere, "targets.yaml", HEADER)
    eval_file = write(repo, "evals/suite.yaml", "")
    assert discover_targets_file(eval_file, repo, elsewhere) == in_cwd


def test_discovery_does_not_look_above_the_repo_root(repo: Path, tmp_path: Path) -> None:
    write(tmp_path, "targets.yaml", HEADER)  # outside the repository
    eval_file = write(repo, "evals/suite.yaml", "")
    with pytest.raises(ConfigError) as info:
        discover_targets_file(eval_file, repo, repo)
    message = str(info.value)
    assert "no targets file found" in message and "--targets" in message


def test_explicit_targets_path_file_or_folder(repo: Path) -> None:
    eval_file = write(repo, "evals/suite.yaml", "")
    custom = write(repo, "config/my-targets.yaml", HEADER)
    assert discover_targets_file(eval_file, repo, repo, Path("config/my-targets.yaml")) == custom
    inside = write(repo, "team/.agentv/targets.yaml", HEADER)
    assert discover_targets_file(eval_file, repo, repo, Path("team")) == inside
    with pytest.raises(ConfigError, match=r"targets file not found: .*nope\.yaml"):
        discover_targets_file(eval_file, repo, repo, Path("nope.yaml"))


# --- a file with every provider ------------------------------------------------------------------

ALL_PROVIDERS = (
    HEADER
    + """\
  - name: gpt
    provider: openai
    model: gpt-4o-mini
    api_key: ${{ OPENAI_API_KEY }}
    judge_target: judge
    workers: 4
  - name: local
    provider: openai-compatible
    baseUrl: http://127.0.0.1:11434/v1
    model: llama3.2
  - name: az
    provider: azure-openai
    endpoint: https://${{ AZ_RESOURCE }}.openai.azure.com
    apiKey: ${{ AZURE_OPENAI_API_KEY }}
    deploymentName: gpt4o
    version: 2025-01-01-preview
    providerBatching: false
    maxRetries: 5
    retryStatusCodes: [429, 503]
  - name: claude
    provider: Anthropic
    model: claude-sonnet
    apiKey: literal-key-is-fine
    thinkingBudget: 2048
    maxOutputTokens: 8000
    systemPrompt: You are terse.
  - name: judge
    provider: google
    api_key: ${{ GEMINI_API_KEY }}
    temperature: ${{ JUDGE_TEMPERATURE }}
  - name: dry
    provider: mock
    response: '{"answer": 42}'
    delayMs: 5
"""
)

ENV = {
    "OPENAI_API_KEY": "sk-openai",
    "AZ_RESOURCE": "contoso",
    "AZURE_OPENAI_API_KEY": "az-key",
    "GEMINI_API_KEY": "gm-key",
    "JUDGE_TEMPERATURE": "0.25",
}


async def test_every_provider_kind_alias_and_spelling(repo: Path) -> None:
    path = write(repo, ".agentv/targets.yaml", ALL_PROVIDERS)
    assert validate_targets_file(path) == []
    targets = load_targets_file(path)
    kinds = {name: t.kind for name, t in targets.targets.items()}
    assert kinds == {
        "gpt": "openai",
        "local": "openai",
        "az": "azure",
        "claude": "anthropic",
        "judge": "gemini",
        "dry": "mock",
    }
    gpt = targets.get("gpt")
    assert (gpt.workers, gpt.judge_target, gpt.provider_batching) == (4, "judge", False)
    assert targets.judge_for("gpt").name == "judge"
    assert targets.judge_for("claude").name == "claude"  # no judge_target: judges itself
    assert targets.get("gpt").fields["api_key"] == "${{ OPENAI_API_KEY }}"  # not yet substituted

    providers = {name: create_provider(t, ENV) for name, t in targets.targets.items()}
    try:
        assert isinstance(providers["gpt"], OpenAIProvider)
        assert providers["gpt"].settings.api_key == "sk-openai"
        local = providers["local"]
        assert isinstance(local, OpenAIProvider)
        assert local.settings.base_url == "http://127.0.0.1:11434/v1"
        az = providers["az"]
        assert isinstance(az, AzureOpenAIProvider)
        assert az.settings.endpoint == "https://contoso.openai.azure.com"
        assert (az.settings.model, az.settings.api_version) == ("gpt4o", "2025-01-01-preview")
        assert (az.settings.max_retries, az.settings.retry_status_codes) == (5, (429, 503))
        claude = providers["claude"]
        assert isinstance(claude, AnthropicProvider)
        assert claude.settings.api_key == "literal-key-is-fine"
        assert (claude.settings.thinking_budget, claude.settings.max_output_tokens) == (2048, 8000)
        assert claude.system_prompt == "You are terse."
        judge = providers["judge"]
        assert isinstance(judge, GeminiProvider)
        assert (judge.settings.model, judge.settings.temperature) == ("gemini-2.5-flash", 0.25)
        dry = providers["dry"]
        assert isinstance(dry, MockProvider)
        assert (await dry.invoke(ask(question="q"))).text == '{"answer": 42}'
        # defaults of the retry fields (six retries; the delays are the original AgentV's)
        s = providers["gpt"].settings
        assert (s.max_retries, s.retry_initial_delay_ms, s.retry_max_delay_ms) == (6, 1000, 60000)
        assert (s.retry_backoff_factor, s.retry_status_codes) == (2, (500, 408, 429, 502, 503, 504))
    finally:
        for provider in providers.values():
            await provider.aclose()


# --- ${{ VAR }} substitution ---------------------------------------------------------------------


def _definition(**fields: object) -> TargetDefinition:
    return TargetDefinition(
        name="gpt", kind="openai", provider="openai", fields={"model": "m", **fields}
    )


def test_missing_variable_names_target_field_and_variable() -> None:
    with pytest.raises(ConfigError) as info:
        create_provider(_definition(api_key="${{ OPENAI_API_KEY }}"), env={})
    message = str(info.value)
    assert "'gpt'" in message and "'api_key'" in message and "OPENAI_API_KEY" in message
    assert "not set" in message and ".env" in message


def test_blank_variable_is_an_error_too() -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY, which is empty"):
        create_provider(_definition(api_key="${{OPENAI_API_KEY}}"), env={"OPENAI_API_KEY": "  "})


def test_variables_anywhere_inside_a_string() -> None:
    definition = _definition(
        base_url="http://${{ HOST }}:${{PORT}}/v1", api_key="k", organization="org-${{ ORG }}"
    )
    provider = create_provider(definition, env={"HOST": "127.0.0.1", "PORT": "8000", "ORG": "x"})
    assert isinstance(provider, OpenAIProvider)
    assert provider.settings.base_url == "http://127.0.0.1:8000/v1"
    assert provider.settings.organization == "org-x"


def test_variables_inside_nested_values_name_the_nested_field() -> None:
    from agentv.targets import substitute_env

    value = {"env": {"TOKEN": "${{ T }}"}, "args": ["--x", "${{ MISSING }}"]}
    with pytest.raises(ConfigError, match=r"'extra\.args\[1\]' uses environment variable MISSING"):
        substitute_env(value, {"T": "t"}, target="cli", field_name="extra")


def test_a_bad_value_from_the_environment_is_reported_without_the_value() -> None:
    definition = _definition(api_key="k", temperature="${{ TEMP }}")
    with pytest.raises(ConfigError) as info:
        create_provider(definition, env={"TEMP": "sk-secret-looking"})
    assert "temperature" in str(info.value)
    assert "sk-secret-looking" not in str(info.value)


# --- validation messages -------------------------------------------------------------------------

MANY_PROBLEMS = (
    HEADER
    + """\
  - name: a
    provider: opneai
    model: x
  - name: b
    provider: openai
    model: gpt
    api_kye: ${{ KEY }}
  - name: c
    provider: azure
    api_key: ${{ K }}
  - name: d
    provider: anthropic
    model: m
    temperature: hot
    api_key: 12345
    workers: 0
  - name: b
    provider: mock
  - name: judge
    provider: gemini
    temperature: ${{ TEMP }}
  - name: e
    provider: mock
    judge_target: jugde
  - provider: openai
  - just a string
"""
)


def _by_location(diags: list) -> dict[str, list]:
    out: dict[str, list] = {}
    for d in diags:
        out.setdefault(d.location, []).append(d)
    return out


def test_validation_reports_every_problem_with_its_line(repo: Path) -> None:
    path = write(repo, "targets.yaml", MANY_PROBLEMS)
    diags = validate_targets_file(path)
    found = _by_location(diags)

    (unknown_provider,) = found["targets[0].provider"]
    assert unknown_provider.message == (
        "target 'a': 'opneai' is not a known provider; a run that uses target 'a' will fail"
    )
    assert unknown_provider.severity == "warning"  # only a run using 'a' needs its provider
    assert unknown_provider.hint.startswith("did you mean 'openai'? valid providers: ")
    assert "azure-openai" in unknown_provider.hint and "gemini" in unknown_provider.hint
    assert (unknown_provider.line, unknown_provider.column) == (4, 15)

    (typo,) = found["targets[1].api_kye"]
    assert typo.message == "target 'b': unknown setting 'api_kye' for openai targets"
    keys = [*OpenAIProvider.Settings.model_fields, "name", "provider", "judge_target", "workers"]
    keys += ["provider_batching", "price"]
    assert typo.hint == f"did you mean 'api_key'? valid keys here: {', '.join(keys)}"
    assert (typo.line, typo.column) == (9, 5)  # the key itself

    missing = [d.message for d in found["targets[2]"]]
    assert missing == [
        "target 'c' (azure) is missing the required setting `endpoint`",
        "target 'c' (azure) is missing the required setting `model`",
    ]
    assert "deployment" in found["targets[2]"][1].hint

    d_problems = {d.location: d for d in diags if d.location.startswith("targets[3]")}
    assert d_problems["targets[3].temperature"].message.startswith(
        "target 'd': invalid `temperature`"
    )
    assert d_problems["targets[3].temperature"].line == 16
    assert "12345" not in d_problems["targets[3].api_key"].message  # values are never echoed
    assert "at least 1" in d_problems["targets[3].workers"].message

    (dup,) = found["targets[4].name"]
    assert dup.message == "duplicate target name 'b' (first used by targets[1])"

    assert not any(d.location.startswith("targets[5]") for d in diags)  # ${{ TEMP }}: later

    (judge,) = found["targets[6].judge_target"]
    assert judge.message == "target 'e': judge_target 'jugde' is not a target in this file"
    assert judge.severity == "error"
    assert judge.hint == "did you mean 'judge'?"

    assert found["targets[7].name"][0].message == "target has no `name`"
    assert found["targets[8]"][0].message == "a target must be a mapping"

    # a name used twice makes the whole file unusable: which 'b' would a run mean?
    with pytest.raises(InputError) as info:
        load_targets_file(path)
    assert info.value.diagnostics == diags
    assert f"{path}:4:15: warning: target 'a': 'opneai' is not a known provider" in str(info.value)
    assert f"{path}:19:11: error: duplicate target name 'b'" in str(info.value)


def test_file_level_problems(repo: Path) -> None:
    wrong_schema = write(repo, "a.yaml", "$schema: agentv-targets-v2\ntarget: []\n")
    messages = [(d.message, d.hint) for d in validate_targets_file(wrong_schema)]
    assert messages == [
        (
            "`$schema` is 'agentv-targets-v2', expected 'agentv-targets-v2.2'",
            "set `$schema: agentv-targets-v2.2`",
        ),
        ("unknown key 'target'", "did you mean 'targets'? valid keys here: $schema, targets"),
        (
            "`targets` is missing",
            "list the targets under `targets:`, each starting with `- name: ...`",
        ),
    ]
    broken = write(repo, "b.yaml", HEADER + "  - name: x\n    provider: [openai\n")
    (syntax,) = validate_targets_file(broken)
    assert syntax.message.startswith("invalid YAML") and syntax.line is not None
    not_a_map = write(repo, "c.yaml", "- just\n- a list\n")
    (root,) = validate_targets_file(not_a_map)
    assert "must be a YAML mapping" in root.message


def test_a_missing_judge_target_is_an_error_for_validate_and_a_run(repo: Path) -> None:
    path = write(repo, "t.yaml", HEADER + "  - name: m\n    provider: mock\n    judge_target: j\n")
    (error,) = validate_targets_file(path)
    assert (error.severity, error.line) == ("error", 5)
    assert error.message == "target 'm': judge_target 'j' is not a target in this file"
    with pytest.raises(InputError) as info:  # a run refuses the file, with the same error
        load_targets_file(path)
    assert info.value.diagnostics == [error]


def test_unknown_target_name_lists_the_available_ones(repo: Path) -> None:
    path = write(repo, "t.yaml", HEADER + "  - name: default\n    provider: mock\n")
    with pytest.raises(ConfigError) as info:
        load_targets_file(path).get("defualt")
    assert "did you mean 'default'?" in str(info.value)
    assert "available targets: default" in str(info.value)


# --- agent targets on this machine ---------------------------------------------------------------

AGENTS = (
    HEADER
    + """\
  - name: cx
    provider: codex
    cwd: work
  - name: runner
    provider: cli
    command_template: run {PROMPT}
    cwd: scripts/missing
    timeout_seconds: ${{ TIMEOUT }}
  - name: fine
    provider: cli
    command_template: run {PROMPT}
    cwd: scripts
    healthcheck: {type: command, command_template: "true", cwd: "${{ HC_DIR }}"}
  - name: later
    provider: codex
    executable: ${{ CODEX_BIN }}
    cwd: ${{ WORKDIR }}/sub
"""
)


def test_agent_targets_that_cannot_start_here_are_warnings_at_their_entry(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no `codex` anywhere
    # relative paths start from the project folder (the one holding .agentv/), not .agentv/
    (repo / "work").mkdir()
    (repo / "scripts").mkdir()
    path = write(repo, ".agentv/targets.yaml", AGENTS)

    diags = validate_targets_file(path)
    assert [d.severity for d in diags] == ["warning", "warning"]
    codex, cwd = diags
    assert (codex.location, codex.line, codex.column) == ("targets[0]", 3, 5)
    assert codex.message.startswith("target 'cx' cannot run on this machine: Codex executable")
    assert "npm install -g @openai/codex" in codex.message
    assert "set `executable` on target 'cx'" in codex.message
    assert (cwd.location, cwd.line) == ("targets[1]", 6)
    assert cwd.message == (
        "target 'runner' cannot run on this machine: working directory (`cwd`) "
        f"'{repo.resolve() / 'scripts/missing'}' does not exist"
    )
    assert cwd.hint == (
        "ignore this warning if the target runs on another machine; "
        f"relative paths in this target start from {repo.resolve()}"
    )
    assert codex.hint == cwd.hint  # `cwd: work` is relative too
    # the environment is never read, not even for the unset ${{ ... }} fields of 'later'
    monkeypatch.setenv("WORKDIR", str(tmp_path / "nowhere"))
    assert validate_targets_file(path) == diags

    # a file with only warnings still loads, and running does not need the checks
    assert set(load_targets_file(path).targets) == {"cx", "runner", "fine", "later"}
    fake = empty / "codex"
    fake.write_text("#!/bin/sh\n", "utf-8")
    fake.chmod(0o755)
    assert [d.location for d in validate_targets_file(path)] == ["targets[1]"]


# --- path settings, declared on the providers' settings classes --------------------------------


def test_path_fields_are_declared_on_the_settings_classes() -> None:
    from agentv.providers.agents.cli import CliSettings, CommandHealthcheck
    from agentv.providers.agents.codex import CodexSettings
    from agentv.providers.openai import OpenAISettings
    from agentv.targets import path_layout

    assert CliSettings.path_fields == frozenset({"cwd"})
    assert CommandHealthcheck.path_fields == frozenset({"cwd"})
    assert path_layout(CliSettings).nested["healthcheck"].keys == {"cwd"}
    # every alias of a path field is a path too
    assert path_layout(CodexSettings).keys >= {"log_dir", "logDir", "log_directory", "cwd"}
    assert not path_layout(OpenAISettings)  # no paths at all


def test_relative_paths_start_from_the_project_folder(repo: Path, tmp_path: Path) -> None:
    path = write(
        repo,
        ".agentv/targets.yaml",
        HEADER
        + """\
  - name: tool
    provider: cli
    command_template: run {PROMPT}
    cwd: scripts
    healthcheck: {type: command, command_template: "true", cwd: checks}
  - name: cx
    provider: codex
    logDirectory: ~/codex-logs
    cwd: /abs/work
""",
    )
    targets = load_targets_file(path)
    tool = create_provider(targets.get("tool"), {})
    project = repo.resolve()  # the folder holding .agentv/, not .agentv/ itself
    assert tool.settings.cwd == str(project / "scripts")
    assert tool.settings.healthcheck.cwd == str(project / "checks")
    cx = create_provider(targets.get("cx"), {})
    assert cx.settings.log_dir == str(Path("~/codex-logs").expanduser())
    assert cx.settings.cwd == "/abs/work"
    # a targets file outside .agentv/: its own folder
    elsewhere = write(tmp_path, "conf/targets.yaml", path.read_text("utf-8"))
    moved = create_provider(load_targets_file(elsewhere).get("tool"), {})
    assert moved.settings.cwd == str((tmp_path / "conf/scripts").resolve())
