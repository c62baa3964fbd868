"""The HTTP layer under the LM API SDKs: one client for OpenAI, Azure, Anthropic and Gemini.

The three SDKs speak httpx2; each provider hands its SDK the client ``http_client`` builds,
whose transport

- sends with aiohttp when it is installed (it costs about half the CPU per request of
  httpx's own transport, which decides how many calls one process keeps in flight), else
  with httpx2's;
- bounds every response body while it streams, error bodies too: at most
  ``max_response_bytes`` as received, and again after decompression, which happens here (a
  chunk at a time, never more than the cap), not in the SDK. Beyond either a request fails
  with ``ResponseTooLarge``, which is never retried: an endless body or a gzip bomb costs
  the cap, not the machine's memory (docs/targets.md, "Fields"). A body of known length
  up to 64 KiB and within the cap (most answers) is read whole by the aiohttp transport
  and made plain here at once, within the same caps, so that the SDK finds it read;
- keeps what went wrong with a connection (the error aiohttp raised stays the cause of the
  one the SDK sees), so that ``agentv.providers.failures`` can say it in words.

This module needs httpx2, which comes with the SDKs: the adapters import it when they
build their client, never before.
"""

from __future__ import annotations

import asyncio
import datetime
import importlib.util
import ssl
import time
import urllib.request
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2

from agentv.providers.base import SENDING
from agentv.providers.failures import ResponseRejected, ResponseTooLarge

#: what is asked for: the encodings decompressed here, with a cap
ACCEPT_ENCODING = "gzip, deflate"
#: connections kept per client (the SDKs' default); the run's scheduler bounds the load
_MAX_CONNECTIONS = 1000
_CHUNK = 64 * 1024


# --- bounded bodies -------------------------------------------------------------------------


def _decompressor(encoding: str) -> Any:
    """A zlib decompressor for ``Content-Encoding: encoding`` (None: none needed)."""
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":
        return _Deflate()
    raise ResponseRejected(
        f"the server answered with Content-Encoding {encoding!r}, which agentv does not "
        f"read (it asks for {ACCEPT_ENCODING})"
    )


class _Deflate:
    """``deflate`` as servers send it: zlib-wrapped, or (some old servers) raw."""

    def __init__(self) -> None:
        self._inner: Any = None

    def decompress(self, data: bytes, max_length: int = 0) -> bytes:
        if self._inner is None:
            # a zlib stream's first byte says "deflate, window <= 32 KiB"; else it is raw
            wrapped = len(data) > 0 and data[0] & 0x0F == 8 and (data[0] >> 4) <= 7
            self._inner = zlib.decompressobj(zlib.MAX_WBITS if wrapped else -zlib.MAX_WBITS)
        return self._inner.decompress(data, max_length)

    @property
    def unconsumed_tail(self) -> bytes:
        return self._inner.unconsumed_tail if self._inner is not None else b""


class _Meter:
    """Counts a response body as received and as decompressed; beyond ``limit`` either
    way, ``ResponseTooLarge``."""

    __slots__ = ("_decoder", "_limit", "_produced", "_received")

    def __init__(self, limit: int, decoder: Any) -> None:
        self._limit = limit
        self._decoder = decoder
        self._received = self._produced = 0

    def feed(self, chunk: bytes) -> Iterator[bytes]:
        """``chunk`` as received, decompressed: its pieces."""
        self._received += len(chunk)
        if self._received > self._limit:
            raise ResponseTooLarge(self._limit, decompressed=False)
        if self._decoder is None:
            yield chunk
            return
        data = chunk
        while data:
            # never more than one byte past the cap in memory, whatever the ratio
            try:
                out = self._decoder.decompress(data, self._limit - self._produced + 1)
            except zlib.error as exc:
                raise ResponseRejected(
                    f"the server sent a corrupt compressed body: {exc}"
                ) from None
            self._produced += len(out)
            if self._produced > self._limit:
                raise ResponseTooLarge(self._limit, decompressed=True)
            if out:
                yield out
            data = self._decoder.unconsumed_tail


