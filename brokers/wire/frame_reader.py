"""Size-prefixed Kafka frames read straight into their buffers, for the broker's connections
and both sides of the gateway: the `get_buffer`/`buffer_updated` half of an
`asyncio.BufferedProtocol`.

Owns: `FrameReader`. The socket is read into one scratch buffer shared by every reader of the
thread (`SCRATCH_BYTES`; reads are synchronous on the event loop, so no two readers use it at
once) until a size prefix announces a frame that is not all there yet; that frame gets a buffer of
exactly its announced size, what the scratch holds of it is copied in once, and from then on the
socket is read straight into that buffer, never past the frame's end (no list of chunks, no join,
no copy of the body); above `LAZY_FRAME_BYTES` that buffer is an anonymous mapping whose pages
are only touched as bytes arrive. A frame that is already whole in the scratch is copied out (at
most `SCRATCH_BYTES`). Nothing of the scratch outlives a `buffer_updated` call: an idle connection
holds no read buffer. Each size prefix is checked (`check_size`, default: at least `MIN_FRAME`
and at most `limit`) before anything is allocated for its body (a hostile 2 GiB prefix costs
nothing), and `admit` is asked for the announced size before the body is read (a byte budget or
request memory: when it says no, the reader keeps what it was given, the caller stops reading the
socket, and nothing more is read until `admitted()`). Every frame handed out is a read-only view
of a buffer nobody reuses, valid for as long as the caller keeps it, so the records of a Produce
or a Fetch can go out again as slices. A frame `stream` takes is not read whole: its body is
handed to the sink `stream` returned as it is read, in fresh chunks of at most
`STREAM_CHUNK_BYTES` (a Fetch answer streamed to its client, `gateway.kafka.fetch`). Pure (no
asyncio); not thread-safe: one owner feeds a reader.
"""

from __future__ import annotations

import mmap
import struct
import threading
from collections.abc import Callable, Iterator

from brokers.wire.buffers import receive_buffer

_INT32 = struct.Struct(">i")
MIN_FRAME = 4  # a correlation id at least
SCRATCH_BYTES = 64 * 1024  # the shared read buffer between frames
STREAM_CHUNK_BYTES = 256 * 1024  # the most read at once of a streamed frame
# Frames above this get pages only as their bytes arrive (an anonymous mapping), so a client that
# announces a large frame and stalls holds what it sent, not what it announced; smaller ones
# (every producer's requests: max.request.size is 1 MiB) come from the heap, which the server
# processes keep mapped (brokers/server/allocator.py), with no page to fault in.
LAZY_FRAME_BYTES = 2 * 1024 * 1024
_local = threading.local()


def _scratch() -> bytearray:
    scratch: bytearray | None = getattr(_local, "scratch", None)
    if scratch is None:
        scratch = _local.scratch = bytearray(SCRATCH_BYTES)
    return scratch


def frame_buffer(size: int) -> bytearray | mmap.mmap:
    """A buffer for a frame of `size` bytes (see LAZY_FRAME_BYTES)."""
    return mmap.mmap(-1, size) if size > LAZY_FRAME_BYTES else receive_buffer(size)


class FrameTooLargeError(ConnectionError):
    """A size prefix over the limit, or too small to hold a header."""


# Asked with a frame's size once its prefix is read: a callable the frame's body is handed to in
# chunks as it is read (views of fresh buffers, never reused), or None to read the frame whole.
StreamTo = Callable[[int], Callable[[memoryview], None] | None]


# Checks an announced frame size against a limit before anything is allocated for it; raises.
CheckSize = Callable[[int, int], None]


def check_frame_size(size: int, limit: int) -> None:
    if not MIN_FRAME <= size <= limit:
        raise FrameTooLargeError(f"frame of {size} bytes (limit {limit})")


