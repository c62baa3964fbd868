"""`agentv render`: JSON for tools, a readable view for people, targets, bad input."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from support.cli import invoke_cli
from support.files import write
from support.paths import EXAMPLES

EXAMPLE_FILES = sorted(str(p) for p in EXAMPLES.glob("*.yaml"))
GOOD = """$schema: agentv-eval-v2
evalcases:
  - id: hello
    outcome: Greets back.
    input_messages:
      - role: user
        content: Hello
  - id: review
    outcome: Reviews.
    input_messages:
      - role: user
        content:
          - {type: text, value: Review}
          - {type: file, value: code.py}
      - role: assistant
        content: Which part?
      - role: user
        content: All of it.
"""


def render_json(*args: str) -> list[dict[str, Any]]:
    """``agentv render ARGS --format json``, parsed (it must succeed)."""
    result = invoke_cli("render", *args, "--format", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_examples_render_with_every_field() -> None:
    cases = {c["eval_id"]: c for c in render_json(*EXAMPLE_FILES)}
    assert set(cases) >= {
        "review-inventory",
        "debug-missing-email",
        "brainstorm-cli-names",
        "umbrella-from-forecast",
    }
    for case in cases.values():
        for key in ("question", "guidelines", "sent_messages"):
            assert key in case
        for path in case["guideline_paths"] + case["input_files"]:
            assert Path(path).is_absolute() and Path(path).is_file()
        assert case["sent_messages"][0]["role"] == "system"
    review = cases["review-inventory"]
    assert review["guideline_paths"] == [str(EXAMPLES / "guidelines/python.instructions.md")]
    assert review["input_files"] == [str(EXAMPLES / "code/inventory.py")]
    assert review["sent_messages"][0]["content"].startswith(
        "You are a careful assistant.\n\n[[ ## Guidelines ## ]]\n\n# Python review guidelines"
    )
    tool_case = cases["umbrella-from-forecast"]["sent_messages"]
    assert tool_case[2]["tool_calls"] == [
        {
            "id": "call_forecast_1",
            "name": "get_forecast",
            "arguments": {"city": "Oslo", "day": "tomorrow"},
        }
    ]
    assert tool_case[3]["role"] == "tool" and tool_case[3]["tool_call_id"] == "call_forecast_1"


def test_text_view_marks_roles_files_and_guidelines() -> None:
    result = invoke_cli(
        "render", str(EXAMPLES / "code-review.yaml"), str(EXAMPLES / "tool-use.yaml")
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    for expected in (
        "review-inventory",
        " SYSTEM ",
        " USER ",
        "[[ ## Guidelines ## ]]",
        "guideline: ",
        "python.instructions.md",
        "file: ",
        "=== code/inventory.py ===",
        "<Attached: guidelines/python.instructions.md>",
        "Question (lm mode)",
        '<file path="code/inventory.py">',
        " ASSISTANT ",
        'calls get_forecast({"city": "Oslo", "day": "tomorrow"})  id call_forecast_1',
        " TOOL   result of call call_forecast_1",
        "@[Tool]:",
        # without --target, each form is said for whom it is
        "Messages (what a model API target gets)",
        "what a target gets depends on its kind: `--target NAME` shows that target's own request",
    ):
        assert expected in out
    assert "LM API" not in out


def test_eval_id_and_mode(repo: Path) -> None:
    write(repo, "code.py", "x = 1\n")
    path = str(write(repo, "e.yaml", GOOD))
    (case,) = render_json(path, "--eval-id", "review", "--mode", "agent")
    assert case["eval_id"] == "review" and case["mode"] == "agent"
    assert case["question"] == (
        '@[User]:\nReview\n<file: path="code.py">\n\n@[Assistant]:\nWhich part?\n\n@[User]:\nAll of it.'
    )
    # the messages do not depend on the mode
    assert case["sent_messages"][1] == {"role": "user", "content": "Review\n=== code.py ===\nx = 1"}


def test_unknown_eval_id_is_an_error(repo: Path) -> None:
    write(repo, "code.py", "x = 1\n")
    result = invoke_cli(
        "render", str(write(repo, "e.yaml", GOOD)), "--eval-id", "nope", "--format", "json"
    )
    assert result.exit_code == 1
    assert "error: no case with id 'nope' in" in result.stderr
    assert json.loads(result.stdout) == []


def test_bad_case_skipped_and_broken_file_fails_alone(repo: Path) -> None:
    write(repo, "code.py", "x = 1\n")
    good = write(repo, "good.yaml", GOOD)
    mixed = write(
        repo,
        "mixed.yaml",
        GOOD.replace("role: assistant", "role: asistant"),
    )
    broken = write(repo, "broken.yaml", "$schema: agentv-eval-v2\nevalcases: [\n")
    result = invoke_cli("render", str(broken), str(mixed), str(good), "--format", "json")
    assert result.exit_code == 1  # broken.yaml failed entirely
    ids = [c["eval_id"] for c in json.loads(result.stdout)]
    assert ids == ["hello", "hello", "review"]  # mixed.yaml's good case still renders
    assert "broken.yaml:3:1: error: invalid YAML" in result.stderr
    assert "error: broken.yaml: cannot be used, nothing rendered from it" in result.stderr
    assert "mixed.yaml:15:15: error: case 'review': invalid role 'asistant'" in result.stderr
    assert "warning: mixed.yaml: skipped 1 of 2 case(s) with errors" in result.stderr


def test_missing_eval_file(repo: Path) -> None:
    result = invoke_cli("render", "nope.yaml")
    assert result.exit_code == 1
    assert "nope.yaml: error: file not found" in result.stderr


def test_allow_outside_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path, "shared/notes.txt", "outside text")
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    monkeypatch.chdir(repo)
    path = write(
        repo,
        "e.yaml",
        """$schema: agentv-eval-v2
