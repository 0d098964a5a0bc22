"""The read side of one broker connection: request frames read straight into their buffers.

Owns: `FrameStream`, the connection's asyncio protocol (a `BufferedProtocol`), and `accept`,
which wires one to an accepted socket with an `asyncio.StreamWriter` for the answers (the stream
has the write flow control the writer's `drain` and `wait_closed` use). The socket is read by
`FrameReader` (brokers/wire/frame_reader.py): a request that is not whole in the shared scratch buffer gets a
buffer of its announced size once that size is checked (`check_request_size`: HTTP and TLS
prefixes named) and its request memory granted, and the socket is read into it directly, so the
body is never copied in user space. (asyncio's `StreamReader` copied each byte four times on its
way: into a bytes object, into the reader's buffer, out of it, and joined; a fifth to a quarter
of the broker's CPU on 1 MiB produce requests, docs/benchmarks.md "Produce requests without page
faults".)
- Request memory (`queued.max.request.bytes`, `RequestMemory`): each frame takes its announced
  size when its prefix is read and holds it until `release` after it was processed. While the pool
  is spent the transport does not read (`muted`) until the memory is granted.
- Complete frames wait in order for `next_frame`; while one waits the transport does not read:
  one request is processed at a time and the next may wait behind it, as Kafka mutes a channel.
- A bad size prefix ends the stream after the frames before it (`next_frame` raises the
  FrameSizeError); `discard_until_eof` then reads and drops what the client still sends.
- `progress` is the partly read frame's (bytes read, size); `on_progress` is called whenever bytes
  arrive (the connection's idle check counts a client that is still sending as active).
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from collections.abc import Callable, Iterator
from typing import cast

from brokers.server.request_memory import RequestMemory
from brokers.wire.frame_reader import SCRATCH_BYTES, FrameReader
from brokers.wire.framing import FrameSizeError, check_request_size

Frame = tuple[memoryview, int]  # a request's bytes and the request memory it holds


class FrameStream(asyncio.BufferedProtocol):
    def __init__(self, limit: int, memory: RequestMemory) -> None:
        self._memory = memory
        self._reader = FrameReader(limit, self._admit, check_size=check_request_size)
        self._granted: deque[int] = deque()  # memory of the frames begun and not complete
        self._ready: deque[Frame] = deque()
        self._transport: asyncio.Transport | None = None
        self._eof = False
        self._lost: Exception | None = None
        self._error: FrameSizeError | None = None
        self._discard: bytearray | None = None  # after a bad prefix: what is read goes here
        self._waiter: asyncio.Future[None] | None = None
        self._granting: asyncio.Task[None] | None = None
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.on_progress: Callable[[], None] = _nothing
        self._writing_paused = False  # the transport's write buffer is over its high water
        self._drained: asyncio.Future[None] | None = None

    # --- what the connection uses -----------------------------------------------------------

    @property
    def muted(self) -> bool:
        """Not reading: waiting for request memory."""
        return self._granting is not None

    @property
    def frame_ready(self) -> bool:
        """A whole request waits behind the one being processed."""
        return bool(self._ready)

    @property
    def progress(self) -> tuple[int, int]:
        return self._reader.progress

    async def next_frame(self) -> Frame | None:
        """The next request and its memory; None at the client's end between requests.
        IncompleteReadError at an end within one; a bad prefix's FrameSizeError once the
        requests before it were taken; the connection's error if it was lost."""
        while not self._ready:
            if self._error is not None:
                raise self._error
            if self._lost is not None:
                raise self._lost
            if self._eof:
                if self._reader.partial:
                    raise asyncio.IncompleteReadError(b"", None)
                return None
            await self._woken()
        frame = self._ready.popleft()
        self._update_reading()
        return frame

    def release(self, held: int) -> None:
        if held:
            self._memory.release(held)

    async def discard_until_eof(self) -> None:
        """Read and drop what the client still sends, until its end."""
        self._discard = bytearray(SCRATCH_BYTES)
        self._update_reading()
        while not (self._eof or self._lost is not None):
            await self._woken()

    def close(self) -> None:
        """Let go of every byte and grant held (the connection ended)."""
        if self._granting is not None:
            self._granting.cancel()
            self._granting = None
        for _frame, held in self._ready:
            self.release(held)
        self._ready.clear()
        while self._granted:
            self.release(self._granted.popleft())
        self._reader.clear()

    # --- the protocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._discard is not None:
            return memoryview(self._discard)
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self._discard is not None:
            return
        self._take(self._reader.updated(nbytes))
        self.on_progress()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        return True  # keep the socket open for the answers still to go

    def pause_writing(self) -> None:
        self._writing_paused = True

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._wake_drain()

    async def _drain_helper(self) -> None:
        """`StreamWriter.drain`'s wait (asyncio's FlowControlMixin, which this cannot inherit:
        uvloop reads a `Protocol` subclass with `data_received`, never into its buffers)."""
        if self._closed.done():
            raise ConnectionResetError("Connection lost")
        if not self._writing_paused:
            return
        if self._drained is None or self._drained.done():
            self._drained = asyncio.get_running_loop().create_future()
        await asyncio.shield(self._drained)
        if self._closed.done() and self._writing_paused:
            raise ConnectionResetError("Connection lost")

    def connection_lost(self, exc: Exception | None) -> None:
        self._wake_drain()
        if exc is not None:
            self._lost = exc
        self._eof = True
        if not self._closed.done():
            self._closed.set_result(None)
        self._wake()

    def _get_close_waiter(self, stream: asyncio.StreamWriter) -> asyncio.Future[None]:
        return self._closed

    # --- inside -----------------------------------------------------------------------------

    def _admit(self, size: int) -> bool:
        if self._memory.try_allocate(size):
            self._granted.append(size)
            return True
        self._granting = asyncio.get_running_loop().create_task(self._grant(size))
        return False

    async def _grant(self, size: int) -> None:
        await self._memory.allocate(size)
        self._granting = None
        self._granted.append(size)
        self._take(self._reader.admitted())

    def _take(self, frames: Iterator[memoryview]) -> None:
        """Queue the frames the reader completed, each with its memory; a bad prefix among them
        ends the stream after those before it."""
        try:
            for frame in frames:
                self._ready.append((frame, self._granted.popleft()))
        except FrameSizeError as exc:
            self._error = exc
        self._update_reading()
        self._wake()

    async def _woken(self) -> None:
        waiter = self._waiter = asyncio.get_running_loop().create_future()
        try:
            await waiter
        finally:
            self._waiter = None

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None or transport.is_closing():
            return
        wanted = self._discard is not None or not (
            self._ready or self._granting is not None or self._error is not None
        )
        if wanted != transport.is_reading():
            (transport.resume_reading if wanted else transport.pause_reading)()

    def _wake_drain(self) -> None:
        drained = self._drained
        if drained is not None and not drained.done():
            drained.set_result(None)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


def _nothing() -> None:
    pass


async def accept(
    sock: socket.socket, limit: int, memory: RequestMemory
) -> tuple[FrameStream, asyncio.StreamWriter]:
    """Serve an accepted socket: its frames and a writer for its answers."""
    loop = asyncio.get_running_loop()
    transport, stream = await loop.connect_accepted_socket(lambda: FrameStream(limit, memory), sock)
    return stream, asyncio.StreamWriter(transport, stream, None, loop)
