"""The socket side of one tenant connection: bytes in → frames → the session; answers out.

Owns: the asyncio protocol of an accepted client socket: framing with the current size limit
(512 KiB before authentication, raised at login), pausing and resuming reads (mute, back
pressure), write back pressure (the client not reading its answers pauses reading its requests),
and closing. TCP_NODELAY is set: answers are small and latency-bound. Runs on the event loop;
not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Sequence

from brokers.wire.framing import PRE_AUTH_MAX_REQUEST_BYTES
from gateway.kafka.exchange import Buffer
from gateway.kafka.frames import FrameReader, FrameTooLargeError, write_parts
from gateway.kafka.session import Channel, Session

log = logging.getLogger("pier.gateway.connection")


class ClientConnection(asyncio.Protocol, Channel):
    def __init__(self, make_session: Callable[[ClientConnection, str], Session]) -> None:
        self._make_session = make_session
        self._frames = FrameReader(PRE_AUTH_MAX_REQUEST_BYTES)
        self._transport: asyncio.Transport | None = None
        self._session: Session | None = None
        self._paused = False
        self._write_blocked = False
        self._stopping = False
        self.closed = asyncio.get_event_loop().create_future()

    # -- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername") or ("?", 0)
        self._session = self._make_session(self, str(peer[0]))

    def data_received(self, data: bytes) -> None:
        session = self._session
        if session is None:
            return
        try:
            for frame in self._frames.feed(data):
                session.on_frame(frame)
        except FrameTooLargeError as exc:
            session.refuse(f"frame: {exc}")

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        if self._session is not None:
            self._session.connection_lost()
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        self._write_blocked = True
        self._apply_pause()

    def resume_writing(self) -> None:
        self._write_blocked = False
        self._apply_pause()

    # -- Channel -------------------------------------------------------------------------------
    def write(self, parts: Sequence[Buffer]) -> None:
        if self._transport is not None and not self._transport.is_closing():
            write_parts(self._transport, parts)

    def pause(self) -> None:
        self._paused = True
        self._apply_pause()

    def resume(self) -> None:
        self._paused = False
        self._apply_pause()

    def set_frame_limit(self, limit: int) -> None:
        self._frames.limit = limit

    def close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    def describe(self) -> str:
        reading = self._transport.is_reading() if self._transport is not None else None
        session = self._session.describe() if self._session is not None else "-"
        return (
            f"reading={reading} paused={self._paused} write_blocked={self._write_blocked}"
            f" buffered={self._frames.buffered} {session}"
        )

    @property
    def idle(self) -> bool:
        """No request of this connection is waiting for its answer."""
        return self._session is None or self._session.idle

    def stop_reading(self) -> None:
        """Shutdown: take no new request (what was read is still answered)."""
        self._stopping = True
        self._apply_pause()

    def _apply_pause(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        if self._paused or self._write_blocked or self._stopping:
            if transport.is_reading():
                transport.pause_reading()
        elif not transport.is_reading():
            transport.resume_reading()
