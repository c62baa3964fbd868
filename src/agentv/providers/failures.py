"""Why a request to a model API got no usable answer, in words.

Two kinds: a response agentv refuses to read on (``ResponseRejected``: larger than
``max_response_bytes``, or compressed in a way it does not read), never retried; and a
request that got no HTTP answer at all (``connection_failure``): a refused connection, a
reset, a failed DNS lookup, a failed TLS handshake, a timeout. The SDKs wrap these in their
own exceptions (the OpenAI and Anthropic SDKs call most of them a connect timeout); the
cause stays attached, and is read here. No SDK is imported: exceptions are recognised by
class, name and ``errno``.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import ssl
from dataclasses import dataclass

from agentv.system.process import byte_size


class ResponseRejected(Exception):
    """A response agentv will not read on; never retried (the same request would get the
    same answer)."""


class ResponseTooLarge(ResponseRejected):
    """A body larger than ``max_response_bytes``, as received or once decompressed."""

    def __init__(self, limit: int, decompressed: bool) -> None:
        self.limit = limit
        self.decompressed = decompressed
        what = "decompressed to" if decompressed else "sent"
        super().__init__(
            f"the server {what} more than max_response_bytes ({byte_size(limit)}) and "
            "was cut off; raise the target's max_response_bytes if answers are meant to "
            "be that large"
        )


@dataclass(frozen=True, slots=True)
class ConnectionFailure:
    """Why a request got no HTTP answer, in words, and whether trying again may help."""

    reason: str
    retry: bool = True


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it, outermost first (each once)."""
    seen: list[BaseException] = []
    node: BaseException | None = exc
    while node is not None and all(node is not s for s in seen) and len(seen) < 20:
        seen.append(node)
        for attribute in ("os_error", "certificate_error"):  # where aiohttp keeps the cause
            inner = getattr(node, attribute, None)
            if isinstance(inner, BaseException) and inner is not node.__cause__:
                seen.append(inner)
        node = node.__cause__ or node.__context__
    return seen


def _class_names(exc: BaseException) -> set[str]:
    """The names of ``exc``'s classes (httpx's and aiohttp's errors are recognised by name,
    so that neither needs importing)."""
    return {cls.__name__ for cls in type(exc).__mro__}


def rejected_response(exc: BaseException) -> ResponseRejected | None:
    """The ``ResponseRejected`` behind ``exc``, however the SDK wrapped it (else None)."""
    return next((e for e in _chain(exc) if isinstance(e, ResponseRejected)), None)


def connection_failure(exc: BaseException) -> ConnectionFailure | None:
    """Why ``exc`` (an SDK's or a transport's error, with its causes) means no answer:
    refused, reset, DNS, TLS or a timeout; None when it is none of those."""
    chain = _chain(exc)
    # the SSL module's own errors first (aiohttp's wrappers of them lack the details)
    tls = sorted(
        (e for e in chain if isinstance(e, ssl.SSLError)),
        key=lambda e: getattr(e, "reason", None) is None,
    )
    for e in tls:
        if isinstance(e, ssl.SSLCertVerificationError):
            detail = e.verify_message or getattr(e, "reason", None) or str(e)
            return ConnectionFailure(
                f"TLS handshake failed: the server's certificate was not accepted ({detail})",
                retry=False,
            )
    for e in tls:
        detail = getattr(e, "reason", None) or str(e)
        hint = " (is it an http:// server?)" if "WRONG_VERSION_NUMBER" in str(e) else ""
        return ConnectionFailure(
            f"TLS handshake failed: {str(detail).lower().replace('_', ' ')}{hint}", retry=False
        )
    for e in chain:
        if isinstance(e, socket.gaierror) or type(e).__name__ == "ClientConnectorDNSError":
            code = e.errno if isinstance(e, socket.gaierror) else getattr(e, "errno", None)
            detail = getattr(e, "strerror", None) or str(e)
            # a temporary failure of the resolver may pass; a name that does not exist won't
            return ConnectionFailure(
                f"DNS lookup failed ({detail})", retry=code == socket.EAI_AGAIN
            )
    for e in chain:
        if isinstance(e, ConnectionRefusedError) or getattr(e, "errno", None) == errno.ECONNREFUSED:
            return ConnectionFailure("connection refused (is the server running?)")
    for e in chain:
        name = type(e).__name__
        if (
            isinstance(e, ConnectionResetError | BrokenPipeError)
            or getattr(e, "errno", None) in (errno.ECONNRESET, errno.EPIPE)
            or name in ("ServerDisconnectedError", "RemoteProtocolError")
        ):
            return ConnectionFailure("the connection was reset (the server dropped it unanswered)")
    for e in chain:
        if _class_names(e) & {"ClientPayloadError", "ReadError"}:
            return ConnectionFailure("the connection broke off during the answer")
    for e in chain:
        names = _class_names(e)
        if names & {"ConnectTimeout", "ConnectionTimeoutError", "PoolTimeout"}:
            return ConnectionFailure("connecting timed out")
        if isinstance(e, asyncio.TimeoutError) or names & {
            "TimeoutException",
            "ServerTimeoutError",
        }:
            return ConnectionFailure("the answer timed out")
    for e in chain:
        if isinstance(e, OSError) or _class_names(e) & {"TransportError", "ClientError"}:
            return ConnectionFailure(f"{type(e).__name__}: {e}".rstrip(": "))
    return None
