"""Fetch response bodies (API key 1, v4–18; v12+ flexible) rewritten for a tenant on raw bytes.

Owns: one walk over the broker's answer that strips the tenant prefix from each topic name, drops
every topic that is not the tenant's (fail closed, as Kroxylicious' MultiTenantFilter does),
replaces the throttle time, and — for a throttled fetch, which Kafka answers with no data — swaps
each partition's records for an empty record set while keeping the partition, its offsets and its
error code. Everything else (top-level error and session id, aborted transactions, the preferred
read replica of v11+, the tagged fields of v12 at every level) is passed through untouched, and
record sets are never decoded or copied: a kept topic's partitions go out as one view of the
response buffer. Malformed input raises `MalformedRequestError` (the reader's error, whichever
side sent it). From v13 (KIP-516) a topic is its 16-byte id: `rename` is given the id's 32 hex
digits and the id goes out unchanged when kept. From v16 the response's tagged fields are dropped:
`node_endpoints` (KIP-951) names brokers, not the gateway (a partition's `current_leader` is a
node id and epoch, the same through the gateway, and passes). Pure; thread-safe.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from brokers.wire.primitives import MalformedRequestError
from brokers.wire.raw_reader import Parts, Reader, encode_length, encode_string

FIRST_VERSION = 4
LAST_VERSION = 18
FIRST_FLEXIBLE_VERSION = 12
TOPIC_ID_VERSION = 13
NODE_ENDPOINTS_VERSION = 16
TOPIC_ID_SIZE = 16
_I32 = struct.Struct(">i")
_ABORTED_TRANSACTION = 16  # producer id, first offset


@dataclass(frozen=True, slots=True)
class FetchRewrite:
    parts: list[bytes | memoryview]  # for transport.writelines
    size: int  # sum of the parts' lengths
    bytes_per_topic: dict[str, int]  # record bytes the client receives, per kept (renamed) topic


@dataclass(frozen=True, slots=True)
class _Layout:
    flexible: bool
    session: bool  # top-level error code and session id (v7+)
    partition_fixed: int  # index, error, high watermark, last stable, log start (v5+) offsets
    preferred_replica: bool  # v11+
    partition_size: int  # the shortest encoding of one partition
    topic_size: int  # the shortest encoding of one topic
    by_id: bool = False  # v13+: topics are 16-byte ids
    drop_tags: bool = False  # v16+: the response's tagged fields are not passed on


def _layout(version: int) -> _Layout:
    flexible = version >= FIRST_FLEXIBLE_VERSION
    fixed = 4 + 2 + 8 + 8 + (8 if version >= 5 else 0)
    replica = version >= 11
    prefix = 1 if flexible else 4  # the shortest array or bytes length
    partition = fixed + prefix + (4 if replica else 0) + prefix + (1 if flexible else 0)
    by_id = version >= TOPIC_ID_VERSION
    key = TOPIC_ID_SIZE if by_id else (1 if flexible else 2)
    topic = key + prefix + (1 if flexible else 0)
    drop = version >= NODE_ENDPOINTS_VERSION
    return _Layout(flexible, version >= 7, fixed, replica, partition, topic, by_id, drop)


_LAYOUTS = {v: _layout(v) for v in range(FIRST_VERSION, LAST_VERSION + 1)}


def rewrite_fetch_response(
    body: memoryview,
    version: int,
    *,
    rename: Callable[[str], str | None],
    drop_records: bool,
    throttle_time_ms: int,
) -> FetchRewrite:
    """The body for the tenant: topics under `rename(name)`, those it maps to None left out.
    `bytes_per_topic` has every kept topic (0 for all of them when `drop_records`)."""
    layout = _version_layout(version)
    reader = Reader(body)
    reader.int32()  # the broker's throttle time, replaced below
    error_and_session = reader.skip(6) if layout.session else reader.pos
    head = _I32.pack(throttle_time_ms) + bytes(body[4:error_and_session])
    out = Parts()
    per_topic: dict[str, int] = {}
    kept = _rewrite_topics(reader, layout, out, per_topic, rename, drop_records)
    if layout.flexible:
        start = reader.pos
        reader.tagged_fields()
        out.write(b"\x00" if layout.drop_tags else reader.span(start))
    reader.expect_end()
    head += encode_length(kept, layout.flexible, wide=True)
    return FetchRewrite(_prepend(head, out.finish()), out.size + len(head), per_topic)


def _rewrite_topics(
    reader: Reader,
    layout: _Layout,
    out: Parts,
    per_topic: dict[str, int],
    rename: Callable[[str], str | None],
    drop_records: bool,
) -> int:
    """Write the kept topics; returns how many entries were kept. A broker may list one topic
    in several entries (Kafka groups only consecutive partitions), so entries ≠ names."""
    kept = 0
    for _ in range(_count(reader, layout.flexible, layout.topic_size)):
        key = _topic_key(reader, layout)
        name = rename(key.hex() if isinstance(key, bytes) else key)
        if name is None:
            _walk_topic(reader, layout)
            continue
        kept += 1
        out.write(key if isinstance(key, bytes) else encode_string(name, layout.flexible))
        if drop_records:
            _write_without_records(reader, layout, out)
            per_topic.setdefault(name, 0)
        else:
            start = reader.pos
            size = _walk_topic(reader, layout)
            out.view(reader.span(start))
            per_topic[name] = per_topic.get(name, 0) + size
    return kept


def fetch_records_bytes(body: memoryview, version: int) -> int:
    """The size of every record set in a Fetch response body, all topics."""
    layout = _version_layout(version)
    reader = Reader(body)
    reader.skip(10 if layout.session else 4)
    total = 0
    for _ in range(_count(reader, layout.flexible, layout.topic_size)):
        _topic_key(reader, layout)
        total += _walk_topic(reader, layout)
    if layout.flexible:
        reader.tagged_fields()
    reader.expect_end()
    return total


def _topic_key(reader: Reader, layout: _Layout) -> str | bytes:
    """A topic's name, or from v13 its 16-byte id."""
    if not layout.by_id:
        return reader.string(layout.flexible)
    start = reader.pos
    return bytes(reader.buf[start : reader.skip(TOPIC_ID_SIZE)])


