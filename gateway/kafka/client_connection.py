"""The socket side of one tenant connection: bytes in → frames → the session; answers out.

Owns: the asyncio protocol of an accepted client socket (a `BufferedProtocol`: frames are read
straight into their own buffers, `gateway.kafka.frames`): admission by the `ConnectionGuard` (the
per-address and pre-login caps: over a cap the socket is closed at once), framing with the current
size limit (512 KiB before login; after it `ConnectionLimits.frame_limit` of the tenant's current
`max_request_bytes`), charging each frame's announced size to a byte budget as soon as its prefix
is read (before login the gateway-wide pre-login pool: full → closed at once; after login the
tenant's `queued.max.request.bytes` pool: full → this connection stops reading until the tenant's
answered requests give bytes back; a Fetch's answer holds at most half of what is free outside
a quarter kept for requests, `answer_share`), pausing and resuming reads (mute, back pressure, the budget),
write back pressure (the client not reading its answers pauses reading its requests and its
answers from the broker), the
deadlines the guard's sweep asks about (`overdue`), and closing. TCP_NODELAY is set: answers are
small and latency-bound. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Callable, Iterator, Sequence
from typing import cast

from gateway.kafka.byte_budget import Charge, Waiter
from gateway.kafka.connection_guard import ConnectionGuard
from gateway.kafka.exchange import Buffer
from gateway.kafka.frames import FrameReader, FrameTooLargeError, plain_fd, write_parts
from gateway.kafka.session import Channel, Session

log = logging.getLogger("pier.gateway.connection")
# Answers buffered for a client before it counts as not reading (its requests are then not read,
# nor its answers from the broker): above one large fetch answer, so streaming is not stalled.
WRITE_BUFFER_HIGH = 1024 * 1024
# A tenant's answers on their way (Fetch) never hold the last quarter of its budget: requests
# always find room, so one consumer's long poll parked at the broker cannot stop the tenant's
# other connections from being read (docs/gateway.md, "Limits held in the tenant store").
REQUEST_RESERVE_DIVISOR = 4
# An answer holds at most half of what the other answers leave: a second consumer of the tenant
# still gets answers of megabytes while the first one's poll is parked.
ANSWER_SHARE_DIVISOR = 2


def answer_share(capacity: int, used: int) -> int:
    """What one answer may hold of a budget of `capacity` with `used` taken: half of what is free
    outside the requests' reserve (0: nothing; the Fetch then asks for the 64 KiB floor)."""
    free = capacity - capacity // REQUEST_RESERVE_DIVISOR - used
    return max(free, 0) // ANSWER_SHARE_DIVISOR


class _PreLoginBufferFull(ConnectionError):
    """The gateway-wide pool of bytes read before login has no room for this frame."""


