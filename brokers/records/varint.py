"""Kafka's zigzag varints (ByteUtils.readVarint/readVarlong), as used inside v2 records.

Owns: `read_varint`, `read_varlong`, `write_varint`, `varint_size`. Protobuf-style base-128 groups,
least significant first, over the zigzag transform (0, -1, 1, -2 → 0, 1, 2, 3). A varint spans at
most 5 bytes and a varlong 10, as Kafka enforces ("Varint is too long"). Most varints in records
are one byte (offset deltas, key/header lengths), so that case returns before any loop.
Truncation and overlong encodings raise InvalidRecordError. Pure functions; thread-safe.
"""

from __future__ import annotations

from brokers.records.errors import InvalidRecordError

MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Decode the zigzag varint at `pos`; return (value, position after it)."""
    byte = buf[pos] if pos < len(buf) else 0x100
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    return _read(buf, pos, MAX_VARINT_BYTES)


def read_varlong(buf: bytes, pos: int) -> tuple[int, int]:
    byte = buf[pos] if pos < len(buf) else 0x100
    if byte < 0x80:
        return (byte >> 1) ^ -(byte & 1), pos + 1
    return _read(buf, pos, MAX_VARLONG_BYTES)


def _read(buf: bytes, pos: int, limit: int) -> tuple[int, int]:
    raw = 0
    shift = 0
    try:
        for index in range(pos, pos + limit):
            byte = buf[index]
            raw |= (byte & 0x7F) << shift
            if byte < 0x80:
                return (raw >> 1) ^ -(raw & 1), index + 1
            shift += 7
    except IndexError:
        raise InvalidRecordError("record truncated inside a varint") from None
    raise InvalidRecordError(f"varint longer than {limit} bytes")


def write_varint(out: bytearray, value: int) -> None:
    """Append the zigzag varint (or varlong: same encoding) of `value` to `out`."""
    raw = (value << 1) ^ (value >> 63)
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def varint_size(value: int) -> int:
    raw = (value << 1) ^ (value >> 63)
    size = 1
    while raw >= 0x80:
        raw >>= 7
        size += 1
    return size
