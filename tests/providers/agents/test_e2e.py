"""`agentv eval` end to end on agent targets: a CLI agent and (fake) Codex, graded by code."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

import agentv as agentv_api
from support.agents import FAKE_CODEX, install_script
from support.cli import agentv_cli
from support.files import write

#: every test here runs agentv and its agents as processes: left out of `make test-fast`
pytestmark = pytest.mark.slow

PY = shlex.quote(sys.executable)

# A command-line agent: reads the chat prompt file, answers into the output file.
AGENT = """\
import json, sys
prompt, chat_file, output_file, *files = sys.argv[1:]
roles = [m["role"] for m in json.load(open(chat_file))]
with open(output_file, "w") as fh:
    fh.write("The answer is 42. roles=%s files=%d" % (",".join(roles), len(files)))
"""

CHECK = """\
import json, sys
payload = json.load(sys.stdin)
ok = "42" in payload["candidate_answer"]
print(json.dumps({"score": 1.0 if ok else 0.0,
                  "hits": ["says 42"] if ok else [],
                  "misses": [] if ok else ["no 42"],
                  "reasoning": "markers=%d" % payload["question"].count("@[")}))
"""


@pytest.fixture
def suite(repo: Path, bin_dir: Path) -> Path:
    install_script(bin_dir, "codex", FAKE_CODEX)
    write(repo, "agent.py", AGENT)
    write(
        repo,
        ".agentv/targets.yaml",
        f"""$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: cli
    command_template: {PY} agent.py {{PROMPT}} {{CHAT_PROMPT_FILE}} {{OUTPUT_FILE}} {{FILES}}
    cwd: {repo}
    timeout_seconds: 60
    healthcheck:
      type: command
      command_template: {PY} -c "print('ready')"
  - name: no-cwd
    provider: cli
    command_template: {PY} agent.py {{PROMPT}} {{CHAT_PROMPT_FILE}} {{OUTPUT_FILE}} {{FILES}}
    timeout_seconds: 60
  - name: codex
    provider: codex
    args: [--model, fake-model]
    timeout_seconds: 60
  - name: unhealthy
    provider: cli
    command_template: echo 42
    healthcheck:
      type: command
      command_template: echo 'agent service is down' >&2; exit 2
""",
    )
    write(repo, "evals/guides/debug.instructions.md", "Answer in one paragraph.\n")
    write(repo, "evals/src/app.py", "def handler(event):\n    return event['user']\n")
    write(repo, "evals/check.py", CHECK)
    return write(
        repo,
        "evals/agents.yaml",
        """$schema: agentv-eval-v2
evalcases:
  - id: debug
    outcome: Gives the answer 42.
    input_messages:
      - role: system
        content: You are a debugging assistant.
      - role: user
        content:
          - type: text
            value: My handler crashes.
          - type: file
            value: guides/debug.instructions.md
          - type: file
            value: src/app.py
      - role: assistant
        content: What error do you see?
      - role: user
        content: A KeyError. Reply with the number 42.
    execution:
      evaluators:
        - name: check
          type: code
          script: python3 check.py
""",
    )


def only_row(path: Path) -> dict:
    (row,) = [json.loads(line) for line in path.read_text().splitlines()]
    return row


def test_cli_agent_target(repo: Path, suite: Path) -> None:
    proc = agentv_cli(repo, "eval", "evals/agents.yaml", "--out", "cli.jsonl")
    assert proc.returncode == 0, proc.stderr
    row = only_row(repo / "cli.jsonl")
    assert "error" not in row, row
    assert row["score"] == 1.0
    # the agent got the conversation with its roles, and both files
    assert row["candidate_answer"] == ("The answer is 42. roles=system,user,assistant,user files=2")
    assert row["evaluator_results"][0]["reasoning"] == "markers=4"
    raw = row["raw_request"]
    assert '<file path="src/app.py">' in raw["question"]  # LM mode: the file's text inline
    assert raw["command"].startswith(f"{PY} agent.py ")
    assert [m["role"] for m in raw["chat_prompt"]] == ["system", "user", "assistant", "user"]
    assert not list(Path(raw["output_file"]).parent.glob("*"))


def test_codex_agent_target(repo: Path, suite: Path) -> None:
    record = {"FAKE_CODEX_RECORD": str(repo / "codex-calls.jsonl")}
    proc = agentv_cli(
        repo, "eval", "evals/agents.yaml", "--target", "codex", "--out", "codex.jsonl", env=record
    )
    assert proc.returncode == 0, proc.stderr
    row = only_row(repo / "codex.jsonl")
    assert "error" not in row, row
    assert row["score"] == 1.0
    raw = row["raw_request"]
    question = raw["question"]
    assert '<file: path="src/app.py">' in question  # agent mode: the agent reads the file
    assert row["candidate_answer"] == f"ANSWER: {question}"
    assert raw["argv"][-3:] == ["--model", "fake-model", "-"]
    guideline = repo / "evals/guides/debug.instructions.md"
    assert raw["prompt"].startswith(
        f"Read all guideline files:\n* [debug.instructions.md]({guideline.as_uri()}).\n"
    )
    (call,) = [json.loads(line) for line in (repo / "codex-calls.jsonl").read_text().splitlines()]
    assert call["prompt"] == raw["prompt"]
    assert not Path(call["cwd"]).exists()
    logs = list((repo / ".agentv/logs/codex").glob("*_codex_debug_attempt-1_*.log"))
    assert len(logs) == 1
    assert f"Codex CLI logs:\n  1. {logs[0]}\n" in proc.stdout


def test_codex_logs_go_under_the_runs_folder_and_are_listed(
    repo: Path, suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run_eval(cwd=...)`` from another working directory: the default log folder is the
    run's, as for ``agentv eval`` run there, and the run lists the log it wrote."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("FAKE_CODEX_RECORD", str(repo / "codex-calls.jsonl"))

    run = agentv_api.run_eval("evals/agents.yaml", target="codex", cwd=repo)

    assert [r.status for r in run.results] == ["ok"]
    (log,) = run.artifacts["Codex CLI logs"]
    assert log.parent == repo / ".agentv" / "logs" / "codex"
    assert log.read_text().startswith("# Codex CLI stream log")
    assert not (elsewhere / ".agentv").exists()


def test_a_cli_target_without_cwd_runs_in_the_runs_folder(
    repo: Path, suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ``agentv eval`` run in the project runs ``agent.py`` there, so does
    ``run_eval(cwd=project)`` called from anywhere else."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)

    run = agentv_api.run_eval("evals/agents.yaml", target="no-cwd", cwd=repo)

    (result,) = run.results
    assert result.status == "ok", result.error
    assert result.candidate_answer.startswith("The answer is 42.")
    assert result.raw_request["cwd"] == str(repo)


def test_failed_healthcheck_stops_the_run(repo: Path, suite: Path) -> None:
    proc = agentv_cli(
        repo, "eval", "evals/agents.yaml", "--target", "unhealthy", "--out", "bad.jsonl"
    )
    assert proc.returncode == 1
    output = proc.stdout + proc.stderr
    assert "CLI healthcheck failed for 'unhealthy'" in output
    assert "agent service is down" in output
    assert "Traceback" not in output
    results = repo / "bad.jsonl"
    assert not results.exists() or not results.read_text().strip()
