"""Size-prefixed framing of the Kafka protocol: a big-endian int32 length, then that many bytes.

Owns: the limits a frame must respect before anything is allocated for it. Pure; thread-safe.
A connection's frame reader checks each size prefix (`check_request_size`) before it allocates
anything for the body, so a hostile 2 GiB prefix costs nothing (docs/broker-config.md,
`socket.request.max.bytes`). A prefix that spells the start of an HTTP request line ("GET ",
"POST", ...) or a TLS record header is not a size at all: someone pointed an HTTP or TLS client
at the plaintext Kafka port, and `NotKafkaProtocolError` says so instead of reporting a
nonsensical frame size.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

SIZE_PREFIX = struct.Struct(">i")
DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024  # socket.request.max.bytes
PRE_AUTH_MAX_REQUEST_BYTES = 512 * 1024
MIN_REQUEST_BYTES = 8  # api_key, api_version, correlation_id
# The first four bytes of an HTTP/1.x request line (or the HTTP/2 preface), read as a size.
HTTP_METHOD_PREFIXES = frozenset(
    (b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC", b"CONN", b"TRAC", b"PRI ")
)
_TLS_HANDSHAKE = 0x16  # a TLS record header: content type 22 (handshake), then version 3.x


class FrameSizeError(Exception):
    """The size prefix is negative, too small for a header, or over the connection's limit."""


class NotKafkaProtocolError(FrameSizeError):
    """The size prefix is the start of an HTTP request line or a TLS handshake."""

    def __init__(self, protocol: str, message: str) -> None:
        super().__init__(message)
        self.protocol = protocol  # "HTTP" or "TLS"


@dataclass(frozen=True, slots=True)
class FrameLimits:
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    pre_auth_max_request_bytes: int = PRE_AUTH_MAX_REQUEST_BYTES

    def limit(self, authenticated: bool) -> int:
        return self.max_request_bytes if authenticated else self.pre_auth_max_request_bytes


def check_request_size(size: int, limit: int) -> None:
    """Check a decoded size prefix (`brokers.wire.frame_reader.CheckSize`); raise FrameSizeError
    before any allocation."""
    if size < MIN_REQUEST_BYTES:
        raise FrameSizeError(f"frame size {size} below the {MIN_REQUEST_BYTES}-byte header")
    if size > limit:
        foreign = foreign_protocol(SIZE_PREFIX.pack(size))
        if foreign is not None:
            try:
                raise foreign
            finally:  # no cycle through this frame: the caller's frames are let go at once
                del foreign
        raise FrameSizeError(f"frame size {size} over the limit of {limit} bytes")


def foreign_protocol(prefix: bytes) -> NotKafkaProtocolError | None:
    """The error for a prefix that starts an HTTP request or a TLS handshake, else None."""
    if prefix in HTTP_METHOD_PREFIXES:
        method = prefix.decode("ascii").strip()
        return NotKafkaProtocolError(
            "HTTP",
            f"an HTTP request ({method}) arrived on the Kafka protocol port; HTTP requests are "
            "not served here (the admin and HTTP APIs listen on their own ports)",
        )
    if prefix[0] == _TLS_HANDSHAKE and prefix[1] == 3:
        return NotKafkaProtocolError(
            "TLS",
            "a TLS handshake arrived on a plaintext Kafka protocol port; connect without TLS "
            "(security.protocol=PLAINTEXT)",
        )
    return None


def size_prefix(length: int) -> bytes:
    return SIZE_PREFIX.pack(length)
