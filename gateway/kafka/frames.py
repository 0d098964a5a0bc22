"""Size-prefixed Kafka frames out of a byte stream, for both sides of the gateway.

Owns: buffering partial frames and checking each size prefix against a limit before anything
is buffered for it (a hostile 2 GiB prefix costs nothing). Each complete frame is handed out as a
memoryview over its own `bytes`, so callers may keep views of it (the records of a Produce or a
Fetch go out again as slices). Not thread-safe: one owner feeds it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

_INT32 = struct.Struct(">i")
MIN_FRAME = 4  # a correlation id at least


class FrameTooLargeError(ConnectionError):
    """A size prefix over the limit, or too small to hold a header."""


class FrameReader:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buffer = bytearray()

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> Iterator[memoryview]:
        """The frames `data` completes (without their size prefix), oldest first."""
        buffer = self._buffer
        if buffer:
            buffer += data
            source: bytes | bytearray = buffer
        else:
            source = data
        start, end = 0, len(source)
        try:
            while end - start >= 4:
                (size,) = _INT32.unpack_from(source, start)
                if not MIN_FRAME <= size <= self.limit:
                    raise FrameTooLargeError(f"frame of {size} bytes (limit {self.limit})")
                if end - start - 4 < size:
                    break
                yield memoryview(bytes(source[start + 4 : start + 4 + size]))
                start += 4 + size
        finally:
            if source is buffer:
                del buffer[:start]
            else:
                buffer += data[start:]