evalcases:
  - id: outside
    outcome: ok
    input_messages:
      - role: user
        content: [{type: file, value: ../shared/notes.txt}]
""",
    )
    refused = invoke_cli("render", str(path), "--format", "json")
    assert refused.exit_code == 1
    assert "resolves outside the repository root" in refused.stderr
    assert json.loads(refused.stdout) == []
    (case,) = render_json(str(path), "--allow-outside-root")
    assert case["input_files"] == [str((tmp_path / "shared/notes.txt").resolve())]


# --- with a target ----------------------------------------------------------------------------

TARGETS = """$schema: agentv-targets-v2.2
targets:
  - name: terse
    provider: mock
    system_prompt: Default prompt
  - name: api
    provider: openai
    api_key: sk-render-secret-0123456789
    model: gpt-test
  - name: agent
    provider: codex
"""
EXPLICIT_SYSTEM = """$schema: agentv-eval-v2
evalcases:
  - id: explicit
    outcome: ok
    input_messages:
      - role: system
        content:
          - {type: text, value: Custom system context}
          - {type: file, value: concise.instructions.md}
      - role: user
        content: Hello
  - id: plain
    outcome: ok
    input_messages:
      - role: user
        content:
          - {type: text, value: Hello}
          - {type: file, value: code.py}
