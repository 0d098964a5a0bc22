"""Primitives shared by the hand-written codecs: varints and the malformed-request error.

Pure; thread-safe.
"""

from __future__ import annotations


class MalformedRequestError(Exception):
    """Bytes that do not decode as the request they claim to be: the connection is closed."""


def read_uvarint(buf: memoryview, pos: int) -> tuple[int, int]:
    """Unsigned varint (protobuf style) at pos → (value, next position)."""
    result = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end or shift > 28:
            raise MalformedRequestError("varint truncated or too long")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def write_uvarint(value: int) -> bytes:
    if value < 0x80:  # the common case: lengths and counts of a flexible version
        return bytes((value,))
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
