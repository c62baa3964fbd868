"""The real Codex CLI (from the npm registry) against a loopback fake of the Responses API.

The pinned ``@openai/codex`` is installed with npm into ``.cache/codex`` (git ignores
it) the first time, and reused after. This test runs in ``make test`` and CI, and never
skips: when npm is missing, the install fails or the CLI does not start, it fails with the
one command that fixes it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentv.providers.agents.codex import CodexProvider, CodexSettings
from support.npm_cli import PinnedNpmCli
from support.providers import ask

#: every test here installs the Codex CLI with npm and runs it: left out of `make test-fast`
pytestmark = pytest.mark.slow

#: The Codex CLI release this test runs; bump it on purpose, with the test passing.
CODEX_VERSION = "0.169.0"
CODEX = PinnedNpmCli("@openai/codex", CODEX_VERSION, "codex", "codex", "Codex CLI")
ANSWER = "The answer is 42."
API_KEY = "agentv-test-dummy-key"


@pytest.fixture(scope="module")
def real_codex() -> Path:
    """The pinned Codex CLI, installed once into the git-ignored cache."""
    return CODEX.ensure(version_timeout=60)


class _ResponsesAPI(BaseHTTPRequestHandler):
    """Answers ``POST /v1/responses`` with a server-sent event stream holding one message."""

    seen: list[dict[str, Any]]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        self.seen.append({"path": self.path, "auth": self.headers.get("authorization"), **body})
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        message = {
            "type": "message",
            "role": "assistant",
            "id": "msg_1",
            "content": [{"type": "output_text", "text": ANSWER}],
        }
        usage = {
            "input_tokens": 11,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 16,
        }
        for event in (
            {"type": "response.created", "response": {"id": "resp_1"}},
            {"type": "response.output_item.done", "output_index": 0, "item": message},
            {"type": "response.completed", "response": {"id": "resp_1", "usage": usage}},
        ):
            self.wfile.write(f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode())
        self.wfile.flush()

    def do_GET(self) -> None:
        self.send_response(404)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def responses_api() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []
    handler = type("Handler", (_ResponsesAPI,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    server.shutdown()
    server.server_close()


async def test_real_codex_cli_answers_through_a_loopback_model(
    real_codex: Path,
    responses_api: tuple[str, list[dict[str, Any]]],
    repo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    base_url, seen = responses_api
    home = tmp_path / "codex-home"  # no user configuration, no stored login
    home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(home))
    monkeypatch.setenv("AGENTV_FAKE_API_KEY", API_KEY)
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    overrides = {
        "model_provider": '"agentv_fake"',
        "model_providers.agentv_fake.name": '"agentv fake"',
        "model_providers.agentv_fake.base_url": f'"{base_url}"',
        "model_providers.agentv_fake.wire_api": '"responses"',
        "model_providers.agentv_fake.env_key": '"AGENTV_FAKE_API_KEY"',
        "model": '"fake-model"',
        "analytics.enabled": "false",
    }
    args = [item for key, value in overrides.items() for item in ("-c", f"{key}={value}")]
    attachment = repo / "notes.md"
    attachment.write_text("The number is 42.")
    provider = CodexProvider(
        "real-codex",
        CodexSettings(executable=str(real_codex), args=tuple(args), timeout_seconds=120),
    )
    response = await provider.invoke(
        ask(question="What number is in the notes?", input_files=[attachment])
    )
    assert response.text == ANSWER
    assert response.usage is not None and response.usage.input_tokens == 11
    request = seen[-1]
    assert request["path"] == "/v1/responses"
    assert request["auth"] == f"Bearer {API_KEY}"
    assert request["model"] == "fake-model"
    user_texts = [
        part["text"]
        for item in request["input"]
        if item.get("role") == "user"
        for part in item.get("content", [])
        if part.get("type") == "input_text"
    ]
    prompt = next(t for t in user_texts if "[[ ## user_query ## ]]" in t)
    assert f"* [notes.md]({attachment.as_uri()})." in prompt
    assert prompt.rstrip().endswith("What number is in the notes?")
    assert API_KEY not in json.dumps(response.sent) + json.dumps(response.raw)
    log_text = Path(response.raw["log_file"]).read_text()
    assert f"item.completed: {ANSWER}" in log_text
