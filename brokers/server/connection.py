"""One client connection: read frames, dispatch them one at a time, write responses in order.

Owns: the asyncio plumbing around `Dispatcher` — size checks before reading a body, writing
responses (bytes, and file regions with sendfile where the transport allows), closing on protocol
violations. Runs on the event loop; not thread-safe. A bad request closes this connection only.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any

from brokers.server.dispatcher import CloseConnection, Dispatcher, Peer, Reply
from brokers.server.metrics import ServerMetrics
from brokers.server.response import Part, RawResponse
from brokers.wire.framing import FrameLimits, FrameSizeError, frame_size, size_prefix
from brokers.wire.headers import response_header
from brokers.wire.messages import MalformedRequestError

log = logging.getLogger("pier.server")
_WRITE_HIGH_WATER = 4 * 1024 * 1024
_SMALL_REGION = 64 * 1024  # below this a pread copy is cheaper than a sendfile round trip


class _FdFile:
    """The minimal file object `loop.sendfile` needs, over an fd we do not own."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, offset: int, whence: int = 0) -> int:  # sendfile seeks after sending; harmless
        return offset


class Connection:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        dispatcher: Dispatcher,
        limits: FrameLimits,
        peer: Peer,
        *,
        use_sendfile: bool = True,
        metrics: ServerMetrics | None = None,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._dispatcher = dispatcher
        self._limits = limits
        self._peer = peer
        self._use_sendfile = use_sendfile
        self._metrics = metrics
        self.authenticated = (
            True  # plaintext broker listener; the gateway's SASL state machine differs
        )

    async def serve(self) -> None:
        try:
            while True:
                frame = await self._read_frame()
                if frame is None:
                    return
                reply = await self._dispatcher.dispatch(memoryview(frame), self._peer)
                if reply is not None:
                    await self._send(reply)
        except (CloseConnection, MalformedRequestError, FrameSizeError) as exc:
            if self._metrics is not None:
                self._metrics.connections_closed_malformed.inc()
            log.info("event=close_connection peer=%s reason=%r", self._peer.host, str(exc))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception as exc:  # never let one connection take the broker down
            log.error("event=connection_failed peer=%s error=%r", self._peer.host, exc)
        finally:
            self._writer.close()

    async def _read_frame(self) -> bytes | None:
        try:
            prefix = await self._reader.readexactly(4)
        except asyncio.IncompleteReadError:
            return None
        size = frame_size(prefix, self._limits.limit(self.authenticated))
        return await self._reader.readexactly(size)

    async def _send(self, reply: Reply) -> None:
        header = response_header(reply.correlation_id, reply.flexible_header)
        body = reply.body
        if isinstance(body, bytes):
            self._writer.write(size_prefix(len(header) + len(body)) + header + body)
        else:
            await self._send_parts(header, body)
        if self._writer.transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
            await self._writer.drain()

    async def _send_parts(self, header: bytes, body: RawResponse) -> None:
        pending: list[bytes | bytearray | memoryview] = [
            size_prefix(len(header) + body.size),
            header,
        ]
        for part in body.parts:
            if isinstance(part, bytes | bytearray | memoryview):
                pending.append(part)
            elif self._use_sendfile and part.size >= _SMALL_REGION:
                self._writer.writelines(pending)
                pending = []
                await self._sendfile(part)
            else:
                pending.append(part.read())
        self._writer.writelines(pending)

    async def _sendfile(self, region: Part) -> None:
        loop = asyncio.get_running_loop()
        fd, position, size = region.fd, region.position, region.size  # type: ignore[union-attr]
        try:
            file: Any = _FdFile(fd)
            await loop.sendfile(self._writer.transport, file, position, size, fallback=False)
        except (asyncio.SendfileNotAvailableError, NotImplementedError):
            self._use_sendfile = False
            self._writer.write(os.pread(fd, size, position))


async def serve_connection(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    dispatcher: Dispatcher,
    limits: FrameLimits,
    metrics: ServerMetrics | None,
) -> None:
    peername = writer.get_extra_info("peername") or ("?", 0)
    peer = Peer(
        host=str(peername[0]), connection_id=f"{peername[0]}:{peername[1]}-{time.monotonic_ns()}"
    )
    if metrics is not None:
        metrics.connections.inc()
        metrics.connections_created.inc()
    try:
        await Connection(reader, writer, dispatcher, limits, peer, metrics=metrics).serve()
    finally:
        if metrics is not None:
            metrics.connections.dec()
