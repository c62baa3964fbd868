"""A loopback fake of four LM APIs, for tests and benchmarks.

It speaks just enough of each wire format for the official SDKs to be happy:

- OpenAI chat completions: ``POST .../chat/completions``
- Azure OpenAI: ``POST /openai/deployments/<deployment>/chat/completions?api-version=...``
- Anthropic messages: ``POST .../v1/messages``
- Gemini: ``POST .../models/<model>:generateContent``

Every request is recorded (method, path, query, headers, JSON body). Faults can be scripted
for the next requests: an error status (with ``Retry-After`` if wanted, in the vendor's error
body format), any body at all (``Fault.body``: not JSON, say), a hang before any byte, a hang
after the headers, a body that stalls half-way, a connection reset, a successful answer whose
text is empty (``Fault.empty_answer``) or that ends for a given reason (``Fault.finishing``),
and hostile answers: a body that never ends (``Fault.endless``) and a gzip bomb
(``Fault.gzip_bomb``). ``refused_url()`` gives a URL whose port refuses connections.

Answers honour the output limit the request sends (OpenAI's ``max_tokens`` and
``max_completion_tokens``, Anthropic's ``max_tokens``, Gemini's ``maxOutputTokens``): the
reply is cut to that many words (the fake's tokens) and ends as cut at the limit. A server
that knows only some of OpenAI's names (``limit_params``, as older compatible servers know
only ``max_tokens``) ignores the others, as those servers do. ``strict=True`` validates each
request as servers with typed request models do (``fakes.strict``): a field of the wrong
type or one the server does not know is refused with HTTP 422 and FastAPI's ``detail``.
Standing faults (``Every``) hit a fixed share of all requests, e.g. every 5th answered 500,
for as long as the server runs; a rate limit answers 429 beyond it, with the
``Retry-After`` a next request would need: requests a second with a burst (``limit_rps``,
``limit_burst``, or ``limit=BucketLimit(...)``), or requests per window of time
(``limit=WindowLimit(600, 60)``: 600 a minute). A fixed ``delay_ms`` is added to every answer, so benchmarks can use it as a
stand-in for a real API. It serves many concurrent requests (aiohttp).

In a test::

    with FakeLLMServer() as server:
        server.script(Fault.rate_limited(retry_after=0.2))
        ...  # point an SDK at server.url
        assert server.requests[-1].body["messages"][0]["role"] == "system"

    # 20 % of all requests fail with 500, 2 % hang (the numbers never overlap)
    FakeLLMServer(standing=(Every(5, Fault.server_error()), Every(50, Fault.hanging(), at=1)))

As a process (prints its URL on the first line, then serves until interrupted)::

    python tests/support/fakes/llm_server.py --port 8765 --delay-ms 100
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import itertools
import json
import socket
import struct
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

try:
    from support.fakes.strict import CHECKS
except ImportError:  # loaded from its file (a script, the benchmarks): the sibling, by path
    import importlib.util
    import sys
    from pathlib import Path

    _spec = importlib.util.spec_from_file_location(
        "fakes_strict", Path(__file__).with_name("strict.py")
    )
    assert _spec is not None and _spec.loader is not None
    _strict = importlib.util.module_from_spec(_spec)
    sys.modules[_spec.name] = _strict
    _spec.loader.exec_module(_strict)
    CHECKS = _strict.CHECKS

DEFAULT_REPLY = "Hello from the fake LLM."


@dataclass(slots=True)
class RecordedRequest:
    """One request as the server received it."""

    method: str
    path: str  # percent-decoded
    query: dict[str, str]
    headers: dict[str, str]  # keys lower-cased
    body: Any  # parsed JSON, or None when the body was not JSON
    raw: bytes
    received_at: float  # time.monotonic()
    raw_path: str = ""  # as sent, percent-encoding included (no query)
    #: how the server answered it instead of succeeding (a scripted, standing or rate-limit
    #: fault), else None
    fault: Fault | None = None
    #: when the server's handler was done with it (time.monotonic(); None until then): a
    #: whole answer goes out after it, a stream ends at it, a held request gets it when the
    #: server stops. A request received before another's ``answered_at`` was sent before the
    #: client could read that (whole) answer.
    answered_at: float | None = None

    @property
    def api(self) -> str:
        """Which wire format the request used: openai, azure, anthropic, gemini or unknown."""
        return _api_of(self.path)


@dataclass(frozen=True, slots=True)
class Fault:
    """How to answer one scripted request instead of succeeding."""

    status: int = 500
    message: str = "The fake server was told to fail."
    retry_after: float | None = None  # seconds, sent as the Retry-After header
    retry_after_ms: float | None = None  # milliseconds, sent as the retry-after-ms header
    hang: bool = False  # never answer (until the server stops)
    #: "headers": send 200 and the headers, then nothing; "mid-body": send half of a good
    #: body (its full Content-Length announced), then nothing; "reset": close the connection
    #: with a TCP reset instead of answering
    stall: str | None = None
    empty: bool = False  # a 200 whose answer has no text (OpenAI null, Anthropic [], Gemini none)
    #: a 200 whose answer ends for this reason, in the API's own words (``"length"``,
    #: ``"max_tokens"``, ``"SAFETY"``...)
    finish: str | None = None
    #: this exact body (with ``status`` and ``content_type``) instead of the API's JSON
    raw_body: bytes | None = None
    content_type: str = "application/json"
    content_encoding: str | None = None  # sent as Content-Encoding with ``raw_body``
    #: a 200 whose body never ends: 1 MiB chunks (spaces after a JSON opening), for ever
    endless: bool = False
    #: a 200 whose gzip body expands to this many bytes (1 GiB from about 1 MiB)
    gzip_bomb: int = 0

    @classmethod
    def rate_limited(cls, retry_after: float | None = None) -> Fault:
        return cls(429, "Rate limit reached. Please retry later.", retry_after)

    @classmethod
    def server_error(cls) -> Fault:
        return cls(500, "The server had an error while processing your request.")

    @classmethod
    def bad_request(cls, message: str = "Invalid request: messages is malformed.") -> Fault:
        return cls(400, message)

    @classmethod
    def hanging(cls) -> Fault:
        return cls(hang=True)

    @classmethod
    def hang_after_headers(cls) -> Fault:
        return cls(200, stall="headers")

    @classmethod
    def stall_mid_body(cls) -> Fault:
        return cls(200, stall="mid-body")

    @classmethod
    def reset(cls) -> Fault:
        return cls(stall="reset")

    @classmethod
    def empty_answer(cls) -> Fault:
        return cls(200, empty=True)

    @classmethod
    def finishing(cls, reason: str) -> Fault:
        return cls(200, finish=reason)

    @classmethod
    def body(cls, data: bytes | str, status: int = 200, content_type: str = "text/plain") -> Fault:
        raw = data.encode() if isinstance(data, str) else data
        return cls(status, raw_body=raw, content_type=content_type)

    @classmethod
    def endless_body(cls) -> Fault:
        return cls(200, endless=True)

    @classmethod
    def bomb(cls, expands_to: int = 1 << 30) -> Fault:
        return cls(200, gzip_bomb=expands_to)


@dataclass(slots=True)
class BucketLimit:
    """At most ``rate`` requests a second and ``burst`` at once: a token bucket, full at
    the start (``burst=1``: no burst, requests at least ``1 / rate`` s apart)."""

    rate: float
    burst: float = 1.0
    _level: float | None = None  # None: full (not used yet)
    _at: float = 0.0

    def take(self, now: float) -> float | None:
        """None when a request may pass now (one token taken), else the seconds until one
        could."""
        if self._level is None:
            level = self.burst
        else:
            level = min(self.burst, self._level + (now - self._at) * self.rate)
        self._at = now
        if level >= 1.0:
            self._level = level - 1.0
            return None
        self._level = level
        return (1.0 - level) / self.rate

    def restart(self) -> None:
        """Full again, as before the first request."""
        self._level = None

    @property
    def per_second(self) -> float:
        """The requests a second it lets through in the long run."""
        return self.rate


@dataclass(slots=True)
class WindowLimit:
    """At most ``requests`` in each window of ``seconds`` (``WindowLimit(600, 60)``: 600
    requests a minute), counted in fixed windows, the first one starting at the first
    request; a request beyond it waits for the next window."""

    requests: int
    seconds: float = 60.0
    _start: float | None = None
    _count: int = 0

    def take(self, now: float) -> float | None:
        """None when a request may pass now (counted), else the seconds until the window
        ends."""
        if self._start is None:
            self._start = now
        elif now >= self._start + self.seconds:
            self._start += (now - self._start) // self.seconds * self.seconds
            self._count = 0
        if self._count < self.requests:
            self._count += 1
            return None
        return self._start + self.seconds - now

    def restart(self) -> None:
        """As before the first request: the next one starts a window."""
        self._start = None
        self._count = 0

    @property
    def per_second(self) -> float:
        """The requests a second it lets through in the long run."""
        return self.requests / self.seconds


RateLimit = BucketLimit | WindowLimit


@dataclass(frozen=True, slots=True)
class Every:
    """A standing fault: requests number ``at``, ``at + every``, ``at + 2 * every``, ... get
    ``fault`` (numbered from 1 since the last ``reset()``, counting the requests that passed
    the rate limit and had no scripted fault; ``at`` 0 means ``every``)."""

    every: int
    fault: Fault
    at: int = 0

    def __post_init__(self) -> None:
        if self.every < 1:
            raise ValueError("every must be at least 1")

    def hits(self, number: int) -> bool:
        """Whether request ``number`` gets the fault."""
        return number % self.every == self.at % self.every


@dataclass(frozen=True)
class ToolCalls:
    """A reply that calls tools, in each API's own form: ``calls`` are (name, arguments)
    pairs, each given an id (``call_<request>_<i>``); ``text`` may come with them. Arguments
    given as text are sent as that very text where the API writes them as text (OpenAI's
    ``arguments``), so a test can have a model write them its own way, or not as JSON."""

    calls: tuple[tuple[str, dict[str, Any] | str], ...]
    text: str = ""


Reply = str | ToolCalls | Callable[[RecordedRequest], "str | ToolCalls"]


@dataclass
class FakeLLMServer:
    """The fake server; ``start()`` runs it on a background thread (or use ``with``)."""

    host: str = "127.0.0.1"
    port: int = 0  # 0: a free port chosen by the OS
    delay_ms: float = 0.0
    #: when given, every answer waits until it is set (a run held open for as long as a
    #: test needs, however slowly the machine runs)
    hold: threading.Event | None = None
    reply: Reply = DEFAULT_REPLY
    reasoning: str | None = None  # returned as thinking/thought/reasoning_content when set
    record: bool = True  # benchmarks may turn recording off
    #: a rate limit like an API's: at most ``limit_rps`` requests a second, ``limit_burst``
    #: at once (or any ``limit``); beyond it a 429 with the Retry-After that a next request
    #: would need
    limit_rps: float | None = None
    limit_burst: float = 1.0
    limit: RateLimit | None = None
    #: times (time.monotonic()) of the requests answered 429 by the rate limit
    limited_at: list[float] = field(default_factory=list)
    #: standing faults, checked in order (the first that hits a request's number wins)
    standing: tuple[Every, ...] = ()
    #: refuse requests a typed server would (``fakes.strict``), with 422
    strict: bool = False
    #: the names of OpenAI's output limit this server knows (and honours); others are
    #: ignored, or refused when ``strict``
    limit_params: tuple[str, ...] = ("max_completion_tokens", "max_tokens")
    #: input tokens each answer says were read from the vendor's prompt cache, in the API's
    #: own field (OpenAI's within the prompt tokens, Anthropic's apart from its input tokens)
    cached_prompt_tokens: int = 0
    #: each answer sets a cookie (``affinity=node<n>``, n the answer's number), as a load
    #: balancer or a gateway that keeps a client on one node does
    sets_cookie: bool = False
    #: for each endless body served, the bytes sent of it so far (when the client stopped
    #: reading, the server's writes stop too, a few buffers later)
    endless_sent: list[int] = field(default_factory=list)
    #: set when an endless body ends: its client went away (or the server stopped)
    endless_ended: threading.Event = field(default_factory=threading.Event)
    requests: list[RecordedRequest] = field(default_factory=list)
    _faults: deque[Fault] = field(default_factory=deque, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _ids: itertools.count = field(default_factory=itertools.count, repr=False)
    _numbers: itertools.count = field(default_factory=lambda: itertools.count(1), repr=False)
    _loop: asyncio.AbstractEventLoop | None = field(default=None, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _runner: web.AppRunner | None = field(default=None, repr=False)
    _closing: asyncio.Event | None = field(default=None, repr=False)

    # --- control -------------------------------------------------------------------------

    def __post_init__(self) -> None:
        if self.limit is None and self.limit_rps is not None:
            self.limit = BucketLimit(self.limit_rps, self.limit_burst)

    def _rate_limited(self, now: float) -> float | None:
        """None when a request may pass the rate limit now, else the seconds until it
        could."""
        if self.limit is None:
            return None
        with self._lock:
            return self.limit.take(now)

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:53211`` (no trailing slash)."""
        return f"http://{self.host}:{self.port}"

    def script(self, *faults: Fault | None) -> None:
        """Answer the next ``len(faults)`` requests with these faults, in order (None: that
        request is answered as usual)."""
        with self._lock:
            self._faults.extend(faults)

    def reset(self) -> None:
        """Forget recorded requests, the rate limit's 429 times and pending faults; standing
        faults count from 1 again, and the rate limit starts afresh (a full bucket, a new
        window at the next request)."""
        with self._lock:
            if self.limit is not None:
                self.limit.restart()
            self.requests.clear()
            self.limited_at.clear()
            self._faults.clear()
            self._numbers = itertools.count(1)

    def start(self) -> FakeLLMServer:
        """Start serving on a daemon thread; returns once the port is bound."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._start_async())
            except BaseException as exc:  # reported to the starting thread
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._stop_async())
            loop.close()

        self._thread = threading.Thread(target=run, name="fake-llm-server", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self

    def stop(self) -> None:
        """Stop serving (hanging requests are released first)."""
        if self._loop is None or self._thread is None:
            return
        loop = self._loop
        if self._closing is not None:
            loop.call_soon_threadsafe(self._closing.set)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(10)
        self._loop = self._thread = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- serving -------------------------------------------------------------------------

    async def _start_async(self) -> None:
        self._closing = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024)
        await site.start()
        if self.port == 0:
            server = site._server
            assert server is not None
            self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    async def _stop_async(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def _next_fault(self) -> Fault | None:
        with self._lock:
            if self._faults:
                return self._faults.popleft()
            if not self.standing:
                return None
            number = next(self._numbers)
        return next((rule.fault for rule in self.standing if rule.hits(number)), None)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        rec = RecordedRequest(
            method=request.method,
            path=request.path,
            query=dict(request.query),
            headers={k.lower(): v for k, v in request.headers.items()},
            body=body,
            raw=raw,
            received_at=time.monotonic(),
            raw_path=request.raw_path.split("?", 1)[0],
        )
        if self.record:
            with self._lock:
                self.requests.append(rec)
        try:
            return await self._answer(request, rec)
        finally:
            rec.answered_at = time.monotonic()

    async def _answer(self, request: web.Request, rec: RecordedRequest) -> web.StreamResponse:
        """The response to ``request`` (recorded as ``rec``)."""
        body = rec.body
        wait = self._rate_limited(rec.received_at)
        if wait is not None:
            self.limited_at.append(rec.received_at)
            rec.fault = Fault.rate_limited(wait)
            return _error_response(
                rec.api if rec.api != "unknown" else "openai",
                429,
                "Rate limit reached. Please retry later.",
                wait,
            )
        fault = rec.fault = self._next_fault()
        if fault is not None and fault.hang:
            assert self._closing is not None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), timeout=3600)
            return web.Response(status=503)
        if self.delay_ms > 0:
            await asyncio.sleep(self.delay_ms / 1000)
        while self.hold is not None and not self.hold.is_set():
            await asyncio.sleep(0.02)
        api = rec.api
        if api == "unknown" or request.method != "POST":
            return _error_response("openai", 404, f"No fake route for {request.path}", None)
        if fault is not None and fault.stall == "reset":
            return _reset(request)
        if fault is not None and fault.raw_body is not None:
            headers = {"Content-Type": fault.content_type}
            if fault.content_encoding is not None:
                headers["Content-Encoding"] = fault.content_encoding
            return web.Response(status=fault.status, body=fault.raw_body, headers=headers)
        if fault is not None and fault.endless:
            return await self._endless(request)
        if fault is not None and fault.gzip_bomb:
            return web.Response(
                body=_gzip_bomb(fault.gzip_bomb),
                headers={"Content-Type": "application/json", "Content-Encoding": "gzip"},
            )
        if fault is not None and fault.status != 200:
            response = _error_response(api, fault.status, fault.message, fault.retry_after)
            if fault.retry_after_ms is not None:
                response.headers["retry-after-ms"] = f"{fault.retry_after_ms:g}"
            return response
        if self.strict:
            problems = CHECKS[api](body, self.limit_params)
            if problems:
                return web.json_response({"detail": problems}, status=422)
        said = self.reply(rec) if callable(self.reply) else self.reply
        calls = said.calls if isinstance(said, ToolCalls) else ()
        text = said.text if isinstance(said, ToolCalls) else said
        limit = _limit(api, body, self.limit_params)
        cut = limit is not None and len(text.split()) > limit
        if cut:
            text = " ".join(text.split()[:limit])
        n = next(self._ids)
        payload = _SUCCESS[api](rec, text, self.reasoning, n)
        if calls:
            _call_tools(api, payload, calls, n)
        if self.cached_prompt_tokens:
            _cached_tokens(api, payload, self.cached_prompt_tokens)
        if cut:
            _finish(api, payload, _LENGTH[api])
        if fault is not None and fault.finish is not None:
            _finish(api, payload, fault.finish)
        if fault is not None and fault.empty:
            _empty(api, payload)
        if fault is not None and fault.stall is not None:
            assert self._closing is not None
            return await _stalled(request, payload, fault.stall, self._closing)
        if api in ("openai", "azure") and isinstance(body, dict) and body.get("stream"):
            return await _openai_stream(request, payload)
        response = web.json_response(payload)
        if self.sets_cookie:
            response.set_cookie("affinity", f"node{n + 1}")
        return response

    async def _endless(self, request: web.Request) -> web.StreamResponse:
        """200, chunked, then 1 MiB chunks until the client goes away or the server stops."""
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        chunk = b" " * (1 << 20)
        with self._lock:
            index = len(self.endless_sent)
            self.endless_sent.append(0)
        assert self._closing is not None
        try:
            with contextlib.suppress(ConnectionError, RuntimeError):
                await response.write(b'{"choices": [')
                while not self._closing.is_set():
                    await response.write(chunk)
                    self.endless_sent[index] += len(chunk)
        finally:
            self.endless_ended.set()
        return response


@contextlib.contextmanager
def refused() -> Iterator[str]:
    """``http://127.0.0.1:PORT``, whose port refuses connections while the block runs
    (bound, never listening, so that nothing else takes it meanwhile)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


