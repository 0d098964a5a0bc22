"""Size-prefixed Kafka frames out of a byte stream, for both sides of the gateway, and writing
frames made of many buffers.

Owns: cutting frames out of received chunks, checking each size prefix against a limit before
anything is kept for its body (a hostile 2 GiB prefix costs nothing), and `write_parts`. A frame
that lies inside one received chunk is handed out as a read-only view of that chunk (no copy);
one that spans chunks is joined once. Either way the view stays valid for as long as the caller
keeps it (the chunks are immutable `bytes`), so the records of a Produce or a Fetch can go out
again as slices. Not thread-safe: one owner feeds it.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator, Sequence

_INT32 = struct.Struct(">i")
MIN_FRAME = 4  # a correlation id at least
_COALESCE = 16 * 1024  # parts below this are joined before writing; larger ones go as they are


class FrameTooLargeError(ConnectionError):
    """A size prefix over the limit, or too small to hold a header."""


class FrameReader:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._prefix = b""  # the part of a size prefix received so far
        self._size = -1  # the body size of the frame being read; -1 while reading its prefix
        self._chunks: list[memoryview] = []
        self._have = 0

    @property
    def buffered(self) -> int:
        return len(self._prefix) + self._have

    def feed(self, data: bytes) -> Iterator[memoryview]:
        """The frames `data` completes (without their size prefix), oldest first."""
        view = memoryview(data)
        pos, end = 0, len(data)
        while pos < end:
            if self._size < 0:
                taken = view[pos : pos + 4 - len(self._prefix)]
                self._prefix += taken
                pos += len(taken)
                if len(self._prefix) < 4:
                    return
                self._start(_INT32.unpack(self._prefix)[0])
            taken = view[pos : pos + self._size - self._have]
            pos += len(taken)
            if not self._chunks and len(taken) == self._size:
                frame = taken  # whole inside this chunk: a view, no copy
            else:
                self._chunks.append(taken)
                self._have += len(taken)
                if self._have < self._size:
                    return
                frame = memoryview(b"".join(self._chunks))
            self._chunks, self._have, self._size = [], 0, -1
            yield frame

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
