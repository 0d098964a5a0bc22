"""The gateway's connection to one broker on behalf of one client connection: raw frames out,
raw response frames back, in order.

Owns: the socket to the broker (a `BufferedProtocol`: each answer is read straight into a buffer
of its announced size, `gateway.kafka.frames`), the FIFO of requests in flight, and failure. Each forwarded
request is written whole (a list of buffer parts) with a `ResponseHandler` that receives the
response frame (correlation id, header and body; its own bytes, which the handler may keep views
of) synchronously when it arrives. Requests go out on plain TCP through a `GatherWriter`: their
parts (a Produce's record batches are views of the client's frame) are never copied in user space,
also when the broker is behind and they wait (`gateway.kafka.gather_writer`); the socket's send
buffer is set to `SEND_BUFFER_BYTES`. A handler may take its
answer streamed instead (`StreamingHandler`: asked when the answer's size prefix is read, then fed
the frame in chunks as they are read, `gateway.kafka.frames`); after each chunk a streamed answer
may hand the rest of its frame to the kernel (`relay_target`: the client's plain socket and the
walk; `gateway.kafka.splice_relay`): this socket is then not read by its transport until every
byte of that answer has gone to the client, and a relay that fails (either socket) fails this
connection, whose next bytes are unknown. Kafka answers a
connection's requests in order, so the oldest handler takes the next frame; a frame whose
correlation id does not match is a protocol violation and ends the connection. acks=0 Produce gets
no answer: it is written with `expect_response=False`. On any failure every waiting handler gets
`None` once and `on_lost` is called (the session then closes the client connection, as a broker
restart would). Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol, cast

from gateway.kafka.frames import FrameReader, plain_fd, raise_buffer, write_parts
from gateway.kafka.gather_writer import GatherWriter
from gateway.kafka.splice_relay import RelaySource, SpliceRelay

log = logging.getLogger("pier.gateway.upstream")
_INT32 = struct.Struct(">i")
Buffer = bytes | bytearray | memoryview
MAX_RESPONSE_BYTES = 200 * 1024 * 1024
# The socket's send buffer, set outright: a Produce of up to a few MiB (librdkafka's default
# batches) goes out in one `writev`. Under Linux's autotuning (16 KiB to start) a large request
# was taken in part and the rest copied into the transport's buffer and sent on later wake-ups
# (py-spy, 1 KiB records: that copy alone ~7 % of the gateway's samples). Memory is used only
# while bytes wait for the broker.
SEND_BUFFER_BYTES = 4 * 1024 * 1024


# Gets the response frame after the size prefix, or None when the connection failed.
ResponseHandler = Callable[[memoryview | None], None]


class StreamedAnswer(Protocol):
    """An answer taken in chunks as it is read (`feed`, in order, its whole frame after the size
    prefix); `failed` instead of the rest when the connection fails."""

    def feed(self, chunk: memoryview) -> None: ...

    def failed(self) -> None: ...


class RelayedAnswer(StreamedAnswer, Protocol):
    """A streamed answer whose rest may be moved socket to socket (`splice_relay`)."""

    def relay_target(self) -> tuple[int, RelaySource] | None:
        """After a chunk: the client socket's descriptor and the walk, when the rest may be
        relayed now (plain TCP, nothing queued for the client, record bytes next)."""
        ...

    def relayed(self, spliced: int) -> None:
        """Every byte of the answer has reached the client (`spliced` of them by splice)."""
        ...


class StreamingHandler(Protocol):
    """A `ResponseHandler` that may take its answer streamed: `stream(size)` is asked when the
    answer's size prefix has been read; None reads it whole and calls the handler as usual."""

    def __call__(self, frame: memoryview | None) -> None: ...

    def stream(self, size: int) -> StreamedAnswer | None: ...