@functools.lru_cache(maxsize=4)
def _gzip_bomb(size: int) -> bytes:
    """A valid gzip member that expands to ``size`` bytes of ``a`` (a multiple of 1 MiB),
    about a thousandth of that on the wire: one 1 MiB block compressed once, ending in a
    full flush (so it stands alone), repeated."""
    block = b"a" * (1 << 20)
    count = max(1, size >> 20)
    one = zlib.compressobj(9, zlib.DEFLATED, -15)
    segment = one.compress(block) + one.flush(zlib.Z_FULL_FLUSH)
    end = zlib.compressobj(9, zlib.DEFLATED, -15).flush()  # the empty final block
    crc = 0
    for _ in range(count):
        crc = zlib.crc32(block, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    trailer = struct.pack("<II", crc, (count << 20) & 0xFFFFFFFF)
    return header + segment * count + end + trailer


# --- wire formats ------------------------------------------------------------------------


def _api_of(path: str) -> str:
    if path.endswith("/chat/completions"):
        return "azure" if "/openai/deployments/" in path else "openai"
    if path.endswith("/messages"):
        return "anthropic"
    if ":generateContent" in path:
        return "gemini"
    return "unknown"


def _words(value: Any) -> int:
    """A deterministic stand-in for a token count: whitespace-separated words in all strings."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, dict):
        return sum(_words(v) for v in value.values())
    if isinstance(value, list):
        return sum(_words(v) for v in value)
    return 0


def _openai_success(rec: RecordedRequest, text: str, reasoning: str | None, n: int) -> Any:
    body = rec.body or {}
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning is not None:
        message["reasoning_content"] = reasoning  # what vLLM and DeepSeek return
    prompt, completion = _words(body.get("messages")), _words(text)
    return {
        "id": f"chatcmpl-fake-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


def _anthropic_success(rec: RecordedRequest, text: str, reasoning: str | None, n: int) -> Any:
    body = rec.body or {}
    content: list[dict[str, Any]] = []
    if reasoning is not None and body.get("thinking"):
        content.append({"type": "thinking", "thinking": reasoning, "signature": "fake-signature"})
    content.append({"type": "text", "text": text})
    return {
        "id": f"msg_fake_{n}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "fake-model"),
        "content": content,
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {
            "input_tokens": _words(body.get("messages")) + _words(body.get("system")),
            "output_tokens": _words(text),
        },
    }


def _gemini_success(rec: RecordedRequest, text: str, reasoning: str | None, n: int) -> Any:
    body = rec.body or {}
    model = rec.path.rsplit("/", 1)[-1].split(":", 1)[0]
    parts: list[dict[str, Any]] = []
    if reasoning is not None:
        parts.append({"text": reasoning, "thought": True})
    parts.append({"text": text})
    prompt = _words(body.get("contents")) + _words(body.get("systemInstruction"))
    return {
        "candidates": [
            {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {
            "promptTokenCount": prompt,
            "candidatesTokenCount": _words(text),
            "totalTokenCount": prompt + _words(text),
        },
        "modelVersion": model,
        "responseId": f"fake-{n}",
    }


_SUCCESS: dict[str, Callable[[RecordedRequest, str, str | None, int], Any]] = {
    "openai": _openai_success,
    "azure": _openai_success,
    "anthropic": _anthropic_success,
    "gemini": _gemini_success,
}


def _cached_tokens(api: str, payload: Any, count: int) -> None:
    """Say ``count`` input tokens came from the vendor's prompt cache, as each API does."""
    if api in ("openai", "azure"):
        payload["usage"]["prompt_tokens_details"] = {"cached_tokens": count}
    elif api == "anthropic":
        payload["usage"]["cache_read_input_tokens"] = count
    elif api == "gemini":
        payload["usageMetadata"]["cachedContentTokenCount"] = count


#: how each API says an answer was cut at the output limit
_LENGTH = {"openai": "length", "azure": "length", "anthropic": "max_tokens", "gemini": "MAX_TOKENS"}


def _limit(api: str, body: Any, known: tuple[str, ...]) -> int | None:
    """The output limit the request sent, under a name this server knows (else None)."""
    if not isinstance(body, dict):
        return None
    if api in ("openai", "azure"):
        values = [body[name] for name in known if name in body]
    elif api == "anthropic":
        values = [body.get("max_tokens")]
    else:
        config = body.get("generationConfig")
        values = [config.get("maxOutputTokens")] if isinstance(config, dict) else []
    numbers = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
    return min(numbers) if numbers else None


def _call_tools(
    api: str, payload: dict[str, Any], calls: tuple[tuple[str, dict[str, Any] | str], ...], n: int
) -> None:
    """Make a success payload call ``calls``, as the API writes tool calls."""
    ids = [f"call_{n}_{i}" for i in range(len(calls))]
    if api in ("openai", "azure"):
        choice = payload["choices"][0]
        message = choice["message"]
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {
                    "name": name,
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                },
            }
            for call_id, (name, args) in zip(ids, calls, strict=True)
        ]
        if not message["content"]:
            message["content"] = None  # as OpenAI sends it
        choice["finish_reason"] = "tool_calls"
    elif api == "anthropic":
        content = [b for b in payload["content"] if b["type"] != "text" or b["text"]]
        content += [
            {"type": "tool_use", "id": call_id, "name": name, "input": args}
            for call_id, (name, args) in zip(ids, calls, strict=True)
        ]
        payload["content"] = content
        payload["stop_reason"] = "tool_use"
    else:
        parts = payload["candidates"][0]["content"]["parts"]
        parts[:] = [p for p in parts if p.get("text")]
        parts += [
            {"functionCall": {"id": call_id, "name": name, "args": args}}
            for call_id, (name, args) in zip(ids, calls, strict=True)
        ]