"""


@pytest.fixture
def targets_repo(repo: Path) -> Path:
    write(repo, ".agentv/targets.yaml", TARGETS)
    write(repo, "evals/concise.instructions.md", "Be concise\n")
    write(repo, "evals/code.py", "x = 1\n")
    write(repo, "evals/e.yaml", EXPLICIT_SYSTEM)
    return repo


def test_target_system_prompt_and_request(targets_repo: Path) -> None:
    explicit, plain = render_json(str(targets_repo / "evals/e.yaml"), "--target", "terse")
    # "Explicit system message in input" (docs/prompt-rules.md section 9): the system message replaces the
    # configured prompt ("Default prompt"); the guidelines follow it
    assert explicit["sent_messages"] == [
        {
            "role": "system",
            "content": "Custom system context\n\n[[ ## Guidelines ## ]]\n\nBe concise",
        },
        {"role": "user", "content": "Hello"},
    ]
    assert explicit["target"] == "terse" and explicit["provider"] == "mock"
    assert explicit["request"] == {"messages": explicit["sent_messages"]}
    # without a system message the configured prompt is used
    assert plain["sent_messages"][0] == {"role": "system", "content": "Default prompt"}
    assert plain["request"]["messages"] == plain["sent_messages"]


def test_target_request_never_shows_the_api_key(targets_repo: Path) -> None:
    result = invoke_cli(
        "render", str(targets_repo / "evals/e.yaml"), "--target", "api", "--format", "json"
    )
    assert result.exit_code == 0, result.output
    assert "sk-render-secret" not in result.output
    (explicit, _plain) = json.loads(result.stdout)
    assert explicit["provider"] == "openai"
    assert explicit["request"]  # the provider's own payload


def test_agent_target_gets_the_agent_mode_question(targets_repo: Path) -> None:
    _explicit, plain = render_json(str(targets_repo / "evals/e.yaml"), "--target", "agent")
    assert plain["mode"] == "agent"
    assert plain["question"] == 'Hello\n<file: path="code.py">'
    # --mode changes the question shown, not what the target would be sent
    _explicit, shown = render_json(
        str(targets_repo / "evals/e.yaml"), "--target", "agent", "--mode", "lm"
    )
    assert shown["question"] == 'Hello\n<file path="code.py">\nx = 1\n</file>'
    assert shown["request"] == plain["request"]


def test_unknown_target_is_an_error(targets_repo: Path) -> None:
    result = invoke_cli(
        "render", str(targets_repo / "evals/e.yaml"), "--target", "nope", "--format", "json"
    )
    assert result.exit_code == 1
    assert "target 'nope' not found" in result.stderr
    assert "terse" in result.stderr  # the available names are listed


def test_explicit_targets_file(repo: Path) -> None:
    write(repo, "config/my-targets.yaml", TARGETS)
    write(repo, "code.py", "x = 1\n")
    path = write(repo, "e.yaml", GOOD)
    cases = render_json(
        str(path), "--target", "terse", "--targets", str(repo / "config/my-targets.yaml")
    )
    assert {c["target"] for c in cases} == {"terse"}


def test_text_view_with_targets(targets_repo: Path) -> None:
    path = str(targets_repo / "evals/e.yaml")
    lm = invoke_cli("render", path, "--target", "terse", "--eval-id", "plain")
    assert lm.exit_code == 0, lm.output
    assert "target: terse (mock)" in lm.stdout
    assert "Messages sent to target terse" in lm.stdout
    assert "as sent to mock: the messages as `messages`" in lm.stdout
    assert lm.stdout.count("Default prompt") == 1
    assert "not sent to this target" in lm.stdout  # the question, said in one line
    agent = invoke_cli("render", path, "--target", "agent", "--eval-id", "plain")
    assert agent.exit_code == 0, agent.output
    assert "Request for target agent (what its program gets)" in agent.stdout
    assert "[[ ## user_query ## ]]" in agent.stdout  # the prompt document, as text
    assert agent.stdout.count('<file: path="code.py">') == 1  # the question, once
    assert "Messages sent" not in agent.stdout  # an agent gets no message list
    # another rendering of the question than the target's is shown when asked for
    asked = invoke_cli("render", path, "--target", "agent", "--eval-id", "plain", "--mode", "lm")
    assert "Question (lm mode)" in asked.stdout


VENDOR_TARGETS = """$schema: agentv-targets-v2.2
targets:
  - name: oa
    provider: openai
    api_key: sk-render-secret-0123456789
    model: gpt-test
    temperature: 0.5
  - name: an
    provider: anthropic
    api_key: sk-render-secret-0123456789
    model: claude-test
  - name: ge
    provider: gemini
    api_key: render-secret-0123456789
    model: gemini-test
  - name: tool
    provider: cli
    command_template: agent {PROMPT} --chat {CHAT_PROMPT_FILE}
"""
MULTI_TURN = """$schema: agentv-eval-v2
evalcases:
  - id: turns
    outcome: ok
    input_messages:
      - role: system
        content: System-content-alpha
      - role: user
        content: User-content-bravo
      - role: assistant
        content: Assistant-content-charlie
      - role: user
        content: User-content-delta
      - role: user
        content: User-content-echo
