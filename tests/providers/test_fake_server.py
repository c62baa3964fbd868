"""The fake LM server itself: as a standalone process (for benchmarks) and its controls."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest

from support.fakes import Every, FakeLLMServer, Fault
from support.paths import SUPPORT

SCRIPT = SUPPORT / "fakes" / "llm_server.py"


def _post(url: str, body: dict, timeout: float = 10) -> tuple[int, dict]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.slow
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
    deadline = time.monotonic() + 30  # a hang guard: over at once when it holds
    while not server.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    started = time.monotonic()
    server.stop()
    worker.join(30)
    assert not worker.is_alive()
    assert time.monotonic() - started < 30  # a hang guard: the request was held for an hour


def test_standing_faults_hit_a_fixed_share_of_requests_until_reset() -> None:
    # every 5th request fails with 500, every 10th from the 3rd on hangs; a scripted fault
    # goes first and takes no number
    standing = (Every(5, Fault.server_error()), Every(10, Fault.hanging(), at=3))
    with FakeLLMServer(standing=standing) as server:
        url = f"{server.url}/v1/chat/completions"
        server.script(Fault.bad_request())
        assert _post(url, {})[0] == 400
        statuses = []
        for number in range(1, 11):
            if number == 3:
                with contextlib.suppress(TimeoutError, urllib.error.URLError):
                    _post(url, {}, timeout=0.3)  # the hanging one
                statuses.append(None)
                continue
            statuses.append(_post(url, {"model": "m", "messages": []})[0])
        assert statuses == [200, 200, None, 200, 500, 200, 200, 200, 200, 500]
        faults = [r.fault for r in server.requests]
        assert faults[0] == Fault.bad_request()
        assert faults[3] == Fault.hanging() and faults[5] == Fault.server_error()
        assert sum(f is None for f in faults) == 7

        body = {"model": "m", "messages": []}
        assert _post(url, body)[0] == 200  # number 11
        server.reset()  # numbering starts again: 1 and 2 succeed (12 would too, 13 hangs)
        assert [_post(url, body, timeout=5)[0] for _ in range(2)] == [200, 200]
    with pytest.raises(ValueError, match="every must be at least 1"):
        Every(0, Fault.server_error())


def test_the_rate_limit_answers_429_with_retry_after_and_records_it() -> None:
    with FakeLLMServer(limit_rps=2, limit_burst=2) as server:
        url = f"{server.url}/v1/chat/completions"
        statuses = [_post(url, {"model": "m", "messages": []})[0] for _ in range(3)]
        assert statuses == [200, 200, 429]
        assert len(server.limited_at) == 1
        assert server.requests[2].fault is not None and server.requests[2].fault.status == 429
        assert 0 < server.requests[2].fault.retry_after <= 0.5
        server.reset()
        assert server.limited_at == [] and server.requests == []
