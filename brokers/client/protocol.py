"""The protocol logic of one client connection, apart from any socket: bytes in, answers out.

Owns: correlation ids, the queue of requests in flight, request framing (size prefix, request
header v1/v2), response framing (size limit checked on the prefix, before anything is buffered),
response headers (v0/v1) and decoding. A broker answers a connection's requests in the order they
were sent (Kafka processes one request per channel at a time), so a response must carry the
correlation id of the oldest request in flight; anything else is a protocol violation and the
connection is unusable, as in Kafka's NetworkClient. After a violation every `feed` raises again.
Not thread-safe: one owner (the asyncio connection) feeds it.
"""

from __future__ import annotations

import struct
from collections import deque
from dataclasses import dataclass
from typing import Any

from brokers.client.errors import (
    ConnectionClosedError,
    ProtocolViolationError,
    ResponseTooLargeError,
)
from brokers.client.messages import decode_response
from brokers.wire.errors import ErrorCode
from brokers.wire.framing import size_prefix
from brokers.wire.headers import scoped_header
from brokers.wire.messages import (
    encode_entity,
    is_flexible_request,
    read_uvarint,
    response_header_is_flexible,
)

DEFAULT_MAX_RESPONSE_BYTES = 100 * 1024 * 1024
API_VERSIONS = 18
_FIXED_HEADER = struct.Struct(">hhih")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_CORRELATION_LIMIT = 2**31


@dataclass(frozen=True, slots=True)
class InFlight:
    correlation_id: int
    api_key: int
    api_version: int


@dataclass(frozen=True, slots=True)
class Answer:
    correlation_id: int
    response: Any


class ClientProtocol:
    def __init__(
        self, client_id: str | None, max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES
    ) -> None:
        self._client_id = None if client_id is None else client_id.encode()
        self._max_response_bytes = max_response_bytes
        self._next_correlation = 0
        self._in_flight: deque[InFlight] = deque()
        self._buffer = bytearray()
        self._frame_size: int | None = None  # size of the frame being read, once its prefix is in
        self._failure: ProtocolViolationError | None = None

    @property
    def in_flight(self) -> int:
        return len(self._in_flight)

    def request(
        self, entity: Any, *, expect_response: bool = True, name_scope: str | None = None
    ) -> tuple[int, list[bytes]]:
        """Frame a kio request; returns its correlation id and the bytes to write, in order.

        `expect_response=False` is for acks=0 produce, which the broker never answers.
        `name_scope` (flexible versions only) limits a listing to names with that prefix
        (`brokers.wire.headers.NAME_SCOPE_TAG`).
        """
        api_key, version = int(entity.__api_key__), int(entity.__version__)
        correlation_id = self._next_correlation
        self._next_correlation = (correlation_id + 1) % _CORRELATION_LIMIT
        header = self._header(api_key, version, correlation_id)
        if name_scope is not None and is_flexible_request(api_key, version):
            header = scoped_header(header, name_scope)
        body = encode_entity(entity)
        if expect_response:
            self._in_flight.append(InFlight(correlation_id, api_key, version))
        return correlation_id, [size_prefix(len(header) + len(body)) + header, body]

    def _header(self, api_key: int, version: int, correlation_id: int) -> bytes:
        client_id = self._client_id
        length = -1 if client_id is None else len(client_id)
        header = _FIXED_HEADER.pack(api_key, version, correlation_id, length) + (client_id or b"")
        # Request header v2 (KIP-482) adds an empty tagged-field section for flexible versions.
        return header + b"\x00" if is_flexible_request(api_key, version) else header

    def feed(self, data: bytes | bytearray | memoryview) -> list[Answer]:
        """Take bytes from the socket; return the responses they complete, oldest first."""
        if self._failure is not None:
            raise self._failure
        self._buffer += data
        answers: list[Answer] = []
        try:
            while (size := self._next_frame_size()) is not None and len(self._buffer) >= size:
                # kio's reader wants a read-only buffer; views are released before the del.
                with (
                    memoryview(self._buffer) as view,
                    view.toreadonly() as readonly,
                    readonly[:size] as frame,
                ):
                    answers.append(self._answer(frame))
                del self._buffer[:size]
                self._frame_size = None
        except ProtocolViolationError as exc:
            self._failure = exc
            raise
        return answers

    def eof(self) -> None:
        """The broker closed the connection: say what was lost, if anything."""
        if self._buffer or self._frame_size is not None:
            raise ConnectionClosedError("connection closed in the middle of a response frame")
        if self._in_flight:
            raise ConnectionClosedError(
                f"connection closed with {len(self._in_flight)} request(s) unanswered"
            )

    def _next_frame_size(self) -> int | None:
        if self._frame_size is None:
            if len(self._buffer) < _INT32.size:
                return None
            (size,) = _INT32.unpack_from(self._buffer, 0)
            if size < _INT32.size:
                raise ProtocolViolationError(f"response frame of {size} bytes has no header")
            if size > self._max_response_bytes:
                raise ResponseTooLargeError(
                    f"response frame of {size} bytes over the limit of "
                    f"{self._max_response_bytes} bytes"
                )
            del self._buffer[: _INT32.size]
            self._frame_size = size
        return self._frame_size

    def _answer(self, frame: memoryview) -> Answer:
        (correlation_id,) = _INT32.unpack_from(frame, 0)
        if not self._in_flight:
            raise ProtocolViolationError(f"response {correlation_id} with no request in flight")
        expected = self._in_flight[0]
        if correlation_id != expected.correlation_id:
            raise ProtocolViolationError(
                f"response {correlation_id} out of order: expected {expected.correlation_id}"
            )
        self._in_flight.popleft()
        offset = _INT32.size
        if response_header_is_flexible(expected.api_key, expected.api_version):
            offset = _skip_tagged_fields(frame, offset)
        version = expected.api_version
        if expected.api_key == API_VERSIONS and _refused_api_versions(frame, offset):
            version = 0  # KIP-511: an unsupported ApiVersions version is answered in a v0 body
        return Answer(correlation_id, decode_response(expected.api_key, version, frame, offset))


def _refused_api_versions(frame: memoryview, offset: int) -> bool:
    if len(frame) < offset + _INT16.size:
        return False  # let the decoder report the truncation
    return bool(_INT16.unpack_from(frame, offset)[0] == ErrorCode.unsupported_version)


def _skip_tagged_fields(frame: memoryview, offset: int) -> int:
    try:
        count, offset = read_uvarint(frame, offset)
        for _ in range(count):
            _tag, offset = read_uvarint(frame, offset)
            size, offset = read_uvarint(frame, offset)
            offset += size
    except Exception:
        raise ProtocolViolationError("response header tagged fields truncated") from None
    if offset > len(frame):
        raise ProtocolViolationError("response header tagged fields truncated")
    return offset
