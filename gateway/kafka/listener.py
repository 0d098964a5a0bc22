"""The gateway's Kafka listeners: the bootstrap port, and one port per broker of the fleet.

Owns: the asyncio servers (plain or TLS; `SO_REUSEPORT` only when asked, so that several gateway
processes of one host share its ports on purpose and never by accident), opening a port when a broker appears, and draining on stop: stop accepting, stop reading,
let the requests already read be answered (bounded), then close every connection. A client that
dials the bootstrap port is paired with any live broker; one that dials a broker's port with
that broker. Every connection is admitted and watched by one `ConnectionGuard` (per-address and
pre-login caps, byte budgets, deadlines), whose sweep runs while the listeners do. Runs on the
event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import Callable

from gateway.kafka.client_connection import ClientConnection
from gateway.kafka.connection_guard import ConnectionGuard
from gateway.kafka.session import Session

log = logging.getLogger("pier.gateway.listener")
SessionFactory = Callable[[ClientConnection, str, int | None], Session]


class Listeners:
    def __init__(
        self,
        host: str,
        bootstrap_port: int,
        port_for: Callable[[int], int],
        make_session: SessionFactory,
        *,
        tls: ssl.SSLContext | None = None,
        reuse_port: bool = False,
        guard: ConnectionGuard | None = None,
    ) -> None:
        self._host = host
        self._bootstrap_port = bootstrap_port
        self._port_for = port_for
        self._make_session = make_session
        self._tls = tls
        self._reuse_port = reuse_port
        self._servers: dict[int | None, asyncio.Server] = {}
        self._connections: set[ClientConnection] = set()
        self.guard = guard if guard is not None else ConnectionGuard()

    @property
    def bootstrap_port(self) -> int:
        server = self._servers.get(None)
        if server is None:
            return self._bootstrap_port
        return int(server.sockets[0].getsockname()[1])

    async def start(self, node_ids: set[int]) -> None:
        await self._open(None, self._bootstrap_port)
        await self.ensure(node_ids)
        self.guard.start()

    async def ensure(self, node_ids: set[int]) -> None:
        """Open a port for every broker id that has none yet (ports of gone brokers stay open:
        their clients are refused at login until the broker is back)."""
        for node_id in sorted(node_ids - {k for k in self._servers if k is not None}):
            await self._open(node_id, self._port_for(node_id))

    async def _open(self, node_id: int | None, port: int) -> None:
        def protocol() -> ClientConnection:
            connection = ClientConnection(
                lambda conn, peer: self._make_session(conn, peer, node_id), self.guard
            )
            self._connections.add(connection)
            connection.closed.add_done_callback(lambda _f: self._connections.discard(connection))
            return connection

        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            protocol,
            self._host,
            port,
            ssl=self._tls,
            reuse_address=True,
            reuse_port=self._reuse_port,
        )
        self._servers[node_id] = server
        log.info("event=listening host=%s port=%s broker=%s", self._host, port, node_id)

    async def stop(self, drain_s: float = 5.0) -> None:
        """Stop accepting; let requests already read be answered (up to `drain_s`); close."""
        for server in self._servers.values():
            server.close()
        await self.guard.stop()
        for connection in list(self._connections):
            connection.stop_reading()
        deadline = asyncio.get_running_loop().time() + drain_s
        while any(not c.idle for c in self._connections):
            if asyncio.get_running_loop().time() >= deadline:
                break
            await asyncio.sleep(0.02)
        for connection in list(self._connections):
            connection.close()
        for server in self._servers.values():
            await server.wait_closed()
        self._servers.clear()

    def describe(self) -> list[str]:
        """One line per live connection (for a SIGUSR1 dump)."""
        return [connection.describe() for connection in self._connections]

    def connection_count(self) -> int:
        return len(self._connections)
