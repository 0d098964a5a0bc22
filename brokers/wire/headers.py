"""Request and response headers (KIP-482 flexible versions add tagged fields).

Owns: parsing a request header straight from frame bytes and writing response headers. Parsing is
hand-written because it runs for every request and the layout is fixed: api_key int16,
api_version int16, correlation_id int32, client_id nullable int16-length string, then (header v2,
flexible request versions) a tagged-field section. Pure; thread-safe.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from brokers.wire.primitives import MalformedRequestError, read_uvarint

_FIXED = struct.Struct(">hhi")
_STRING_LENGTH = struct.Struct(">h")
_CORRELATION = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def parse_fixed(frame: memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): enough to answer even an unknown API."""
    if len(frame) < _FIXED.size:
        raise MalformedRequestError("request header truncated")
    api_key, api_version, correlation_id = _FIXED.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


def parse_request_header(frame: memoryview, flexible: bool) -> tuple[RequestHeader, int]:
    """Parse the header; return it and the offset where the request body starts."""
    api_key, api_version, correlation_id = parse_fixed(frame)
    pos = _FIXED.size
    if len(frame) < pos + 2:
        raise MalformedRequestError("client id length truncated")
    (length,) = _STRING_LENGTH.unpack_from(frame, pos)
    pos += 2
    client_id: str | None = None
    if length >= 0:
        if len(frame) < pos + length:
            raise MalformedRequestError("client id truncated")
        client_id = bytes(frame[pos : pos + length]).decode("utf-8", errors="replace")
        pos += length
    if flexible:
        pos = _skip_tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id), pos


def _skip_tagged_fields(frame: memoryview, pos: int) -> int:
    count, pos = read_uvarint(frame, pos)
    for _ in range(count):
        _tag, pos = read_uvarint(frame, pos)
        size, pos = read_uvarint(frame, pos)
        pos += size
        if pos > len(frame):
            raise MalformedRequestError("tagged field truncated")
    return pos


def response_header(correlation_id: int, flexible: bool) -> bytes:
    """Response header v0 (correlation id) or v1 (plus an empty tagged-field section)."""
    header = _CORRELATION.pack(correlation_id)
    return header + b"\x00" if flexible else header
