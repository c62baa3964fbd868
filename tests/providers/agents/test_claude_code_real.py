"""The real Claude Code CLI (from the npm registry) against a loopback fake of Anthropic's
Messages API: the flags agentv passes are ones the CLI knows, and its stream is read as the
recorded ones are.

The pinned ``@anthropic-ai/claude-code`` is installed with npm into ``.cache/claude-code``
(git ignores it) the first time, and reused after. This test runs in ``make test`` and CI,
and never skips: when npm is missing, the install fails or the CLI does not start, it fails
with the one command that fixes it.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentv.errors import ProviderError
from agentv.providers.agents.claude_code import (
    FIXED_ARGS,
    ClaudeCodeProvider,
    ClaudeCodeSettings,
)
from agentv.system.sandbox import Sandbox
from agentv.trajectory import ToolStep
from support.npm_cli import PinnedNpmCli
from support.providers import ask

pytestmark = pytest.mark.slow  # npm, and the real CLI

#: The Claude Code release this test runs; bump it on purpose, with the test passing.
CLAUDE_VERSION = "2.1.332"
CLAUDE = PinnedNpmCli(
    "@anthropic-ai/claude-code",
    CLAUDE_VERSION,
    "claude",
    "claude-code",
    "Claude Code CLI",
    install_minutes=10,
)
API_KEY = "sk-ant-agentv-test-dummy"
ANSWER = "Fixed add() in calc.py: it now returns a + b."


@pytest.fixture(scope="module")
def real_claude() -> Path:
    """The pinned Claude Code CLI, installed once into the git-ignored cache."""
    return CLAUDE.ensure()


def _turns(workspace: Path) -> list[list[dict[str, Any]]]:
    """What the fake model answers, turn by turn: look, edit, a failing command, done."""
    return [
        [
            {"type": "text", "text": "I'll look at the code first."},
            {
                "type": "tool_use",
                "id": "toolu_01",
                "name": "Bash",
                "input": {"command": "cat calc.py", "description": "Show calc.py"},
            },
        ],
        [
            {
                "type": "tool_use",
                "id": "toolu_02",
                "name": "Edit",
                "input": {
                    "file_path": str(workspace / "calc.py"),
                    "old_string": "a - b",
                    "new_string": "a + b",
                },
            }
        ],
        [
            {
                "type": "tool_use",
                "id": "toolu_03",
                "name": "Bash",
                "input": {"command": "exit 3", "description": "Fails"},
            }
        ],
        [{"type": "text", "text": ANSWER}],
    ]


class _MessagesAPI(BaseHTTPRequestHandler):
    """Answers ``POST /v1/messages`` as a stream of server-sent events, one scripted turn
    per request that offers tools (a request without tools, a title, gets a word)."""

    protocol_version = "HTTP/1.1"
    seen: list[dict[str, Any]]
    turns: list[list[dict[str, Any]]]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or "{}")
        self.seen.append({"path": self.path, "key": self.headers.get("x-api-key"), **body})
        if not body.get("tools"):
            blocks: list[dict[str, Any]] = [{"type": "text", "text": "title"}]
        else:
            blocks = self.turns.pop(0) if len(self.turns) > 1 else self.turns[0]
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        start = {
            "id": f"msg_{len(self.seen)}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 100, "cache_read_input_tokens": 40, "output_tokens": 1},
        }
        events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
        for i, block in enumerate(blocks):
            if block["type"] == "text":
                opened = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": block["text"]}
            else:
                opened = {**block, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            events += [
                {"type": "content_block_start", "index": i, "content_block": opened},
                {"type": "content_block_delta", "index": i, "delta": delta},
                {"type": "content_block_stop", "index": i},
            ]
        events += [
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 20},
            },
            {"type": "message_stop"},
        ]
        data = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events).encode()
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        self.send_response(404)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return folder


@pytest.fixture
def messages_api(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[list[dict[str, Any]]]:
    seen: list[dict[str, Any]] = []
    handler = type("Handler", (_MessagesAPI,), {"seen": seen, "turns": _turns(workspace)})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    home = tmp_path / "home"  # no user configuration, no stored login
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CLAUDE_CONFIG_DIR", raising=False)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    yield seen
    server.shutdown()
    server.server_close()


def test_the_flags_agentv_passes_are_in_the_real_cli_help(real_claude: Path) -> None:
    helped = subprocess.run(
        [str(real_claude), "--help"], capture_output=True, text=True, timeout=120
    )
    provider = ClaudeCodeProvider(
        "c",
        ClaudeCodeSettings(
            model="m", allowed_tools=("Read",), disallowed_tools=("Bash",), append_system_prompt="x"
        ),
    )
    flags = {a for a in provider.argv("claude") if a.startswith("-")}
    # `--max-turns` is a hidden option: the calls below show the CLI takes it
    assert flags - {"--max-turns"} == {
        "-p",
        "--output-format",
        "--verbose",
        "--model",
        "--permission-mode",
        "--append-system-prompt",
        "--allowedTools",
        "--disallowedTools",
    }
    for flag in flags - {"--max-turns"}:
        assert f"{flag} " in helped.stdout or f"{flag}," in helped.stdout, flag
    assert '"stream-json"' in helped.stdout and '"acceptEdits"' in helped.stdout


async def test_real_claude_code_edits_the_workspace_through_a_loopback_model(
    real_claude: Path, messages_api: list[dict[str, Any]], workspace: Path
) -> None:
    provider = ClaudeCodeProvider(
        "real-claude",
        ClaudeCodeSettings(
            executable=str(real_claude),
            model="claude-test",
            max_turns=8,
            allowed_tools=("Bash", "Edit", "Read"),
            timeout_seconds=180,
        ),
    )
    response = await provider.invoke(ask(question="Fix add() in calc.py", workspace=workspace))
    assert response.text == ANSWER
    assert (workspace / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    steps = [replace(s, duration_ms=None, result=None) for s in response.trajectory or ()]
    assert steps == [
        ToolStep("Bash", {"command": "cat calc.py", "description": "Show calc.py"}, id="toolu_01"),
        ToolStep(
            "Edit",
            {
                "replace_all": False,
                "file_path": str(workspace / "calc.py"),
                "old_string": "a - b",
                "new_string": "a + b",
            },
            id="toolu_02",
        ),
        ToolStep(
            "Bash",
            {"command": "exit 3", "description": "Fails"},
            error="Exit code 3",
            id="toolu_03",
        ),
    ]
    assert response.trajectory is not None
    assert response.trajectory[0].result == "def add(a, b):\n    return a - b"
    # four model turns, each 100 input tokens + 40 read from the cache, 20 output
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (560, 80)
    assert response.usage.cached_input_tokens == 160
    assert response.reported_cost_usd is not None and response.reported_cost_usd > 0
    tooled = [r for r in messages_api if r.get("tools")]
    assert len(tooled) == 4
    assert {r["model"] for r in tooled} == {"claude-test"}
    assert {r["key"] for r in messages_api} == {API_KEY}
    first_user = tooled[0]["messages"][0]["content"]
    text = first_user if isinstance(first_user, str) else json.dumps(first_user)
    assert "Fix add() in calc.py" in text
    assert response.sent["argv"][1:5] == list(FIXED_ARGS)


async def test_real_claude_code_at_its_turn_limit_is_said_so(
    real_claude: Path, messages_api: list[dict[str, Any]], workspace: Path
) -> None:
    provider = ClaudeCodeProvider(
        "real-claude",
        ClaudeCodeSettings(
            executable=str(real_claude),
            model="claude-test",
            max_turns=1,
            allowed_tools=("Bash",),
            timeout_seconds=180,
        ),
    )
    with pytest.raises(ProviderError) as caught:
        await provider.invoke(ask(question="Fix add() in calc.py", workspace=workspace))
    assert str(caught.value) == (
        "Claude Code reached its turn limit (Reached maximum number of turns (1)) before it "
        "finished, after 2 turns; raise `max_turns` (now 1) on target 'real-claude'"
    )


async def test_real_claude_code_works_under_bubblewrap(
    real_claude: Path, messages_api: list[dict[str, Any]], workspace: Path, tmp_path: Path
) -> None:
    # the home folder read-only, the workspace writable, the network on (its model is
    # on 127.0.0.1): a key is all it needs
    sandbox = Sandbox("bwrap", workspace, network=True)
    provider = ClaudeCodeProvider(
        "real-claude",
        ClaudeCodeSettings(
            executable=str(real_claude),
            model="claude-test",
            allowed_tools=("Bash", "Edit", "Read"),
            timeout_seconds=180,
        ),
    )
    try:
        response = await provider.invoke(
            ask(question="Fix add() in calc.py", workspace=workspace, sandbox=sandbox)
        )
    finally:
        sandbox.close()
    assert response.text == ANSWER
    assert (workspace / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert not any((tmp_path / "home").iterdir())  # it wrote nothing there
    assert sandbox.describe() == {"isolation": "bwrap", "network": True}
