"""Size-prefixed framing of the Kafka protocol: a big-endian int32 length, then that many bytes.

Owns: the limits a frame must respect before anything is allocated for it. Pure; thread-safe.
The listener reads the 4-byte prefix, asks `check_frame_size`, and only then reads the body, so a
hostile 2 GiB prefix costs nothing (DESIGN.md "Limits").
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

SIZE_PREFIX = struct.Struct(">i")
DEFAULT_MAX_REQUEST_BYTES = 100 * 1024 * 1024  # socket.request.max.bytes
PRE_AUTH_MAX_REQUEST_BYTES = 512 * 1024
MIN_REQUEST_BYTES = 8  # api_key, api_version, correlation_id


class FrameSizeError(Exception):
    """The size prefix is negative, too small for a header, or over the connection's limit."""


@dataclass(frozen=True, slots=True)
class FrameLimits:
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES
    pre_auth_max_request_bytes: int = PRE_AUTH_MAX_REQUEST_BYTES

    def limit(self, authenticated: bool) -> int:
        return self.max_request_bytes if authenticated else self.pre_auth_max_request_bytes


def frame_size(prefix: bytes, limit: int) -> int:
    """Decode and check a size prefix; raise FrameSizeError before any allocation."""
    size: int = SIZE_PREFIX.unpack(prefix)[0]
    if size < MIN_REQUEST_BYTES:
        raise FrameSizeError(f"frame size {size} below the {MIN_REQUEST_BYTES}-byte header")
    if size > limit:
        raise FrameSizeError(f"frame size {size} over the limit of {limit} bytes")
    return size


def size_prefix(length: int) -> bytes:
    return SIZE_PREFIX.pack(length)
