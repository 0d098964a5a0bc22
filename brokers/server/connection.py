"""One client connection: read frames, dispatch them one at a time, write responses in order.

Owns: the asyncio plumbing around `Dispatcher` — size checks before reading a body, the request
memory a frame holds (`queued.max.request.bytes`: allocated in full once the size prefix is read,
released when the request has been processed; while the pool is exhausted the connection is muted,
its transport not reading), how long the connection has been waiting on its client (read by the
listener's idle check, `connections.max.idle.ms`: a connection that sends nothing, or stalls in
the middle of a frame, or does not read its responses, counts as idle; one waiting on the broker —
dispatching, or muted — does not), writing responses (bytes, and file regions with sendfile where
the transport allows; a bytes response is held back while the client's next request is already
buffered in full, and the held ones leave in one write after the last of them — one send and one
wake-up of the client for a pipelined run instead of one each, which a starved loop pays for —
with a flush scheduled for the loop's next turn in case a request parks meanwhile), closing on
protocol violations (and at the client's end the socket closes only once its last answers have
left: until then the listener keeps the connection, so the idle check still ends a client that
never reads them; neither a request nor its answer is kept past its turn, so a sent fetch
region lets go of its segment file at once), and answering an HTTP request sent to this
port with a plain 400 that says what the port is (after every answer to the Kafka requests
before it, held-back ones included). Runs on the event loop; not thread-safe. A bad
request closes this connection only.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from brokers.server.answer_writer import AnswerWriter, Outbox
from brokers.server.dispatcher import CloseConnection, Dispatcher, Peer, Reply
from brokers.server.frame_stream import FrameStream
from brokers.server.metrics import ServerMetrics
from brokers.server.response import FileSegment, Part, RawResponse
from brokers.server.transport_sendfile import send_region
from brokers.wire.framing import (
    FrameSizeError,
    NotKafkaProtocolError,
    size_prefix,
)
from brokers.wire.headers import response_header
from brokers.wire.messages import MalformedRequestError

log = logging.getLogger("pier.server")
_WRITE_HIGH_WATER = 4 * 1024 * 1024
_SMALL_REGION = 64 * 1024  # below this a pread copy is cheaper than a sendfile round trip
_HTTP_LINGER_S = 1.0  # how long an HTTP client gets to read the 400 before the socket closes
_HELD_BYTES = 64 * 1024  # held-back responses above this leave at once
_WRITE_LOW_WATER = 1024 * 1024  # a connection held at the high water reads again below this
# "1": the answers' writes on the writer thread (answer_writer). Off by default: at OMB's fixed
# rate beside 32 client processes on 2 cores it lengthened the tail (docs/benchmarks.md, "Answers
# off the loop"); the switch stays for a machine where the broker has cores of its own.
_WRITER_THREAD = os.environ.get("PIER_ANSWER_WRITER_THREAD", "0") == "1"


class Connection:
    def __init__(
        self,
        frames: FrameStream,
        writer: asyncio.StreamWriter,
        dispatcher: Dispatcher,
        peer: Peer,
        *,
        clock: Callable[[], float] = time.monotonic,
        use_sendfile: bool = True,
        metrics: ServerMetrics | None = None,
        answers: AnswerWriter | None = None,
    ) -> None:
        self._frames = frames
        self._writer = writer
        self._dispatcher = dispatcher
        self.peer = peer
        self._clock = clock
        self._use_sendfile = use_sendfile
        self._metrics = metrics
        self._waiting_since: float | None = clock()  # waiting on the client since; None: on us
        self._held = 0  # request memory held by the frame being processed
        frames.on_progress = self._progressed
        self._held_back: list[bytes] = []  # responses waiting for the pipelined run's last one
        self._held_back_bytes = 0
        self._flush_scheduled = False
        self._answers = answers
        self._outbox: Outbox | None = None  # set in `serve` when answers go via the writer thread
        self._finishing: Outbox | None = None  # the outbox `_end_answers` waits on, for `close`
        self.ending = False  # the client is done (EOF, error): its last answers are leaving
        self._closed: asyncio.Future[None] | None = None  # done at `close`, for a waiting send

    @classmethod
    def accepted(
        cls,
        frames: FrameStream,
        writer: asyncio.StreamWriter,
        dispatcher: Dispatcher,
        **options: Any,
    ) -> Connection:
        """A connection for a socket the listener just accepted, named after its peer."""
        peername = writer.get_extra_info("peername") or ("?", 0)
        connection_id = f"{peername[0]}:{peername[1]}-{time.monotonic_ns()}"
        peer = Peer(host=str(peername[0]), connection_id=connection_id)
        return cls(frames, writer, dispatcher, peer, **options)

    @property
    def muted(self) -> bool:
        """Not reading: waiting for request memory."""
        return self._frames.muted

    @property
    def frame_progress(self) -> tuple[int, int]:
        """(bytes read, size) of a partly read request; (0, 0) between requests."""
        return self._frames.progress

    def idle_for(self, now: float) -> float:
        """Seconds this connection has waited on its client (0 while it waits on the broker)."""
        if self._waiting_since is None or self._frames.muted:
            return 0.0
        return now - self._waiting_since

    def _progressed(self) -> None:
        if self._waiting_since is not None:
            self._waiting_since = self._clock()  # a client still sending is not idle

    def close(self) -> None:
        """Close the socket, dropping unsent answers; `serve` then ends quietly (the listener's
        idle check)."""
        for outbox in (self._outbox, self._finishing):
            if outbox is not None:
                outbox.abort()
        if self._closed is not None and not self._closed.done():
            self._closed.set_result(None)  # a send waiting for a writable socket ends now
        self._writer.transport.abort()  # close() would wait for a client that reads nothing

    async def serve(self) -> None:
        if self._metrics is not None:
            self._metrics.connections.inc()
            self._metrics.connections_created.inc()
        self._outbox = self._open_outbox()
        cancelled = False
        try:
            await self._serve_frames()
        except asyncio.CancelledError:
            cancelled = True
            raise
        except NotKafkaProtocolError as exc:
            self._count_malformed()
            log.info("event=close_connection peer=%s reason=%r", self.peer.host, str(exc))
            if exc.protocol == "HTTP":
                await self._answer_http(str(exc))
        except (CloseConnection, MalformedRequestError, FrameSizeError) as exc:
            self._count_malformed()
            log.info("event=close_connection peer=%s reason=%r", self.peer.host, str(exc))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception as exc:  # never let one connection take the broker down
            log.error("event=connection_failed peer=%s error=%r", self.peer.host, exc)
        finally:
            self.ending = True
            self._release()
            self._frames.close()  # the request memory of requests read ahead goes back too
            with contextlib.suppress(ConnectionError, RuntimeError):
                self._flush()  # answers to the requests before a bad one still go out
            try:
                await self._end_answers(cancelled)
                await self._close_transport(cancelled)
            finally:
                if self._metrics is not None:
                    self._metrics.connections.dec()

    async def _close_transport(self, cancelled: bool) -> None:
        """Close the socket once the answers still buffered have left. Until then the client
        is waited on, so the idle check's `close` ends a client that reads nothing (the
        listener keeps this connection until `serve` returns); on shutdown it closes at once."""
        if cancelled:
            self._writer.transport.abort()
            return
        self._waiting_since = self._clock()
        self._writer.close()
        try:
            with contextlib.suppress(ConnectionError, OSError):
                await self._writer.wait_closed()
        except asyncio.CancelledError:
            self._writer.transport.abort()
            raise

    def _open_outbox(self) -> Outbox | None:
        """This connection's queue on the writer thread (None: answers go through the transport)."""
        transport = self._writer.transport
        sock = transport.get_extra_info("socket")
        if sock is None or not (_WRITER_THREAD or self._answers is not None):
            return None
        fd = sock.fileno()

        def socket_fd() -> int | None:
            return None if transport.is_closing() else fd

        writer = self._answers or AnswerWriter.shared()
        return Outbox(writer, socket_fd, use_sendfile=self._use_sendfile, on_failed=self.close)

    async def _end_answers(self, cancelled: bool) -> None:
        """Let the queued answers leave before the socket closes (dropped on shutdown; a client
        that does not read them is idle, and the idle check's `close` drops them)."""
        outbox, self._outbox = self._outbox, None
        if outbox is None:
            return
        if cancelled:
            outbox.abort()
            return
        self._waiting_since = self._clock()
        self._finishing = outbox  # the idle check's `close` still reaches it
        try:
            await outbox.finish()
        except asyncio.CancelledError:
            outbox.abort()
            raise
        finally:
            self._finishing = None

    async def _serve_frames(self) -> None:
        while True:
            self._waiting_since = self._clock()
            taken = await self._frames.next_frame()
            if taken is None:
                return
            frame, self._held = taken
            self._waiting_since = None
            try:
                reply = await self._dispatcher.dispatch(frame, self.peer)
            finally:
                self._release()
            del frame, taken  # neither the request nor its answer (a fetch's regions hold their
            if reply is not None:  # segment files open) is kept while the next one is awaited
                await self._send(reply)
                reply = None

    def _release(self) -> None:
        self._frames.release(self._held)
        self._held = 0

    def _count_malformed(self) -> None:
        if self._metrics is not None:
            self._metrics.connections_closed_malformed.inc()

    async def _answer_http(self, message: str) -> None:
        """A plain 400 saying what this port is, so `curl` shows more than an empty reply."""
        body = (message + "\n").encode()
        head = (
            "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        )
        self._flush()  # held-back answers (a pipelined run whose last request had no answer)
        await self._end_answers(False)  # the answers before it leave first, then the transport's
        with contextlib.suppress(ConnectionError, TimeoutError, OSError):
            self._writer.write(head.encode() + body)
            if self._writer.can_write_eof():
                self._writer.write_eof()
            # Read what the client still sends, so closing does not reset the connection
            # before it has read the answer.
            async with asyncio.timeout(_HTTP_LINGER_S):
                await self._frames.discard_until_eof()

    async def _send(self, reply: Reply) -> None:
        header = response_header(reply.correlation_id, reply.flexible_header)
        body = reply.body
        if isinstance(body, bytes):
            self._hold_back(size_prefix(len(header) + len(body)) + header + body)
            if self._next_frame_buffered() and self._held_back_bytes < _HELD_BYTES:
                self._schedule_flush()
                return
            self._flush()
        elif self._outbox is not None:
            self._flush()
            self._outbox.send([size_prefix(len(header) + body.size), header, *body.parts])
        else:
            self._flush()
            await self._send_parts(header, body)
        await self._backpressure()

    async def _backpressure(self) -> None:
        """Stop reading the client's requests while over `_WRITE_HIGH_WATER` of its answers wait."""
        if self._outbox is not None:
            if self._outbox.pending > _WRITE_HIGH_WATER:
                self._waiting_since = self._clock()  # a client that does not read is idle too
                await self._outbox.drained(_WRITE_LOW_WATER)
        elif self._writer.transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
            self._waiting_since = self._clock()
            await self._writer.drain()

    def _hold_back(self, data: bytes) -> None:
        self._held_back.append(data)
        self._held_back_bytes += len(data)

    def _next_frame_buffered(self) -> bool:
        """Whether the client's next request is already read in full."""
        return self._frames.frame_ready

    def _schedule_flush(self) -> None:
        if not self._flush_scheduled:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        """Write the held-back responses, in order, in one call."""
        self._flush_scheduled = False
        if not self._held_back:
            return
        held, self._held_back, self._held_back_bytes = self._held_back, [], 0
        if self._outbox is not None:
            self._outbox.send(held)
            return
        if self._writer.transport.is_closing():
            return
        self._writer.write(held[0] if len(held) == 1 else b"".join(held))

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
                pending.append(_whole(part))
        self._writer.writelines(pending)

    async def _sendfile(self, region: FileSegment) -> None:
        self._waiting_since = self._clock()  # the client reading the response is progress
        try:  # on asyncio's loop and on uvloop (transport_sendfile); it holds the region's file
            if self._closed is None:
                self._closed = asyncio.get_running_loop().create_future()
            await send_region(self._writer, region, self._closed)
        except (asyncio.SendfileNotAvailableError, NotImplementedError):
            self._use_sendfile = False
            self._writer.write(_whole(region))


def _whole(region: Part) -> bytes:
    """A region's bytes, all of them: a file truncated under the region (a follower's truncation)
    cannot give them, and the connection ends rather than let the next answer's bytes stand in for
    the missing ones (as Kafka closes the channel)."""
    data = region.read()  # type: ignore[union-attr]
    if len(data) != region.size:  # type: ignore[union-attr]
        raise ConnectionError(errno.EIO, "a fetch region's file ends before the region does")
    return data
