"""OffsetCommit response bodies (API key 8, v2–9; v8+ flexible) encoded without kio's generic writer.

Owns: `encode_offset_commit_response(response) -> bytes | None`, the dispatcher's fast path for the
answer every OffsetCommit gets (OMB's consumers commit after every batch they read, so at its
rates a third of a broker's requests are OffsetCommits): struct-packed, per partition an index
and an error code, instead of kio's field-by-field walk of the dataclasses. Versions outside
v2–9 return None and the caller encodes with kio; tests compare the two byte for byte on every
version. Pure; thread-safe.
"""

from __future__ import annotations

import struct
from typing import Any

from brokers.server.produce_response import _length, _milliseconds, _string  # shared encoders

FIRST_VERSION = 2
LAST_VERSION = 9
FIRST_THROTTLE_VERSION = 3
FIRST_FLEXIBLE_VERSION = 8
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_PARTITION = struct.Struct(">ih")  # partition index, error code
_PARTITION_FLEXIBLE = struct.Struct(">ihB")  # ... and no tagged fields


def encode_offset_commit_response(response: Any) -> bytes | None:
    """The body of `response` (a kio OffsetCommitResponse), or None for kio's path."""
    version = int(response.__version__)
    if not FIRST_VERSION <= version <= LAST_VERSION:
        return None
    flexible = version >= FIRST_FLEXIBLE_VERSION
    out = bytearray()
    if version >= FIRST_THROTTLE_VERSION:
        out += _I32.pack(_milliseconds(response.throttle_time))
    out += _length(len(response.topics), flexible)
    for topic in response.topics:
        out += _string(topic.name, flexible)
        partitions = topic.partitions
        out += _length(len(partitions), flexible)
        if flexible:
            for p in partitions:
                out += _PARTITION_FLEXIBLE.pack(p.partition_index, p.error_code, 0)
            out.append(0)  # the topic's tagged fields: none
        else:
            for p in partitions:
                out += _PARTITION.pack(p.partition_index, p.error_code)
    if flexible:
        out.append(0)  # the response's tagged fields: none
    return bytes(out)
