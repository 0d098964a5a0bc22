"""Request and response headers (KIP-482 flexible versions add tagged fields).

Owns: parsing a request header straight from frame bytes and writing response headers. Parsing is
hand-written because it runs for every request and the layout is fixed: api_key int16,
api_version int16, correlation_id int32, client_id nullable int16-length string, then (header v2,
flexible request versions) a tagged-field section. Kafka defines no tagged field of the request
header and skips unknown ones; Pier reads one, `NAME_SCOPE_TAG`: the fleet-name prefix a listing
is limited to (ListGroups v3+, ListTransactions). The gateway sets it to the tenant's prefix
(`scoped_header`), so a tenant's listing costs a broker the tenant's names, not every tenant's;
it only narrows what the request would list. Pure; thread-safe.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from brokers.wire.primitives import MalformedRequestError, read_uvarint, write_uvarint

_FIXED = struct.Struct(">hhi")
_STRING_LENGTH = struct.Struct(">h")
_CORRELATION = struct.Struct(">i")
NAME_SCOPE_TAG = 0x5049  # "PI": Pier's own, far from any tag Kafka may give the header


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    name_scope: str | None = None  # NAME_SCOPE_TAG: listings limited to names with this prefix


def parse_fixed(frame: memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id): enough to answer even an unknown API."""
    if len(frame) < _FIXED.size:
        raise MalformedRequestError("request header truncated")
    api_key, api_version, correlation_id = _FIXED.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


def parse_request_header(frame: memoryview, flexible: bool) -> tuple[RequestHeader, int]:
    """Parse the header; return it and the offset where the request body starts."""
    api_key, api_version, correlation_id = parse_fixed(frame)
    client_id, pos = _client_id(frame)
    scope = None
    if flexible:
        pos, scope = _tagged_fields(frame, pos)
    return RequestHeader(api_key, api_version, correlation_id, client_id, scope), pos


def _client_id(frame: memoryview) -> tuple[str | None, int]:
    pos = _FIXED.size
    if len(frame) < pos + 2:
        raise MalformedRequestError("client id length truncated")
    (length,) = _STRING_LENGTH.unpack_from(frame, pos)
    pos += 2
    if length < 0:
        return None, pos
    if len(frame) < pos + length:
        raise MalformedRequestError("client id truncated")
    return bytes(frame[pos : pos + length]).decode("utf-8", errors="replace"), pos + length


def _tagged_fields(frame: memoryview, pos: int) -> tuple[int, str | None]:
    """Skip the header's tagged fields; the name scope among them, if any."""
    scope = None
    count, pos = read_uvarint(frame, pos)
    for _ in range(count):
        tag, pos = read_uvarint(frame, pos)
        size, pos = read_uvarint(frame, pos)
        if pos + size > len(frame):
            raise MalformedRequestError("tagged field truncated")
        if tag == NAME_SCOPE_TAG:
            scope = bytes(frame[pos : pos + size]).decode("utf-8", errors="replace")
        pos += size
    return pos, scope


def untagged_header(header: memoryview) -> memoryview:
    """A flexible request header (v2) without tagged fields: `header` itself when it has none."""
    _client, end = _client_id(header)
    if len(header) == end + 1 and header[end] == 0:
        return header
    return memoryview(bytes(header[:end]) + b"\x00")


def scoped_header(header: memoryview | bytes, scope: str) -> bytes:
    """A flexible request header (v2) with its tagged fields replaced by the name scope."""
    view = memoryview(header)
    _client, end = _client_id(view)
    encoded = scope.encode()
    return b"".join(
        (
            view[:end],
            write_uvarint(1),
            write_uvarint(NAME_SCOPE_TAG),
            write_uvarint(len(encoded)),
            encoded,
        )
    )


def response_header(correlation_id: int, flexible: bool) -> bytes:
    """Response header v0 (correlation id) or v1 (plus an empty tagged-field section)."""
    header = _CORRELATION.pack(correlation_id)
    return header + b"\x00" if flexible else header
