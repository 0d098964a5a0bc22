"""Produce response bodies (API key 0, v3–13; v9+ flexible) renamed for a tenant on raw bytes.

Owns: one walk over the broker's answer that strips the tenant prefix from each topic name, drops
every topic that is not the tenant's (fail closed), sets the throttle time to the larger of the
broker's and the gateway's, and drops the top-level tagged fields (v10+ `node_endpoints` name
brokers, not the gateway). From v13 (KIP-516) a topic is its 16-byte id: `rename` is given the
id's 32 hex digits instead of a name and the id goes out unchanged when it is kept. Every partition goes out as the broker wrote it. An answer that carries
an error message, record errors or a tagged field other than a partition's `current_leader` is not
handled here (`None`: the caller takes the kio path, which scrubs messages), so the common answer
costs one pass over a few bytes per partition and no objects. Malformed input raises
`MalformedRequestError`. Pure; thread-safe.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from brokers.wire.primitives import MalformedRequestError
from brokers.wire.raw_reader import Parts, Reader, encode_length, encode_string

FIRST_VERSION = 3
LAST_VERSION = 13
FIRST_FLEXIBLE_VERSION = 9
TOPIC_ID_VERSION = 13
TOPIC_ID_SIZE = 16
_I32 = struct.Struct(">i")
_CURRENT_LEADER_TAG = 0  # the only partition tagged field (v10+) the gateway passes on


@dataclass(frozen=True, slots=True)
class ProduceAnswer:
    parts: list[bytes | memoryview]
    size: int


def rewrite_produce_response(
    body: memoryview,
    version: int,
    *,
    rename: Callable[[str], str | None],
    throttle_time_ms: int,
) -> ProduceAnswer | None:
    """The body for the tenant, or None when it needs the kio path (see the module)."""
    if not FIRST_VERSION <= version <= LAST_VERSION:
        raise ValueError(f"Produce v{version} is not handled raw")
    flexible = version >= FIRST_FLEXIBLE_VERSION
    reader = Reader(body)
    out = Parts()
    kept = 0
    by_id = version >= TOPIC_ID_VERSION
    for _ in range(_count(reader, flexible, TOPIC_ID_SIZE + 2 if by_id else 3 if flexible else 6)):
        if by_id:
            key = reader.pos
            topic_id = bytes(reader.buf[key : reader.skip(TOPIC_ID_SIZE)])
            name = None if rename(topic_id.hex()) is None else ""
        else:
            name = rename(reader.string(flexible))
        start = reader.pos
        if not _walk_partitions(reader, version, flexible):
            return None
        if flexible and not _no_tags(reader):
            return None
        if name is None:
            continue
        kept += 1
        out.write(topic_id if by_id else encode_string(name, flexible))
        out.write(reader.span(start))
    throttle = max(reader.int32(), throttle_time_ms)
    if flexible:
        reader.tagged_fields()  # node_endpoints (v10+): the broker's addresses, not passed on
    reader.expect_end()
    out.write(_I32.pack(throttle))
    if flexible:
        out.write(b"\x00")
    answer = encode_length(kept, flexible, wide=True) + b"".join(out.finish())
    return ProduceAnswer([answer], len(answer))


def _count(reader: Reader, flexible: bool, item_size: int) -> int:
    count = reader.array_length(flexible, item_size)
    if count < 0:
        raise MalformedRequestError("null array in a Produce response")
    return count


def _walk_partitions(reader: Reader, version: int, flexible: bool) -> bool:
    """Past one topic's partitions; False when one needs the kio path."""
    fixed = 4 + 2 + 8 + 8 + (8 if version >= 5 else 0)  # index … log start offset
    for _ in range(_count(reader, flexible, fixed)):
        reader.skip(fixed)
        if version >= 8:
            if _count(reader, flexible, 5) > 0:  # record errors
                return False
            if reader.nullable_string(flexible) is not None:  # an error message
                return False
        if flexible and not _only_current_leader(reader):
            return False
    return True


def _no_tags(reader: Reader) -> bool:
    return reader.uvarint() == 0


def _only_current_leader(reader: Reader) -> bool:
    """Past a partition's tagged fields; False when one is not `current_leader`."""
    for _ in range(reader.uvarint()):
        if reader.uvarint() != _CURRENT_LEADER_TAG:
            return False
        reader.skip(reader.uvarint())
    return True