def _version_layout(version: int) -> _Layout:
    layout = _LAYOUTS.get(version)
    if layout is None:
        raise ValueError(f"Fetch v{version} is not handled raw (v{FIRST_VERSION}–{LAST_VERSION})")
    return layout


def _count(reader: Reader, flexible: bool, item_size: int) -> int:
    count = reader.array_length(flexible, item_size)
    if count < 0:
        raise MalformedRequestError("null array in a Fetch response")
    return count


def _prepend(head: bytes, parts: list[bytes | memoryview]) -> list[bytes | memoryview]:
    if parts and isinstance(parts[0], bytes):
        parts[0] = head + parts[0]
    else:
        parts.insert(0, head)
    return parts


def _walk_topic(reader: Reader, layout: _Layout) -> int:
    """Past one topic's partitions (and tags); returns its record bytes."""
    total = 0
    for _ in range(_count(reader, layout.flexible, layout.partition_size)):
        _partition_head(reader, layout)
        total += _skip_records(reader, layout.flexible)
        if layout.flexible:
            reader.tagged_fields()
    if layout.flexible:
        reader.tagged_fields()
    return total


def _write_without_records(reader: Reader, layout: _Layout, out: Parts) -> None:
    """Copy one topic's partitions (no records here, so the bytes are few) with empty records."""
    flexible = layout.flexible
    empty = encode_length(0, flexible, wide=True)
    start = reader.pos
    for _ in range(_count(reader, flexible, layout.partition_size)):
        _partition_head(reader, layout)
        out.write(reader.span(start))
        _skip_records(reader, flexible)
        out.write(empty)
        start = reader.pos
        if flexible:
            reader.tagged_fields()
    if flexible:
        reader.tagged_fields()
    out.write(reader.span(start))


def _partition_head(reader: Reader, layout: _Layout) -> None:
    """Past everything of a partition before its records."""
    reader.skip(layout.partition_fixed)
    flexible = layout.flexible
    count = reader.array_length(flexible, _ABORTED_TRANSACTION + flexible)
    if count > 0 and flexible:
        for _ in range(count):
            reader.skip(_ABORTED_TRANSACTION)
            reader.tagged_fields()
    elif count > 0:
        reader.skip(count * _ABORTED_TRANSACTION)
    if layout.preferred_replica:
        reader.skip(4)


def _skip_records(reader: Reader, flexible: bool) -> int:
    size = reader.bytes_length(flexible)
    if size <= 0:
        return 0
    reader.skip(size)
    return size
