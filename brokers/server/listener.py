"""The TCP listener: accepts connections and runs each one as a task.

Owns: the asyncio server and the set of live connection tasks, so shutdown can close them all.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import socket

from brokers.server.connection import serve_connection
from brokers.server.dispatcher import Dispatcher
from brokers.server.metrics import ServerMetrics
from brokers.wire.framing import FrameLimits


class Listener:
    def __init__(
        self,
        dispatcher: Dispatcher,
        host: str,
        port: int,
        *,
        limits: FrameLimits | None = None,
        metrics: ServerMetrics | None = None,
    ) -> None:
        self._dispatcher = dispatcher
        self._host = host
        self._port = port
        self._limits = limits or FrameLimits()
        self._metrics = metrics
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        sockname = self._server.sockets[0].getsockname()
        return int(sockname[1])

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._accept, self._host, self._port, reuse_address=True, limit=1024 * 1024
        )

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await serve_connection(reader, writer, self._dispatcher, self._limits, self._metrics)
        except asyncio.CancelledError:
            writer.close()  # shutdown: the connection ends here, quietly
        finally:
            self._tasks.discard(task)

    async def stop(self) -> None:
        """Stop accepting, then close every live connection."""
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            await self._server.wait_closed()