class Upstream(asyncio.BufferedProtocol):
    def __init__(self, address: str, on_lost: Callable[[str], None]) -> None:
        self.address = address
        self._on_lost = on_lost
        self._transport: asyncio.Transport | None = None
        self._writer: GatherWriter | None = None  # plain TCP: requests written as their views
        self._waiting: deque[tuple[int, ResponseHandler]] = deque()
        self._frames = FrameReader(MAX_RESPONSE_BYTES, stream=self._stream_to)
        self._streaming: StreamedAnswer | None = None  # the answer being streamed
        self._relay: SpliceRelay | None = None  # moving the rest of that answer, when it is
        self._held = False  # the client is not reading its answers (`hold_answers`)
        self._closed: str | None = None
        self._writable = asyncio.Event()
        self._writable.set()
        self.on_drained: Callable[[], None] | None = None  # requests written out after a backlog

    @classmethod
    async def connect(
        cls, host: str, port: int, on_lost: Callable[[str], None], *, timeout_s: float = 10.0
    ) -> Upstream:
        upstream = cls(f"{host}:{port}", on_lost)
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(timeout_s):
            await loop.create_connection(lambda: upstream, host, port)
        return upstream

    @property
    def in_flight(self) -> int:
        return len(self._waiting)

    @property
    def unsent_bytes(self) -> int:
        """Bytes of requests accepted and not yet taken by the socket."""
        if self._writer is not None:
            return self._writer.waiting_bytes
        transport = self._transport
        return 0 if transport is None else transport.get_write_buffer_size()

    @property
    def closed(self) -> bool:
        return self._closed is not None

    def send(
        self,
        correlation_id: int,
        parts: Sequence[Buffer],
        handler: ResponseHandler | None,
    ) -> None:
        """Write one request frame (size prefix included in `parts`); `handler` None = no answer."""
        if self._closed is not None or self._transport is None:
            if handler is not None:
                handler(None)
            return
        if handler is not None:
            self._waiting.append((correlation_id, handler))
        if self._writer is not None:
            self._writer.write(parts)
        else:
            write_parts(self._transport, parts)

    async def drained(self) -> None:
        """Wait while the broker is not reading as fast as we write."""
        await self._writable.wait()

    def close(self) -> None:
        self._fail("closed by the gateway", notify=False)

    def hold_answers(self, held: bool) -> None:
        """Stop (or go on) reading answers while the client is not reading its own: the broker
        and TCP keep them, so a client that stops reading holds at most its write buffer and one
        answer in the gateway (Kafka's network thread likewise mutes a connection it cannot
        write to)."""
        self._held = held
        transport = self._transport
        if transport is None or transport.is_closing() or self._relay is not None:
            return  # a relay resumes reading when it ends
        if held and transport.is_reading():
            transport.pause_reading()
        elif not held and not transport.is_reading():
            transport.resume_reading()

    # -- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's: no asyncio.Transport
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None:
            raise_buffer(sock, socket.SO_SNDBUF, SEND_BUFFER_BYTES)
        fd = plain_fd(transport)
        if fd is not None:
            loop = asyncio.get_running_loop()
            self._writer = GatherWriter(
                loop, fd, lambda exc: self._fail(f"write failed: {exc!r}"), self._drained
            )

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        try:
            for frame in self._frames.updated(nbytes):
                self._answer(frame)
        except ConnectionError as exc:
            self._fail(str(exc))
        except Exception as exc:  # an answer the gateway cannot read: this connection is done
            log.warning("event=bad_upstream_response broker=%s error=%r", self.address, exc)
            self._fail(f"unreadable response: {exc.__class__.__name__}")

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail("connection closed by the broker")

    def pause_writing(self) -> None:
        self._writable.clear()

    def resume_writing(self) -> None:
        self._writable.set()
        self._drained()

    def _drained(self) -> None:
        if self.on_drained is not None:
            self.on_drained()

    # -- internals -----------------------------------------------------------------------------
    def _answer(self, frame: memoryview) -> None:
        if not self._waiting:
            raise ConnectionError("a response with no request in flight")
        expected, handler = self._waiting.popleft()
        (correlation_id,) = _INT32.unpack_from(frame, 0)
        if correlation_id != expected:
            raise ConnectionError(f"response {correlation_id} out of order, expected {expected}")
        handler(frame)

    def _stream_to(self, size: int) -> Callable[[memoryview], None] | None:
        """The answer that begins now, if its handler takes it streamed."""
        if not self._waiting:
            raise ConnectionError("a response with no request in flight")
        stream = getattr(self._waiting[0][1], "stream", None)
        streamed: StreamedAnswer | None = stream(size) if stream is not None else None
        if streamed is None:
            return None
        self._waiting.popleft()
        self._streaming = streamed
        remaining = size

        def feed(chunk: memoryview) -> None:
            nonlocal remaining
            remaining -= len(chunk)
            if remaining == 0:
                self._streaming = None
            streamed.feed(chunk)
            if remaining and self._closed is None:
                self._try_relay(streamed, remaining)

        return feed

    def _try_relay(self, streamed: StreamedAnswer, remaining: int) -> None:
        """Hand the rest of the streamed answer to a splice relay, when it can take it."""
        relay_target = getattr(streamed, "relay_target", None)
        target = relay_target() if relay_target is not None else None
        transport = self._transport
        source_fd = plain_fd(transport) if transport is not None else None
        if target is None or source_fd is None or transport is None:
            return
        client_fd, source = target
        try:
            relay = SpliceRelay(source_fd, client_fd, remaining, source, self._relay_ended)
        except OSError as exc:  # out of descriptors: the answer goes on through user space
            log.warning("event=splice_unavailable broker=%s error=%r", self.address, exc)
            return
        self._frames.hand_over()
        transport.pause_reading()
        self._relay = relay
        relay.start()

    def _relay_ended(self, failure: str | None) -> None:
        relay, self._relay = self._relay, None
        if failure is not None:
            self._fail(f"relay: {failure}")
            return
        streamed, self._streaming = self._streaming, None
        transport = self._transport
        if transport is not None and not transport.is_closing() and not self._held:
            transport.resume_reading()
        if streamed is not None and relay is not None:
            relayed = getattr(streamed, "relayed", None)
            if relayed is not None:
                relayed(relay.spliced)

    def _fail(self, reason: str, *, notify: bool = True) -> None:
        if self._closed is not None:
            return
        self._closed = reason
        self._writable.set()
        relay, self._relay = self._relay, None
        if relay is not None:
            relay.cancel()
        streaming, self._streaming = self._streaming, None
        if streaming is not None:
            streaming.failed()
        if self._writer is not None:
            self._writer.close()  # before the transport closes the socket
        waiting, self._waiting = self._waiting, deque()
        for _correlation, handler in waiting:
            handler(None)
        if self._transport is not None:
            self._transport.close()
        if notify:
            self._on_lost(reason)