class FrameReader:
    def __init__(
        self,
        limit: int,
        admit: Callable[[int], bool] | None = None,
        stream: StreamTo | None = None,
        check_size: CheckSize = check_frame_size,
    ) -> None:
        self.limit = limit
        self._check_size = check_size
        self._admit = admit
        self._stream = stream
        self._sink: Callable[[memoryview], None] | None = None  # the frame being streamed
        self._left = 0  # bytes of the streamed frame not read yet
        self._prefix = b""  # the part of a size prefix received so far
        self._size = -1  # the body size of the frame being read; -1 while reading its prefix
        self._buffer: bytearray | mmap.mmap | None = None  # a frame's body not all there yet
        self._have = 0  # bytes of `_buffer` filled
        self._into_buffer = False  # the last `get_buffer` gave `_buffer` (not the scratch)
        self._held = bytearray()  # read past a frame `admit` said no to
        self.waiting = False  # `admit` said no: nothing is read until `admitted()`

    @property
    def buffered(self) -> int:
        return len(self._prefix) + self._have + len(self._held)

    @property
    def progress(self) -> tuple[int, int]:
        """(bytes read, size) of the frame being read into its own buffer; (0, 0) otherwise."""
        return (self._have, self._size) if self._buffer is not None and self._size >= 0 else (0, 0)

    @property
    def partial(self) -> bool:
        """A frame has begun (some of its prefix or body was received) and is not complete."""
        return bool(self._prefix) or self._size >= 0

    def get_buffer(self) -> memoryview:
        """Where the socket's next bytes go: the rest of the current frame's own buffer, else
        the shared scratch (used up by the next `updated`)."""
        buffer = self._buffer
        if buffer is not None and not self.waiting:
            self._into_buffer = True
            return memoryview(buffer)[self._have :]
        if self._sink is not None:  # a fresh chunk: the sink may keep views of it
            self._into_buffer = True
            self._buffer = receive_buffer(min(self._left, STREAM_CHUNK_BYTES))
            return memoryview(self._buffer)
        self._into_buffer = False
        return memoryview(_scratch())

    def updated(self, nbytes: int) -> Iterator[memoryview]:
        """`nbytes` were written into the last `get_buffer`: the frames they complete (without
        their size prefix), oldest first. Drain it before the next read."""
        if self._into_buffer and self._sink is not None:
            chunk, self._buffer = self._buffer, None
            assert chunk is not None
            self._into_buffer = False
            self._pass(memoryview(chunk)[:nbytes].toreadonly())
            return
        if self._into_buffer:
            self._have += nbytes
            if self._have == self._size:
                yield self._complete()
            return
        view = memoryview(_scratch())[:nbytes]
        if self.waiting:
            self._held += view
            return
        yield from self._read(view)

    def feed(self, data: bytes | bytearray | memoryview) -> Iterator[memoryview]:
        """The frames `data` completes (a protocol that is handed bytes, and tests)."""
        source, pos = memoryview(data), 0
        while pos < len(source):
            target = self.get_buffer()
            taken = min(len(target), len(source) - pos)
            target[:taken] = source[pos : pos + taken]
            pos += taken
            yield from self.updated(taken)

    def admitted(self) -> Iterator[memoryview]:
        """The frame `admit` said no to may be read now: the frames the held bytes complete."""
        assert self.waiting
        self.waiting = False
        held, self._held = self._held, bytearray()
        if held:
            yield from self._read(memoryview(held))

    def clear(self) -> None:
        """Drop what was read of an incomplete frame (the connection is gone): its buffer is
        freed now, not when a garbage collection finds the connection's reference cycles."""
        self._prefix, self._size, self._buffer, self._have = b"", -1, None, 0
        self._sink, self._left = None, 0
        self._held = bytearray()
        self.waiting = False

    def hand_over(self) -> int:
        """From within a streamed frame's sink: the rest of that frame is taken from the socket
        by the caller (`gateway.kafka.splice_relay`), not read here; how many bytes that is. The
        next bytes this reader is given begin a new frame."""
        left = self._left
        self._sink, self._left, self._size = None, 0, -1
        self._buffer, self._have, self._into_buffer = None, 0, False
        return left

    def _read(self, view: memoryview) -> Iterator[memoryview]:
        """Frames out of `view` (the scratch or held bytes: nothing may keep a view of it)."""
        pos, end = 0, len(view)
        while pos < end:
            if self._size < 0:
                if not self._prefix and end - pos >= 4:
                    size = _INT32.unpack_from(view, pos)[0]
                    pos += 4
                else:
                    taken = bytes(view[pos : pos + 4 - len(self._prefix)])
                    self._prefix += taken
                    pos += len(taken)
                    if len(self._prefix) < 4:
                        return
                    size = _INT32.unpack(self._prefix)[0]
                    self._prefix = b""
                self._start(size)
                if self._admit is not None and not self._admit(size):
                    self.waiting = True
                    self._held = bytearray(view[pos:])
                    return
                if self._stream is not None:
                    self._sink = self._stream(size)
                    self._left = size
            size = self._size
            if self._sink is not None:
                count = min(self._left, end - pos)
                self._pass(memoryview(bytes(view[pos : pos + count])))
                pos += count
                continue
            if end - pos >= size:
                frame = memoryview(bytes(view[pos : pos + size]))
                pos += size
                self._size = -1
                yield frame
                continue
            buffer = self._buffer = frame_buffer(size)
            buffer[: end - pos] = view[pos:]
            self._have = end - pos
            return

    def _pass(self, chunk: memoryview) -> None:
        """Hand the next bytes of a streamed frame to its sink; the frame ends with its last."""
        sink = self._sink
        assert sink is not None
        self._left -= len(chunk)
        if self._left == 0:
            self._sink, self._size = None, -1
        sink(chunk)

    def _complete(self) -> memoryview:
        buffer = self._buffer
        assert buffer is not None
        self._buffer, self._have, self._size, self._into_buffer = None, 0, -1, False
        return memoryview(buffer).toreadonly()

    def _start(self, size: int) -> None:
        self._check_size(size, self.limit)
        self._size = size
