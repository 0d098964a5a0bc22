"""The TCP listener: accepts connections, runs each one as a task, closes the idle ones.

Owns: the listening sockets and their accept loops (`accept.py`: back off on EMFILE, never spin),
the set of live connections (so shutdown can close them all), the request memory they share
(`queued.max.request.bytes`, Kafka's semantics: ≤ 0 unbounded), and the idle check
(`connections.max.idle.ms`, Kafka's semantics: negative never): every `idle_check_interval` it
closes each connection that has waited on its client — silent, stalled in a partial frame, or not
reading its responses — for longer than the limit; the connection caps (`max.connections`,
`max.connections.per.ip`: `accept.ConnectionQuotas`; a connection is counted from its accept
to its task's end); and the event loop's lag probe (`loop_health.LoopLagProbe`) while it listens. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable

from brokers.server.accept import (
    AcceptBackoff,
    ConnectionQuotas,
    LogLimiter,
    accept_forever,
    bind_listening_sockets,
    peer_address,
)
from brokers.server.connection import Connection
from brokers.server.dispatcher import Dispatcher
from brokers.server.frame_stream import accept
from brokers.server.loop_health import LoopLagProbe
from brokers.server.metrics import ServerMetrics
from brokers.server.request_memory import RequestMemory
from brokers.wire.framing import FrameLimits

log = logging.getLogger("pier.server")
DEFAULT_CONNECTIONS_MAX_IDLE_MS = 600_000  # Kafka's connections.max.idle.ms default


class Listener:
    def __init__(
        self,
        dispatcher: Dispatcher,
        host: str,
        port: int,
        *,
        limits: FrameLimits | None = None,
        metrics: ServerMetrics | None = None,
        connections_max_idle_ms: int = DEFAULT_CONNECTIONS_MAX_IDLE_MS,
        queued_max_request_bytes: int = -1,
        quotas: ConnectionQuotas | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._dispatcher = dispatcher
        self._host = host
        self._port = port
        self._limits = limits or FrameLimits()
        self._metrics = metrics
        self._idle_ms = connections_max_idle_ms
        self._clock = clock
        self.memory = RequestMemory(
            queued_max_request_bytes if queued_max_request_bytes > 0 else None
        )
        if metrics is not None:
            metrics.memory_pool_used.set_function(lambda: self.memory.used)
        self._sockets: list[socket.socket] = []
        self._jobs: list[asyncio.Task[None]] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.connections: set[Connection] = set()
        self.quotas = quotas or ConnectionQuotas()
        self._room = asyncio.Event()  # set when a connection ends: the accept loops re-check
        self._refusals = LogLimiter(clock)
        self._blocks = LogLimiter(clock)
        self.loop_lag = LoopLagProbe(metrics.loop_lag if metrics is not None else None)

    @property
    def port(self) -> int:
        assert self._sockets
        return int(self._sockets[0].getsockname()[1])

    @property
    def idle_check_interval(self) -> float:
        """Seconds between idle checks: a tenth of the limit, within [50 ms, 10 s]."""
        return min(10.0, max(0.05, self._idle_ms / 10_000))

    async def start(self) -> None:
        self._sockets = bind_listening_sockets(self._host, self._port)
        for sock in self._sockets:
            backoff = AcceptBackoff(self._clock)
            accepting = accept_forever(
                sock, self.adopt, backoff, self._count_accept_error, self.wait_for_room
            )
            self._jobs.append(asyncio.create_task(accepting))
        if self._idle_ms >= 0:
            self._jobs.append(asyncio.create_task(self._check_idle_forever()))
        self.loop_lag.start()

    def close_idle_connections(self) -> int:
        """Close every connection that has waited on its client over the limit; how many."""
        now = self._clock()
        closed = 0
        for connection in list(self.connections):
            idle_s = connection.idle_for(now)
            if idle_s * 1000 <= self._idle_ms:
                continue
            read, size = connection.frame_progress
            stalled = f"a {size}-byte request stalled after {read} bytes" if size else "idle"
            log.info(
                "event=close_connection peer=%s reason=%r",
                connection.peer.host,
                f"{stalled} for {round(idle_s * 1000)} ms "
                f"(connections.max.idle.ms={self._idle_ms})",
            )
            connection.close()
            self.connections.discard(connection)
            closed += 1
        if closed and self._metrics is not None:
            self._metrics.connections_closed_idle.inc(closed)
        return closed

    async def stop(self) -> None:
        """Stop accepting, then close every live connection."""
        await self.loop_lag.stop()
        for job in self._jobs:
            job.cancel()
        for job in self._jobs:
            with contextlib.suppress(asyncio.CancelledError):
                await job
        self._jobs.clear()
        for sock in self._sockets:
            sock.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def adopt(self, sock: socket.socket) -> None:
        """Serve a connected socket (one the accept loop took, or a test's socketpair end),
        unless its address is at `max.connections.per.ip`: then close it before reading."""
        try:
            address = peer_address(sock)
        except OSError:  # the client reset the connection before we looked
            sock.close()
            return
        if not self.quotas.admit(address):
            self._refuse(sock, address)
            return
        task = asyncio.create_task(self._serve(sock))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(lambda _: self._release(address))

    async def wait_for_room(self) -> None:
        """Return once fewer than `max.connections` are served (at once if so already)."""
        if not self.quotas.full:
            return
        started = self._clock()
        waits = self._blocks.event()
        if waits is not None:
            log.warning(
                "event=accept_blocked max_connections=%d connections=%d waits=%d reason=%r",
                self.quotas.max_connections, self.quotas.total, waits,
                "at max.connections; new clients wait in the listen backlog until one closes",
            )  # fmt: skip
        while self.quotas.full:
            self._room.clear()
            await self._room.wait()
        if self._metrics is not None:
            self._metrics.acceptor_blocked_seconds.inc(max(0.0, self._clock() - started))

    def _release(self, address: str) -> None:
        self.quotas.release(address)
        self._room.set()

    def _refuse(self, sock: socket.socket, address: str) -> None:
        """Counted and logged before the close: whoever sees the close sees them too."""
        if self._metrics is not None:
            self._metrics.connections_refused.labels("max.connections.per.ip").inc()
        refused = self._refusals.event()
        if refused is not None:
            log.info(
                "event=connection_refused peer=%s reason=%r refused=%d",
                address,
                f"address already has max.connections.per.ip={self.quotas.limit(address)} "
                "connections",
                refused,
            )
        sock.close()

    async def _serve(self, sock: socket.socket) -> None:
        try:
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            frames, writer = await accept(sock, self._limits.max_request_bytes, self.memory)
        except Exception as exc:  # the client left already, or the loop cannot watch the socket
            log.info("event=connection_setup_failed error=%r", str(exc))
            sock.close()
            return
        connection = Connection.accepted(
            frames, writer, self._dispatcher, clock=self._clock, metrics=self._metrics
        )
        self.connections.add(connection)
        try:
            await connection.serve()
        except asyncio.CancelledError:
            writer.close()  # shutdown: the connection ends here, quietly
        finally:
            self.connections.discard(connection)

    async def _check_idle_forever(self) -> None:
        while True:
            await asyncio.sleep(self.idle_check_interval)
            self.close_idle_connections()

    def _count_accept_error(self, errno_name: str) -> None:
        if self._metrics is not None:
            self._metrics.accept_errors.labels(errno_name).inc()