"""


@pytest.mark.parametrize(
    ("target", "note"),
    [
        ("oa", "as sent to openai: the messages as `messages`"),
        (
            "an",
            "as sent to anthropic: the system message as the top-level `system` field; the "
            "other messages as 3 `messages` turn(s) (consecutive turns of one role merged)",
        ),
        (
            "ge",
            "as sent to gemini: the system message as `systemInstruction`; the other messages "
            "as 3 `contents` turn(s) (consecutive turns of one role merged); the assistant as "
            "role `model`",
        ),
    ],
)
def test_lm_target_text_view_shows_each_message_once(repo: Path, target: str, note: str) -> None:
    write(repo, ".agentv/targets.yaml", VENDOR_TARGETS)
    path = str(write(repo, "e.yaml", MULTI_TURN))
    result = invoke_cli("render", path, "--target", target)
    assert result.exit_code == 0, result.output
    out = result.stdout
    for content in ("alpha", "bravo", "charlie", "delta", "echo"):
        assert out.count(content) == 1, (content, out)
    assert note in out
    assert "sk-render-secret" not in out and "render-secret" not in out
    # the payload's other fields, as JSON that parses once copied
    block = out.split("The request's other fields\n", 1)[1].split("\n\n", 1)[0]
    assert json.loads(block)["model"].endswith("-test")


LONG_WORD = "x" * 300
LONG_TEXT = " ".join(["word"] * 60) + " end"


def test_text_view_never_hard_wraps(repo: Path) -> None:
    write(repo, ".agentv/targets.yaml", VENDOR_TARGETS)
    path = str(
        write(
            repo,
            "e.yaml",
            MULTI_TURN.replace("System-content-alpha", LONG_WORD).replace(
                "User-content-bravo", f'"{LONG_TEXT}"'
            ),
        )
    )
    for target in ("oa", "tool", None):
        args = [path] + (["--target", target] if target else [])
        result = invoke_cli("render", *args, env={"COLUMNS": "60"})
        assert result.exit_code == 0, result.output
        lines = result.stdout.splitlines()
        assert any(LONG_WORD in line for line in lines), target
        assert any(LONG_TEXT in line for line in lines), target
    # the cli target's chat prompt: a JSON block that parses as printed
    out = invoke_cli("render", path, "--target", "tool", env={"COLUMNS": "60"}).stdout
    block = out.split("other fields:\n", 1)[1].split("\n\n", 1)[0]
    chat = json.loads(block)["chat_prompt"]
    assert chat[0]["content"] == LONG_WORD and chat[1]["content"] == LONG_TEXT
    assert out.count(LONG_TEXT) == 2  # the command's question and the chat file


def test_json_format_with_targets_parses(repo: Path) -> None:
    write(repo, ".agentv/targets.yaml", VENDOR_TARGETS)
    path = str(write(repo, "e.yaml", MULTI_TURN.replace("User-content-echo", LONG_TEXT)))
    for target in ("oa", "an", "ge", "tool"):
        result = invoke_cli(
            "render", path, "--target", target, "--format", "json", env={"COLUMNS": "40"}
        )
        assert result.exit_code == 0, result.output
        (case,) = json.loads(result.stdout)
        assert list(case) == [
            "eval_id",
            "eval_file",
            "dataset",
            "mode",
            "outcome",
            "question",
            "guidelines",
            "guideline_paths",
            "input_files",
            "sent_messages",
            "reference_answer",
            "evaluators",
            "target",
            "provider",
            "target_mode",
            "request",
        ]


UNSET_TARGETS = """$schema: agentv-targets-v2.2
targets:
  - name: api
    provider: openai
    model: ${{ RENDER_MODEL }}
    api_key: ${{ OPENAI_API_KEY }}
    temperature: ${{ RENDER_TEMPERATURE }}
  - name: tool
    provider: cli
    command_template: run --token ${{ RENDER_SERVICE_TOKEN }} --host ${{ RENDER_HOST }} {PROMPT}
    env: {API_TOKEN: "${{ RENDER_API_TOKEN }}"}
  - name: implicit_key  # would use ANTHROPIC_API_KEY, which is not set either
    provider: anthropic
    model: claude-test
