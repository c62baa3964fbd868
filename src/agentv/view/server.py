"""Serving the workbench: the address bound before anything is served (so the URL is
known and a port taken is said at once), then uvicorn on that socket.

127.0.0.1 by default. Another address exposes every run to whoever can reach it, so it is
served only with an access token (given, or generated here and printed in the URL); the
token is then asked of every request (docs/run-history.md, "Security").
"""

from __future__ import annotations

import ipaddress
import secrets
import socket
from dataclasses import dataclass, field
from pathlib import Path

from agentv.errors import SetupError
from agentv.store import RunStore
from agentv.view.app import Settings, make_app

LOOPBACK = "127.0.0.1"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is an address of this machine only (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass
class Workbench:
    """A workbench bound to its address, ready to serve: ``url`` (with the token when one
    is needed), ``store``, ``token_needed``, ``reviewer``; ``serve()`` blocks until
    Ctrl-C or SIGTERM."""

    url: str
    store: Path
    token_needed: bool
    reviewer: str | None
    settings: Settings = field(repr=False)
    sock: socket.socket = field(repr=False)

    @classmethod
    def bind(
        cls,
        store: Path,
        *,
        host: str = LOOPBACK,
        port: int = 0,
        token: str | None = None,
        reviewer: str | None = None,
        cwd: Path | None = None,
    ) -> Workbench:
        """Open the store and bind ``host``:``port`` (0: a free port)."""
        needed = not is_loopback(host)
        if needed and not token:
            token = secrets.token_urlsafe(24)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(128)
        except OSError as exc:
            sock.close()
            raise SetupError(
                f"cannot listen on {host}:{port}: {exc.strerror or exc}; give another --port "
                "(0 takes a free one)"
            ) from None
        bound = sock.getsockname()[1]
        shown = f"[{host}]" if family == socket.AF_INET6 else host
        origin = f"http://{shown}:{bound}"
        RunStore(store).close()  # created (and migrated) before the first page asks
        settings = Settings(
            store=store,
            origin=origin,
            hosts=_hosts(host, bound) if not needed else None,
            token=token if needed else None,
            csrf=secrets.token_urlsafe(32),
            reviewer=reviewer,
            cwd=cwd or Path.cwd(),
        )
        url = origin + "/" + (f"?token={token}" if needed else "")
        return cls(url, store, needed, reviewer, settings, sock)

    def serve(self) -> None:
        """Serve until Ctrl-C or SIGTERM (uvicorn's own handling of both)."""
        import uvicorn

        config = uvicorn.Config(
            make_app(self.settings),
            log_level="warning",
            access_log=False,
            proxy_headers=False,
            server_header=False,
            lifespan="on",
        )
        try:
            uvicorn.Server(config).run(sockets=[self.sock])
        finally:
            self.sock.close()


def _hosts(host: str, port: int) -> frozenset[str]:
    """The ``Host`` headers a request on the loopback may carry: the address bound,
    ``localhost`` and ``127.0.0.1``, with the port. Any other is refused: a page of another
    site that made its own name point here (DNS rebinding) cannot read the workbench. (On
    another address the token guards every request instead.)"""
    names = {host, f"[{host}]"} if ":" in host else {host}
    if is_loopback(host):
        names |= {"localhost", LOOPBACK}
    return frozenset(f"{name}:{port}" for name in names)
