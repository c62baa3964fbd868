"""Noticing that the Ray cluster is gone, while agentv can still say so.

When the raylet of the driver's node dies (on a local Ray, or the head when the driver runs
there), Ray notices only after its health checks time out, then tries to recover the run's
objects from a store that is gone, and ends the driver process on the spot: no exception,
no summary, only Ray's own messages. The watch looks for itself instead, every
``CHECK_EVERY_S``: it connects to this node's raylet and to the cluster's head (GCS). A
raylet that refuses ``RAYLET_MISSES`` times in a row, or a head that stays silent for
``HEAD_GRACE_S`` (Ray gives up on it after 60 s), means the cluster is lost: ``lost`` says
why and ``gone`` is done, and the executor stops the run, writes what finished and sums it
up (``ClusterLostError``).
"""

from __future__ import annotations

import asyncio
import contextlib
import time

#: seconds between two looks at the cluster
CHECK_EVERY_S = 0.5
#: refused connections in a row after which this node's raylet counts as gone
RAYLET_MISSES = 3
#: seconds the head may stay silent before the cluster counts as lost
HEAD_GRACE_S = 30.0
#: how long one connection attempt may take
CONNECT_TIMEOUT_S = 2.0


class ClusterWatch:
    """Watches this node's raylet and the cluster's head while a run uses them."""

    def __init__(self) -> None:
        self.lost: str | None = None  # why the cluster is gone, once it is
        self.gone: asyncio.Future[None] | None = None  # done when it is
        self._task: asyncio.Task[None] | None = None
        self._raylet: tuple[str, int] | None = None
        self._head: tuple[str, int] | None = None

    def start(self) -> None:
        """Start watching (Ray is initialised: its addresses are known)."""
        import ray

        context = ray.get_runtime_context()
        node = context.get_node_id()
        for info in ray.nodes():
            if info.get("NodeID") == node:
                self._raylet = (str(info["NodeManagerAddress"]), int(info["NodeManagerPort"]))
        host, _, port = str(context.gcs_address).rpartition(":")
        if host and port.isdigit():
            self._head = (host, int(port))
        self.gone = asyncio.get_running_loop().create_future()
        self._task = asyncio.ensure_future(self._watch())

    async def stop(self) -> None:
        """Stop watching."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _watch(self) -> None:
        misses = 0
        silent_since: float | None = None
        while True:
            await asyncio.sleep(CHECK_EVERY_S)
            if self._raylet is not None:
                misses = 0 if await _answers(*self._raylet) else misses + 1
                if misses >= RAYLET_MISSES:
                    host, port = self._raylet
                    return self._lose(f"the raylet of this node ({host}:{port}) is gone")
            if self._head is not None:
                if await _answers(*self._head):
                    silent_since = None
                elif silent_since is None:
                    silent_since = time.monotonic()
                elif time.monotonic() - silent_since > HEAD_GRACE_S:
                    host, port = self._head
                    return self._lose(
                        f"the cluster's head ({host}:{port}) has not answered for "
                        f"{HEAD_GRACE_S:g} s"
                    )

    def _lose(self, why: str) -> None:
        self.lost = why
        if self.gone is not None and not self.gone.done():
            self.gone.set_result(None)


async def _answers(host: str, port: int) -> bool:
    """Whether something accepts a connection at ``host:port``."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True