class ClientConnection(asyncio.BufferedProtocol, Channel):
    def __init__(
        self,
        make_session: Callable[[ClientConnection, str], Session],
        guard: ConnectionGuard | None = None,
    ) -> None:
        self._make_session = make_session
        self._guard = guard if guard is not None else ConnectionGuard()
        self._frames = FrameReader(self._guard.limits.pre_auth_max_request_bytes, self._admit)
        self._transport: asyncio.Transport | None = None
        self._session: Session | None = None
        self._peer = "?"
        self._tenant_id: str | None = None  # set at login: charges go to the tenant's budget
        self._charge: Charge | None = None  # the announced size of the frame being read
        self._waiter: Waiter | None = None  # waiting for the tenant's budget
        now = self._guard.clock()
        self._accepted_at = self._last_read = self._last_write = self._progress_at = now
        self._paused = False
        self._write_blocked = False
        self._stopping = False
        self._gone = False
        self._closing_at: float | None = None  # closed by the session: flushing its last answers
        self._blocked_at = 0.0  # when the client last stopped reading its answers
        self.closed = asyncio.get_event_loop().create_future()

    # -- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's: no asyncio.Transport
        self._transport = transport
        peer = transport.get_extra_info("peername") or ("?", 0)
        self._peer = str(peer[0])
        refused = self._guard.admit(self, self._peer)
        if refused is not None:
            self._guard.refuse_at_accept(self._peer, refused)
            transport.abort()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH)
        self._session = self._make_session(self, self._peer)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._received(lambda: self._frames.updated(nbytes))

    def data_received(self, data: bytes) -> None:
        """Bytes handed over whole (the unit tests drive the protocol this way)."""
        self._received(lambda: self._frames.feed(data))

    def _received(self, frames: Callable[[], Iterator[memoryview]]) -> None:
        self._last_read = self._progress_at = self._guard.clock()
        if self._session is None or self._gone:
            return
        self._frames.limit = self._frame_limit()
        self._deliver(frames)

    def eof_received(self) -> bool | None:
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._gone = True
        self._guard.gone(self, self._peer)
        self._drop_charges()
        if self._session is not None:
            self._session.connection_lost()
        if not self.closed.done():
            self.closed.set_result(None)

    def pause_writing(self) -> None:
        self._write_blocked = True
        self._blocked_at = self._guard.clock()
        self._apply_pause()
        if self._session is not None:
            self._session.client_blocked(True)

    def resume_writing(self) -> None:
        self._write_blocked = False
        self._apply_pause()
        if self._session is not None:
            self._session.client_blocked(False)

    # -- frames and their budget ---------------------------------------------------------------
    def _deliver(self, frames: Callable[[], Iterator[memoryview]]) -> None:
        session = self._session
        assert session is not None
        try:
            for frame in frames():
                charge, self._charge = self._charge, None
                session.on_frame(frame, charge)
                if self._gone:
                    return
        except FrameTooLargeError as exc:
            self._guard.count_close("frame_too_large")
            session.refuse(f"frame: {exc}")
        except _PreLoginBufferFull as exc:
            self.close_for("unauthenticated_buffer_full", str(exc))

    def _frame_limit(self) -> int:
        limits = self._guard.limits
        tenant = self._session.tenant if self._session is not None else None
        if self._tenant_id is None or tenant is None:
            return limits.pre_auth_max_request_bytes
        return limits.frame_limit(tenant.tenant.limits.max_request_bytes)

    def _admit(self, size: int) -> bool:
        """Charge a frame's announced size before its body is read; False: wait for the budget."""
        if self._tenant_id is None:
            charge = self._guard.unauthenticated_bytes.try_take(size)
            if charge is None:
                raise _PreLoginBufferFull(f"no room for a frame of {size} bytes before login")
            self._charge = charge
            return True
        budget = self._guard.tenant_budget(self._tenant_id)
        charge = budget.try_take(size)
        if charge is None:
            self._waiter = budget.wait(size, self._granted)
            self._apply_pause()
            return False
        self._charge = charge
        return True

    def _granted(self, charge: Charge) -> None:
        self._waiter = None
        if self._gone or self._session is None:
            charge.release()
            return
        self._charge = charge
        self._progress_at = self._guard.clock()
        self._deliver(self._frames.admitted)
        self._apply_pause()

    def _drop_charges(self) -> None:
        self._frames.clear()
        if self._charge is not None:
            self._charge.release()
            self._charge = None
        if self._waiter is not None:
            self._waiter.cancel()
            self._waiter = None

    # -- deadlines (asked by the guard's sweep) ------------------------------------------------
    def overdue(self, now: float) -> str | None:
        limits = self._guard.limits
        if self._gone or self._transport is None:
            return None
        if self._closing_at is not None:  # a client that never reads its last answers
            late = now - self._closing_at >= limits.frame_read_timeout_s
            return "close_timeout" if late else None
        if self._tenant_id is None and now - self._accepted_at >= limits.authentication_timeout_s:
            return "authentication_timeout"
        stalled = now - self._progress_at >= limits.frame_read_timeout_s
        if self._frames.partial and self._transport.is_reading() and stalled:
            return "frame_read_timeout"
        quiet = now - max(self._last_read, self._last_write) >= limits.connections_max_idle_s
        if quiet and not self._frames.partial and self.idle:
            return "idle"
        if self._write_blocked and now - self._blocked_at >= limits.connections_max_idle_s:
            return "idle"  # its answers unread all this time: no traffic either (as Kafka sees it)
        return None

    def close_for(self, reason: str, detail: str) -> None:
        """Close at once (no flushing to a client that may not read) with a log line and a count."""
        if self._gone:
            return
        self._guard.count_close(reason)
        tenant = self._tenant_id or ""
        log.info(
            "event=connection_closed reason=%s peer=%s tenant=%s detail=%r",
            reason,
            self._peer,
            tenant,
            detail,
        )
        if self._session is not None:
            self._session.close(reason)
        self._drop_charges()
        if self._transport is not None:
            self._transport.abort()

    # -- Channel -------------------------------------------------------------------------------
    def write(self, parts: Sequence[Buffer]) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._last_write = self._guard.clock()
            write_parts(self._transport, parts)

    def splice_fd(self) -> int | None:
        """The socket's descriptor when bytes may go to it directly now (plain TCP, open, nothing
        queued in the transport): a streamed Fetch answer is then spliced into it."""
        if self._transport is None or self._gone:
            return None
        fd = plain_fd(self._transport)
        if fd is not None:
            self._last_write = self._guard.clock()
        return fd

    def pause(self) -> None:
        self._paused = True
        self._apply_pause()

    def resume(self) -> None:
        self._paused = False
        self._apply_pause()

    def authenticated(self, tenant_id: str) -> None:
        self._tenant_id = tenant_id
        self._guard.authenticated(self)

    def take_answer_bytes(self, wanted: int) -> Charge | None:
        if self._tenant_id is None:
            return None
        budget = self._guard.tenant_budget(self._tenant_id)
        return budget.take_up_to(min(wanted, answer_share(budget.capacity, budget.used)))

    def close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._closing_at = self._guard.clock()
            self._transport.close()

    def describe(self) -> str:
        reading = self._transport.is_reading() if self._transport is not None else None
        session = self._session.describe() if self._session is not None else "-"
        return (
            f"peer={self._peer} reading={reading} paused={self._paused}"
            f" write_blocked={self._write_blocked} budget_wait={self._waiter is not None}"
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
        waiting = self._waiter is not None
        if self._paused or self._write_blocked or self._stopping or waiting:
            if transport.is_reading():
                transport.pause_reading()
        elif not transport.is_reading():
            self._progress_at = self._guard.clock()  # time paused by us is not a stalled frame
            transport.resume_reading()
