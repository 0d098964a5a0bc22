"""A bounds-checked cursor over a memoryview, and the list of buffer parts the rewriters emit.

Owns: reading Kafka's primitive types (fixed-width integers, unsigned varints, classic and compact
strings, nullable bytes and array lengths, tagged-field sections) without building objects or
copying, and `Parts`: new bytes for rewritten fields coalesced between views of the original
buffer, ready for `transport.writelines`. Every length prefix is checked against the bytes that remain before it is used, so a
hostile length can never make a caller slice, loop or allocate past the buffer; every failure is a
`MalformedRequestError`. Pure; thread-safe (one cursor per parse; the buffer is only read).
"""

from __future__ import annotations

import struct

from brokers.wire.primitives import MalformedRequestError, write_uvarint

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_MAX_VARINT_SHIFT = 28  # five bytes: Kafka's uvarints are 32-bit


class Reader:
    """A position in `buf`; each read advances it or raises MalformedRequestError."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: memoryview, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos

    @property
    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def skip(self, size: int) -> int:
        """Advance past `size` bytes; returns the new position."""
        end = self.pos + size
        if size < 0 or end > len(self.buf):
            raise MalformedRequestError(f"{size} bytes claimed, {self.remaining} left")
        self.pos = end
        return end

    def _fixed(self, codec: struct.Struct) -> int:
        start = self.pos
        end = start + codec.size
        if end > len(self.buf):
            raise MalformedRequestError(f"{codec.size} bytes needed, {self.remaining} left")
        self.pos = end
        value: int = codec.unpack_from(self.buf, start)[0]
        return value

    def int8(self) -> int:
        return self._fixed(_I8)

    def int16(self) -> int:
        return self._fixed(_I16)

    def int32(self) -> int:
        return self._fixed(_I32)

    def int64(self) -> int:
        return self._fixed(_I64)

    def uvarint(self) -> int:
        pos = self.pos
        if pos < len(self.buf) and self.buf[pos] < 0x80:  # the usual one-byte varint, inline
            self.pos = pos + 1
            return self.buf[pos]
        return self._long_uvarint()

    def _long_uvarint(self) -> int:
        buf, pos, end = self.buf, self.pos, len(self.buf)
        result = shift = 0
        while True:
            if pos >= end or shift > _MAX_VARINT_SHIFT:
                raise MalformedRequestError("varint truncated or too long")
            byte = buf[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                self.pos = pos
                return result
            shift += 7

    def _length(self, flexible: bool, codec: struct.Struct) -> int:
        """A length prefix, -1 for null: compact (uvarint of length + 1) or fixed-width."""
        if flexible:
            return self.uvarint() - 1
        return self._fixed(codec)

    def bytes_length(self, flexible: bool) -> int:
        """A (compact) nullable bytes length, -1 for null; the bytes must all be present."""
        size = self._length(flexible, _I32)
        if size < -1 or size > self.remaining:
            raise MalformedRequestError(f"bytes of {size} claimed, {self.remaining} left")
        return size

    def nullable_bytes(self, flexible: bool) -> memoryview | None:
        """(Compact) nullable bytes as a view of the buffer (no copy)."""
        size = self.bytes_length(flexible)
        if size < 0:
            return None
        start = self.pos
        self.pos += size
        return self.buf[start : self.pos]

    def nullable_string(self, flexible: bool) -> str | None:
        size = self._length(flexible, _I16)
        if size < -1 or size > self.remaining:
            raise MalformedRequestError(f"string of {size} bytes claimed, {self.remaining} left")
        if size < 0:
            return None
        start = self.pos
        self.pos += size
        try:
            return str(self.buf[start : self.pos], "utf-8")
        except UnicodeDecodeError:
            raise MalformedRequestError("string is not UTF-8") from None

    def string(self, flexible: bool) -> str:
        value = self.nullable_string(flexible)
        if value is None:
            raise MalformedRequestError("null where a string is required")
        return value

    def array_length(self, flexible: bool, item_size: int = 1) -> int:
        """A (compact) array count, -1 for null; `count * item_size` (the smallest encoding of
        one element) must fit in what remains, so a claimed count never drives a long loop."""
        count = self._length(flexible, _I32)
        if count < -1 or count * item_size > self.remaining:
            raise MalformedRequestError(f"array of {count} claimed, {self.remaining} bytes left")
        return count

    def tagged_fields(self) -> None:
        """Skip one tagged-field section (count, then tag, size, data per field)."""
        count = self.uvarint()
        if not count:  # the usual case
            return
        if count * 2 > self.remaining:  # a tag and a size take at least a byte each
            raise MalformedRequestError(f"{count} tagged fields claimed, {self.remaining} left")
        uvarint = self.uvarint
        for _ in range(count):
            uvarint()  # the tag
            self.skip(uvarint())

    def span(self, start: int) -> memoryview:
        """The bytes from `start` to the current position, as a view."""
        return self.buf[start : self.pos]

    def expect_end(self) -> None:
        if self.pos != len(self.buf):
            raise MalformedRequestError(f"{self.remaining} trailing bytes")


class Parts:
    """The parts of a rewritten message: consecutive new bytes are joined into one part, views of
    the original go in as they are (never copied), empty views are skipped."""

    __slots__ = ("_pending", "parts", "size")

    def __init__(self) -> None:
        self.parts: list[bytes | memoryview] = []
        self._pending = bytearray()
        self.size = 0

    def write(self, data: bytes | memoryview) -> None:
        """New (or small, deliberately copied) bytes."""
        self._pending += data
        self.size += len(data)

    def view(self, span: memoryview) -> None:
        """A view of the original buffer, passed through without a copy."""
        if not span:
            return
        self._flush()
        self.parts.append(span)
        self.size += len(span)

    def finish(self) -> list[bytes | memoryview]:
        self._flush()
        return self.parts

    def _flush(self) -> None:
        if self._pending:
            self.parts.append(bytes(self._pending))
            self._pending.clear()


def encode_length(size: int, flexible: bool, *, wide: bool) -> bytes:
    """A length or count prefix (-1 for null): compact, else int32 (`wide`) or int16."""
    if flexible:
        return write_uvarint(size + 1)
    return (_I32 if wide else _I16).pack(size)


def encode_string(value: str | None, flexible: bool) -> bytes:
    """A (compact) nullable string."""
    if value is None:
        return encode_length(-1, flexible, wide=False)
    data = value.encode()
    if len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes is too long for the protocol")
    return encode_length(len(data), flexible, wide=False) + data