class _BoundedStream(httpx2.AsyncByteStream):
    """A response body read through a ``_Meter``."""

    def __init__(self, inner: httpx2.AsyncByteStream, meter: _Meter) -> None:
        self._inner = inner
        self._meter = meter

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._inner:
            for piece in self._meter.feed(chunk):
                yield piece

    async def aclose(self) -> None:
        await self._inner.aclose()


class BoundedTransport(httpx2.AsyncBaseTransport):
    """``inner`` with every response body bounded (``_BoundedStream``) and decompressed
    here, so that the SDK above never decompresses (or holds) more than the cap."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: int) -> None:
        self.inner = inner
        self.limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = ACCEPT_ENCODING
        sending = SENDING.get()
        if sending is not None:
            sending()  # leaving now: a paced target spaces its next turn from here
        started = time.perf_counter()
        response = await self.inner.handle_async_request(request)
        try:
            length = response.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > self.limit:
                raise ResponseTooLarge(self.limit, decompressed=False)
            encoding = response.headers.get("Content-Encoding", "").strip().lower()
            decoder = _decompressor(encoding)
        except ResponseRejected:
            await response.aclose()
            raise
        if decoder is not None:
            # decompressed here: the SDK must see a plain body of unknown length
            drop = {"content-encoding", "content-length"}
            response.headers = httpx2.Headers(
                [(k, v) for k, v in response.headers.multi_items() if k.lower() not in drop]
            )
        meter = _Meter(self.limit, decoder)
        if isinstance(response.stream, httpx2.ByteStream):
            # a small body the transport read whole: made plain and read now, so that the
            # SDK finds it read (no stream for it to go through, a piece at a time)
            body = b"".join(piece for chunk in response.stream for piece in meter.feed(chunk))
            response.stream = httpx2.ByteStream(body)
            response.read()
            # what httpx2 says once a body is read (it measures only bodies it reads itself)
            response.elapsed = datetime.timedelta(seconds=time.perf_counter() - started)
            return response
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = _BoundedStream(response.stream, meter)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


# --- aiohttp underneath -----------------------------------------------------------------------


class _AiohttpBody(httpx2.AsyncByteStream):
    def __init__(self, response: Any, url: str) -> None:
        self._response = response
        self._url = url
        self._done = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._response.content.iter_chunked(_CHUNK):
                yield chunk
        except Exception as exc:
            raise _as_httpx(exc, reading=True) from exc
        self._done = True

    async def aclose(self) -> None:
        if self._done:
            self._response.release()  # read to the end: the connection can be reused
        else:
            self._response.close()  # given up on half-way: the connection is dropped


class AiohttpTransport(httpx2.AsyncBaseTransport):
    """httpx2 requests sent through one aiohttp session (made in the loop that first uses
    it; a new loop gets its own), without aiohttp's own decompression."""

    def __init__(self, read_whole: int = _CHUNK) -> None:
        #: a body of known length up to this is read whole at once (``BoundedTransport``
        #: gives its cap, when smaller: a body announced larger is refused unread)
        self._read_whole = read_whole
        self._session: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ssl: ssl.SSLContext | None = None
        # HTTP(S)_PROXY and NO_PROXY, read once (aiohttp's trust_env reads them, and
        # ~/.netrc, on every request: a fifth of the time of a fast answer)
        self._proxies = urllib.request.getproxies()

    def _session_now(self) -> Any:
        import aiohttp

        loop = asyncio.get_running_loop()
        if self._session is None or self._loop is not loop or self._session.closed:
            connector = aiohttp.TCPConnector(limit=_MAX_CONNECTIONS)
            self._session = aiohttp.ClientSession(connector=connector, auto_decompress=False)
            self._loop = loop
        return self._session

    def _proxy(self, url: httpx2.URL) -> str | None:
        """The proxy the environment names for ``url`` (as the SDKs' own clients use it)."""
        if not self._proxies:
            return None
        proxy = self._proxies.get(url.scheme)
        if proxy is None or urllib.request.proxy_bypass_environment(url.host, self._proxies):
            return None
        return proxy

    def _ssl_context(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = httpx2.create_ssl_context()  # the system's (or certifi's) CAs
        return self._ssl

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        import aiohttp

        limits = request.extensions.get("timeout", {})
        try:
            body: bytes | None = request.content
        except httpx2.RequestNotRead:
            body = await request.aread()
        url = str(request.url)
        # the headers as httpx2's `multi_items` gives them (names in lower case, decoded as
        # httpx2 decodes them), decoded in one pass
        encoding = request.headers.encoding
        headers = [(k.lower().decode(encoding), v.decode(encoding)) for k, v in request.headers.raw]
        try:
            response = await self._session_now().request(
                request.method,
                url,
                headers=headers,
                data=body or None,
                allow_redirects=False,
                proxy=self._proxy(request.url),
                ssl=self._ssl_context() if request.url.scheme == "https" else True,
                timeout=aiohttp.ClientTimeout(
                    total=None,
                    connect=limits.get("pool"),
                    sock_connect=limits.get("connect"),
                    sock_read=limits.get("read"),
                ),
            )
        except Exception as exc:
            raise _as_httpx(exc, reading=False) from exc
        extensions: dict[str, Any] = {"http_version": b"HTTP/1.1"}
        if response.reason:
            extensions["reason_phrase"] = response.reason.encode("latin-1", "replace")
        stream: httpx2.AsyncByteStream
        length = response.content_length
        if length is not None and length <= self._read_whole:
            # a small body of known length (most answers) is read whole at once: cheaper
            # than a stream of one piece through every layer above
            try:
                stream = httpx2.ByteStream(await response.read())
            except Exception as exc:
                response.close()
                raise _as_httpx(exc, reading=True) from exc
            response.release()
        else:
            stream = _AiohttpBody(response, url)
        return httpx2.Response(
            status_code=response.status,
            headers=list(response.raw_headers),
            stream=stream,
            request=request,
            extensions=extensions,
        )

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is None or session.closed:
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:  # a session can only be closed in its own loop
            await session.close()


def _as_httpx(exc: BaseException, *, reading: bool) -> BaseException:
    """aiohttp's error as the httpx2 error the SDKs understand (the cause stays attached,
    for ``connection_failure``)."""
    import aiohttp

    if isinstance(exc, ResponseRejected):
        return exc
    text = str(exc) or type(exc).__name__
    if isinstance(exc, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return httpx2.ReadTimeout(text) if reading else httpx2.ConnectTimeout(text)
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return httpx2.RemoteProtocolError(text)
    if isinstance(exc, aiohttp.ClientPayloadError):
        return httpx2.ReadError(text)
    if isinstance(exc, aiohttp.ClientConnectorError):
        return httpx2.ConnectError(text)
    if isinstance(exc, aiohttp.ClientError | OSError):
        return httpx2.ReadError(text) if reading else httpx2.ConnectError(text)
    return exc


def http_client(max_response_bytes: int, *, use_aiohttp: bool | None = None) -> httpx2.AsyncClient:
    """The HTTP client a provider gives its SDK: bounded bodies (``BoundedTransport``) over
    aiohttp when it is installed (``use_aiohttp``: force one way, for tests)."""
    if use_aiohttp is None:
        use_aiohttp = importlib.util.find_spec("aiohttp") is not None
    inner: httpx2.AsyncBaseTransport
    if use_aiohttp:
        inner = AiohttpTransport(read_whole=min(_CHUNK, max_response_bytes))
    else:
        inner = httpx2.AsyncHTTPTransport(
            limits=httpx2.Limits(max_connections=_MAX_CONNECTIONS, max_keepalive_connections=100)
        )
    return httpx2.AsyncClient(
        transport=BoundedTransport(inner, max_response_bytes),
        # the providers pass their own limit on every request (and bound it themselves)
        timeout=httpx2.Timeout(600.0),
        follow_redirects=True,
    )
