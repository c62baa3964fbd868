"""The fake LM server itself: as a standalone process (for benchmarks) and its controls."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from fakes import FakeLLMServer, Fault

SCRIPT = Path(__file__).resolve().parents[1] / "fakes" / "llm_server.py"


def _post(url: str, body: dict, timeout: float = 10) -> tuple[int, dict]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_standalone_process_prints_its_url_and_serves_with_a_delay() -> None:
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--port", "0", "--delay-ms", "150", "--reply", "pong"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        started = time.monotonic()
        status, body = _post(f"{url}/v1/chat/completions", {"model": "m", "messages": []})
        assert time.monotonic() - started >= 0.14
        assert status == 200
        assert body["choices"][0]["message"] == {"role": "assistant", "content": "pong"}
    finally:
        proc.terminate()
        proc.wait(10)


def test_scripted_faults_are_used_in_order_then_success(llm_server: FakeLLMServer) -> None:
    llm_server.script(Fault.rate_limited(retry_after=2), Fault.bad_request("bad"))
    url = f"{llm_server.url}/v1/messages"
    assert _post(url, {})[0] == 429
    status, body = _post(url, {})
    assert (status, body["error"]["message"]) == (400, "bad")
    assert _post(url, {"model": "c", "messages": []})[1]["content"][0]["text"]
    assert [r.api for r in llm_server.requests] == ["anthropic"] * 3


def test_a_hanging_request_is_released_when_the_server_stops() -> None:
    server = FakeLLMServer().start()
    server.script(Fault.hanging())
    errors: list[BaseException] = []

    def call() -> None:
        try:
            _post(f"{server.url}/v1/chat/completions", {}, timeout=30)
        except Exception as exc:  # the connection may be closed under it: that is fine
            errors.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    deadline = time.monotonic() + 5
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    server.stop()
    worker.join(30)
    assert not worker.is_alive()
    assert time.monotonic() - started < 30  # a hang guard: the request was held for an hour
