"""Tool scripts under hostile conditions (docs/reliability.md): what a script inherits of
the run's environment, and what it leaves running. Each through the real command line, a
real script and the loopback fake server."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from support.agents import pid_alive, wait_gone
from support.cli import agentv_cli
from support.fakes import FakeLLMServer, RecordedRequest, ToolCalls
from support.files import write
from support.results import rows
from support.targets import openai_target, write_targets

#: every test here starts agentv (or a script) as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

KEY = "sk-live-tool-5e1f9a7c"
OTHER = "sk-ant-tool-0b4d2c9e"


def _target(server: FakeLLMServer) -> dict[str, object]:
    """The server's target, its key read from the run's environment."""
    key = "${{ OPENAI_API_KEY }}"
    return openai_target(server.url, model="gpt-test", api_key=key, retry_initial_delay_ms=1)


ENV_CASE = """\
$schema: agentv-eval-v2
evalcases:
  - id: env
    outcome: Reports what the tool saw.
    input_messages:
      - role: user
        content: What does the tool see?
    tools:
      - name: peek
        description: Shows the variables it inherited
        script: {python} peek.py
{extra}    evaluators: [{{type: contains, value: seen}}]
"""

PEEK = """\
import json, os
names = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PLAIN_SETTING")
print(json.dumps({name: os.environ.get(name, "absent") for name in names}, sort_keys=True))
"""


def _tool_results(rec: RecordedRequest) -> list[str]:
    return [m["content"] for m in (rec.body or {}).get("messages", []) if m["role"] == "tool"]


def _peek_reply(rec: RecordedRequest) -> str | ToolCalls:
    results = _tool_results(rec)
    if not results:
        return ToolCalls((("peek", {}),))
    return "seen: " + results[0]


def _run_peek(repo: Path, extra: str = "") -> tuple[dict[str, str], dict]:
    with FakeLLMServer(reply=_peek_reply) as server:
        write_targets(repo, _target(server))
        write(repo, "evals/peek.py", PEEK)
        write(repo, "evals/env.yaml", ENV_CASE.format(python=sys.executable, extra=extra))
        done = agentv_cli(
            repo,
            "eval",
            "evals/env.yaml",
            "--out",
            "out.jsonl",
            env={"OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": OTHER, "PLAIN_SETTING": "kept"},
        )
        assert done.returncode == 0, done.stdout + done.stderr
        # what went back to the model, as the wire carried it
        (said,) = _tool_results(server.requests[-1])
    (record,) = rows(repo / "out.jsonl")
    return json.loads(said), record


def test_a_tool_script_does_not_inherit_the_vendors_keys(repo: Path) -> None:
    seen, record = _run_peek(repo)
    assert seen == {
        "ANTHROPIC_API_KEY": "absent",
        "OPENAI_API_KEY": "absent",
        "PLAIN_SETTING": "kept",
    }
    assert record["status"] == "ok"
    assert KEY not in json.dumps(record) and OTHER not in json.dumps(record)


def test_a_tool_script_gets_a_key_it_names(repo: Path) -> None:
    seen, record = _run_peek(repo, "        inherit_env: [OPENAI_API_KEY]\n")
    # an allow-list: the key named exactly, nothing else but what programs need to start
    assert seen == {
        "ANTHROPIC_API_KEY": "absent",
        "OPENAI_API_KEY": KEY,
        "PLAIN_SETTING": "absent",
    }
    # the record masks what the run knows to be a secret
    assert KEY not in json.dumps(record)


# A tool script that starts a sleeper which leaves its session (setsid) and drops the
# call's tag, writes the sleeper's pid, and answers at once: nothing it started may
# outlive its call, whatever the sleeper did to hide.
HIDER = """\
import os, subprocess, sys
env = {k: v for k, v in os.environ.items() if k != "AGENTV_PROCESS_TAG"}
sleep = [sys.executable, "-c", "import time; time.sleep(300)"]
hidden = subprocess.Popen(sleep, start_new_session=True, env=env)
with open(sys.argv[1], "w") as fh:
    fh.write(str(hidden.pid))
print("hidden")
"""

HIDE_CASE = """\
$schema: agentv-eval-v2
evalcases:
  - id: hide
    outcome: Calls the tool.
    input_messages:
      - role: user
        content: Call the tool.
    tools:
      - name: hide
        description: Starts a process that hides
        script: {python} hider.py {pid_file}
    evaluators: [{{type: contains, value: hidden}}]
"""


def _hide_reply(rec: RecordedRequest) -> str | ToolCalls:
    results = _tool_results(rec)
    return ToolCalls((("hide", {}),)) if not results else "the tool said " + results[0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc")
def test_a_process_that_left_its_session_and_dropped_its_tag_dies_with_its_call(
    repo: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "hidden.pid"
    with FakeLLMServer(reply=_hide_reply) as server:
        write_targets(repo, _target(server))
        write(repo, "evals/hider.py", HIDER)
        write(
            repo,
            "evals/hide.yaml",
            HIDE_CASE.format(python=sys.executable, pid_file=pid_file),
        )
        done = agentv_cli(
            repo, "eval", "evals/hide.yaml", "--out", "out.jsonl", env={"OPENAI_API_KEY": KEY}
        )
    pid = int(pid_file.read_text())
    try:
        assert done.returncode == 0, done.stdout + done.stderr
        assert rows(repo / "out.jsonl")[0]["status"] == "ok"
        assert wait_gone(pid), "the hidden process outlived its tool call"
    finally:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
