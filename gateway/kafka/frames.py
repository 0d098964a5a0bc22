"""Size-prefixed Kafka frames out of a byte stream, for both sides of the gateway, and writing
frames made of many buffers.

Owns: cutting frames out of received chunks, checking each size prefix against a limit before
anything is kept for its body (a hostile 2 GiB prefix costs nothing), asking `admit` for the
announced size before the body is read (the connection's byte budget: when it says no, the reader
holds what it was given, reads nothing more until `admitted()`, and the caller stops reading the
socket), and `write_parts`. A frame that lies inside one received chunk, and is at least half of
it, is handed out as a read-only view of that chunk (no copy); a smaller one is copied (a view
would keep the whole chunk alive); one that spans chunks is read into a buffer of its announced
size, allocated once (no list of chunks, no join). Either way the view stays valid for as long as
the caller keeps it (nothing is reused), so the records of a Produce or a Fetch can go out again as
slices. Not thread-safe: one owner feeds it.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable, Iterator, Sequence

_INT32 = struct.Struct(">i")
MIN_FRAME = 4  # a correlation id at least
_COALESCE = 16 * 1024  # parts below this are joined before writing; larger ones go as they are


class FrameTooLargeError(ConnectionError):
    """A size prefix over the limit, or too small to hold a header."""


class FrameReader:
    def __init__(self, limit: int, admit: Callable[[int], bool] | None = None) -> None:
        self.limit = limit
        self._admit = admit
        self._prefix = b""  # the part of a size prefix received so far
        self._size = -1  # the body size of the frame being read; -1 while reading its prefix
        self._buffer: bytearray | None = None  # the body of a frame that spans chunks
        self._have = 0
        self._held: list[memoryview] = []  # received while waiting for `admit`
        self.waiting = False  # `admit` said no: nothing is read until `admitted()`

    @property
    def buffered(self) -> int:
        return len(self._prefix) + self._have + sum(len(v) for v in self._held)

    @property
    def partial(self) -> bool:
        """A frame has begun (some of its prefix or body was received) and is not complete."""
        return bool(self._prefix) or self._size >= 0

    def feed(self, data: bytes) -> Iterator[memoryview]:
        """The frames `data` completes (without their size prefix), oldest first."""
        if self.waiting:
            self._held.append(memoryview(data))
            return
        yield from self._read(memoryview(data))

    def admitted(self) -> Iterator[memoryview]:
        """The frame `admit` said no to may be read now: the frames the held bytes complete."""
        assert self.waiting
        self.waiting = False
        held, self._held = self._held, []
        for index, view in enumerate(held):
            if self.waiting:  # the next frame must wait in its turn
                self._held.extend(held[index:])
                return
            yield from self._read(view)

    def clear(self) -> None:
        """Drop what was read of an incomplete frame (the connection is gone): its buffer is
        freed now, not when a garbage collection finds the connection's reference cycles."""
        self._prefix, self._size, self._buffer, self._have, self._held = b"", -1, None, 0, []
        self.waiting = False

    def _read(self, view: memoryview) -> Iterator[memoryview]:
        pos, end = 0, len(view)
        while pos < end:
            if self._size < 0:
                taken = view[pos : pos + 4 - len(self._prefix)]
                self._prefix += taken
                pos += len(taken)
                if len(self._prefix) < 4:
                    return
                self._start(_INT32.unpack(self._prefix)[0])
                if self._admit is not None and not self._admit(self._size):
                    self.waiting = True
                    if pos < end:
                        self._held.append(view[pos:])
                    return
            if self._buffer is None and end - pos >= self._size:
                frame = view[pos : pos + self._size]
                pos += self._size
                if 2 * len(frame) < len(view):
                    frame = memoryview(bytes(frame))
                self._size = -1
                yield frame
                continue
            pos = self._fill(view, pos)
            if self._have == self._size:
                assert self._buffer is not None
                frame = memoryview(self._buffer).toreadonly()
                self._buffer, self._have, self._size = None, 0, -1
                yield frame

    def _fill(self, view: memoryview, pos: int) -> int:
        """Copy what `view` holds of the current frame's body into its buffer; the new `pos`."""
        if self._buffer is None:
            self._buffer = bytearray(self._size)
        taken = min(self._size - self._have, len(view) - pos)
        self._buffer[self._have : self._have + taken] = view[pos : pos + taken]
        self._have += taken
        return pos + taken

    def _start(self, size: int) -> None:
        self._prefix = b""
        if not MIN_FRAME <= size <= self.limit:
            raise FrameTooLargeError(f"frame of {size} bytes (limit {self.limit})")
        self._size = size


Buffer = bytes | bytearray | memoryview


def write_parts(transport: asyncio.WriteTransport, parts: Sequence[Buffer]) -> None:
    """Write a frame made of parts: small ones joined, large ones (record batches) handed over as
    they are, which the socket sends without copying when it takes them whole (Python 3.11's
    `writelines` would first join everything into one new buffer)."""
    small: list[Buffer] = []
    for part in parts:
        if len(part) < _COALESCE:
            small.append(part)
            continue
        if small:
            transport.write(b"".join(small))
            small = []
        transport.write(part)
    if small:
        transport.write(b"".join(small))