def _finish(api: str, payload: dict[str, Any], reason: str) -> None:
    """Make a success payload end for ``reason`` (the API's own word for it)."""
    if api in ("openai", "azure"):
        payload["choices"][0]["finish_reason"] = reason
    elif api == "anthropic":
        payload["stop_reason"] = reason
    else:
        payload["candidates"][0]["finishReason"] = reason


_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}
_GOOGLE_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    503: "UNAVAILABLE",
}


async def _openai_stream(request: web.Request, payload: dict[str, Any]) -> web.StreamResponse:
    """A chat completion as server-sent events (``"stream": true``; clients such as the
    TypeScript AgentV always stream): one content chunk, the finish chunk, then usage."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    head = {k: payload[k] for k in ("id", "created", "model")}
    message = payload["choices"][0]["message"]
    chunks = [
        {"choices": [{"index": 0, "delta": message, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {"choices": [], "usage": payload["usage"]},
    ]
    for chunk in chunks:
        event = {**head, "object": "chat.completion.chunk", **chunk}
        await response.write(f"data: {json.dumps(event)}\n\n".encode())
    await response.write(b"data: [DONE]\n\n")
    await response.write_eof()
    return response


def _empty(api: str, payload: dict[str, Any]) -> None:
    """Make a success payload carry no answer text, as each API does when it has none."""
    if api in ("openai", "azure"):
        payload["choices"][0]["message"]["content"] = None
    elif api == "anthropic":
        payload["content"] = []
    else:
        payload["candidates"][0]["content"]["parts"] = []


async def _stalled(
    request: web.Request, payload: dict[str, Any], where: str, closing: asyncio.Event
) -> web.StreamResponse:
    """Answer 200 with the headers (and, "mid-body", half the body), then go silent until
    the server stops: the client must give up on its own."""
    body = json.dumps(payload).encode()
    response = web.StreamResponse(
        status=200,
        headers={"Content-Type": "application/json", "Content-Length": str(len(body))},
    )
    await response.prepare(request)
    if where == "mid-body":
        await response.write(body[: len(body) // 2])
    with contextlib.suppress(TimeoutError, ConnectionError):
        await asyncio.wait_for(closing.wait(), timeout=3600)
    return response


def _reset(request: web.Request) -> web.Response:
    """Drop the connection with a TCP reset (SO_LINGER 0), no HTTP answer at all."""
    transport = request.transport
    if transport is not None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    return web.Response(status=500)


def _error_response(api: str, status: int, message: str, retry_after: float | None) -> web.Response:
    if api == "anthropic":
        body: Any = {
            "type": "error",
            "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"), "message": message},
        }
    elif api == "gemini":
        body = {
            "error": {
                "code": status,
                "message": message,
                "status": _GOOGLE_STATUS.get(status, "INTERNAL"),
            }
        }
    else:
        body = {"error": {"message": message, "type": "fake_error", "param": None, "code": None}}
    headers = {}
    if retry_after is not None:
        headers["Retry-After"] = f"{retry_after:g}"
    return web.json_response(body, status=status, headers=headers)


# --- standalone process -------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    """Serve until interrupted; the first line printed is the base URL."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="added to every answer")
    parser.add_argument("--reply", default=DEFAULT_REPLY, help="the text every answer holds")
    args = parser.parse_args(argv)
    server = FakeLLMServer(
        host=args.host, port=args.port, delay_ms=args.delay_ms, reply=args.reply, record=False
    )
    server.start()
    print(server.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