"""


def test_target_renders_without_its_variables_set(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("RENDER_MODEL", "RENDER_TEMPERATURE", "RENDER_HOST", "RENDER_API_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    write(repo, ".agentv/targets.yaml", UNSET_TARGETS)
    # a secret in .env is used as `agentv eval` would use it, and never shown
    write(repo, ".env", "RENDER_SERVICE_TOKEN=tok-from-dotenv-0123456789\n")
    path = str(write(repo, "e.yaml", GOOD.split("  - id: review")[0]))

    api = invoke_cli("render", path, "--target", "api", "--format", "json")
    assert api.exit_code == 0, api.output
    (case,) = json.loads(api.stdout)
    assert case["request"]["model"] == "<unset:RENDER_MODEL>"
    assert "temperature" not in case["request"]  # not a number yet: default
    for var in ("RENDER_MODEL", "OPENAI_API_KEY", "RENDER_TEMPERATURE"):
        assert f"warning: target 'api' uses {var}, which is not set; " in api.stderr
    assert "(`agentv eval` needs it set)" in api.stderr

    tool = invoke_cli("render", path, "--target", "tool", "--format", "json")
    assert tool.exit_code == 0, tool.output
    (case,) = json.loads(tool.stdout)
    assert case["request"]["command"] == "run --token *** --host <unset:RENDER_HOST> Hello"
    assert case["request"]["cwd"] == str(repo.resolve())  # where `agentv eval` would run it
    assert "tok-from-dotenv" not in tool.output
    assert "RENDER_SERVICE_TOKEN" not in tool.stderr  # it is set (in .env)
    assert "uses RENDER_API_TOKEN, which is not set" in tool.stderr
    assert "RENDER_SERVICE_TOKEN" not in os.environ  # .env only read, not loaded

    implicit = invoke_cli("render", path, "--target", "implicit_key", "--format", "json")
    assert implicit.exit_code == 0, implicit.output
    assert json.loads(implicit.stdout)[0]["request"]["model"] == "claude-test"


def test_eval_still_needs_the_variables(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RENDER_ANSWER", raising=False)
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n"
        "  - name: m\n    provider: mock\n    response: ${{ RENDER_ANSWER }}\n",
    )
    path = str(write(repo, "e.yaml", GOOD.split("  - id: review")[0]))
    assert render_json(path, "--target", "m")[0]["target"] == "m"
    result = invoke_cli("eval", path, "--target", "m")
    assert result.exit_code != 0
    assert "field 'response' uses environment variable RENDER_ANSWER, which is not set" in (
        result.stderr
    )


@pytest.mark.slow  # git makes the repository and answers for its commit
def test_a_case_with_a_workspace_says_what_each_run_starts_from(repo: Path) -> None:
    from support.gitrepo import commit, git

    commit(repo / "app", {"a.py": "x = 1\n"})
    git(repo / "app", "tag", "v1")
    write(repo, "evals/tpl/README.md", "task\n")
    path = write(
        repo,
        "evals/ws.yaml",
        """$schema: agentv-eval-v2
workspace:
  template: tpl
  repos: [{path: src, repo: ../app, commit: v1}]
  isolation: bwrap
evalcases:
  - id: fix
    outcome: fixed
    input_messages: [{role: user, content: fix it}]
""",
    )
    (view,) = render_json(str(path))
    assert view["workspace"] == {
        "mode": "temp",
        "template": str(repo / "evals" / "tpl"),
        "repos": [{"path": "src", "repo": str(repo / "app"), "commit": "v1", "sparse": []}],
        "path": None,
        "hooks": {},
        "isolation": {"kind": "bwrap", "network": False, "image": None, "writable": []},
    }
    shown = invoke_cli("render", str(path)).stdout
    assert (
        f"workspace: temp: {repo / 'app'}@v1 in src, template {repo / 'evals' / 'tpl'}, "
        "isolation bwrap (made for each run)"
    ) in " ".join(shown.split())
