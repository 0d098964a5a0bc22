"""Kafka's message-schema primitives for the coordinators' records (`__consumer_offsets`,
`__transaction_state` keys and values).

Owns: `Reader` (int8/16/32/64, strings, bytes, arrays, in the classic and the flexible KIP-482
encodings, tagged fields) and `Writer` (the classic encoding, which is what Kafka still writes for
these records). Any overrun or bad length raises the reader's `error` (GroupRecordError unless a
subclass names another), never IndexError. Pure; not thread-safe per instance.
"""

from __future__ import annotations

import struct

from brokers.coordinator.errors import GroupRecordError

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class Reader:
    error: type[Exception] = GroupRecordError

    def __init__(self, data: bytes, *, flexible: bool = False) -> None:
        self._data = data
        self._pos = 0
        self.flexible = flexible

    def _take(self, size: int) -> bytes:
        end = self._pos + size
        if size < 0 or end > len(self._data):
            raise self.error(f"field of {size} bytes overruns the record at {self._pos}")
        chunk = self._data[self._pos : end]
        self._pos = end
        return chunk

    def int8(self) -> int:
        return int(_I8.unpack(self._take(1))[0])

    def int16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def int32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def int64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            byte = self._take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:
                raise self.error("unsigned varint longer than 5 bytes")

    def _length(self) -> int:
        """Length of a string/bytes/array; -1 for null."""
        return self.uvarint() - 1 if self.flexible else self.int32()

    def nullable_string(self) -> str | None:
        size = self.uvarint() - 1 if self.flexible else self.int16()
        if size < 0:
            return None
        try:
            return self._take(size).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.error(f"string is not UTF-8: {exc}") from None

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise self.error("null where a string is required")
        return value

    def bytes_(self) -> bytes:
        size = self._length()
        if size < 0:
            raise self.error("null where bytes are required")
        return self._take(size)

    def array_length(self) -> int:
        size = self.nullable_array_length()
        if size < 0:
            raise self.error("null where an array is required")
        return size

    def nullable_array_length(self) -> int:
        """Entries of an array; -1 for null."""
        size = self._length()
        if size > len(self._data) - self._pos:
            raise self.error(f"array of {size} entries cannot fit the record")
        return max(size, -1)

    def tagged_fields(self) -> dict[int, bytes]:
        """A flexible struct's tagged fields, by tag (empty in the classic encoding)."""
        fields: dict[int, bytes] = {}
        if not self.flexible:
            return fields
        for _ in range(self.uvarint()):
            tag = self.uvarint()
            fields[tag] = self._take(self.uvarint())
        return fields


class Writer:
    def __init__(self) -> None:
        self._out = bytearray()

    def int16(self, value: int) -> Writer:
        self._out += _I16.pack(value)
        return self

    def int32(self, value: int) -> Writer:
        self._out += _I32.pack(value)
        return self

    def int64(self, value: int) -> Writer:
        self._out += _I64.pack(value)
        return self

    def nullable_string(self, value: str | None) -> Writer:
        if value is None:
            return self.int16(-1)
        encoded = value.encode("utf-8")
        self.int16(len(encoded))
        self._out += encoded
        return self

    def string(self, value: str) -> Writer:
        return self.nullable_string(value)

    def bytes_(self, value: bytes) -> Writer:
        self.int32(len(value))
        self._out += value
        return self

    def build(self) -> bytes:
        return bytes(self._out)
