"""Produce request bodies (API key 0, v3–13; v9+ flexible) as a view of spans, and their rebuild.

Owns: parsing a Produce body into `ProduceRequestView` — names and numbers decoded, each
partition's record set kept as a view of the request buffer — and writing the body back out as
buffer parts with the topic names and transactional id replaced. The records are never decoded or
copied: the rebuilt body holds the very views the parse made (docs/gateway.md, "A request's way",
hot path). From v13 (KIP-516) a topic is named by its 16-byte id: the view keeps the id (its
name left "" for the caller to fill in from the id), and the rebuild writes the id unchanged,
ids being the fleet's own. Unknown tagged fields are dropped at every level: Produce ≤ 13 defines none, and a field
the gateway cannot read could carry a name it cannot prefix, so it is never forwarded (fail
closed). Pure; thread-safe.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from brokers.wire.primitives import MalformedRequestError, write_uvarint
from gateway.kafka.raw.reader import Parts, Reader, encode_length, encode_string

FIRST_VERSION = 3
LAST_VERSION = 13
FIRST_FLEXIBLE_VERSION = 9
TOPIC_ID_VERSION = 13
TOPIC_ID_SIZE = 16
_ACKS_TIMEOUT = struct.Struct(">hi")
_INDEX = struct.Struct(">i")
_INDEX_SIZE = struct.Struct(">ii")  # a classic partition's index and records length
_NO_TAGS = b"\x00"


@dataclass(frozen=True, slots=True)
class ProducePartition:
    index: int
    records: memoryview | None  # the record set as sent: a view of the request, never copied


@dataclass(frozen=True, slots=True)
class ProduceTopic:
    name: str  # v13: "" as parsed (the caller names it from the id)
    partitions: list[ProducePartition]
    topic_id: bytes = b""  # v13+: the 16-byte id the topic is named by


@dataclass(frozen=True, slots=True)
class ProduceRequestView:
    version: int
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: list[ProduceTopic]

    def records_bytes(self) -> int:
        """The size of every record set in the request (for quotas and metering)."""
        return sum(
            len(p.records) for t in self.topics for p in t.partitions if p.records is not None
        )


def parse_produce_request(body: memoryview, version: int) -> ProduceRequestView:
    """The request body (after the header) as a view; MalformedRequestError unless it is exactly
    one well-formed Produce body of this version."""
    flexible = _is_flexible(version)
    reader = Reader(body)
    transactional_id = reader.nullable_string(flexible)
    acks = reader.int16()
    timeout_ms = reader.int32()
    by_id = version >= TOPIC_ID_VERSION
    topic_size = (TOPIC_ID_SIZE + 2) if by_id else (3 if flexible else 6)  # key, count (tags)
    count = _count(reader, flexible, topic_size)
    topics = [_parse_topic(reader, flexible, by_id) for _ in range(count)]
    if flexible:
        reader.tagged_fields()
    reader.expect_end()
    return ProduceRequestView(version, transactional_id, acks, timeout_ms, topics)


def build_produce_request(
    view: ProduceRequestView,
    *,
    topics: list[ProduceTopic] | None = None,
    rename: Callable[[str], str],
    transactional_id: str | None,
) -> list[bytes | memoryview]:
    """The body with `topics` (default: all of the view's) under `rename(name)` and the given
    transactional id; each record set is a part of its own, the parse's view."""
    flexible = _is_flexible(view.version)
    chosen = view.topics if topics is None else topics
    out = Parts()
    out.write(encode_string(transactional_id, flexible))
    out.write(_ACKS_TIMEOUT.pack(view.acks, view.timeout_ms))
    out.write(encode_length(len(chosen), flexible, wide=True))
    by_id = view.version >= TOPIC_ID_VERSION
    for topic in chosen:
        _write_topic(out, topic, None if by_id else rename(topic.name), flexible)
    if flexible:
        out.write(_NO_TAGS)
    return out.finish()


def _is_flexible(version: int) -> bool:
    if not FIRST_VERSION <= version <= LAST_VERSION:
        raise ValueError(f"Produce v{version} is not handled raw (v{FIRST_VERSION}–{LAST_VERSION})")
    return version >= FIRST_FLEXIBLE_VERSION


def _count(reader: Reader, flexible: bool, item_size: int) -> int:
    count = reader.array_length(flexible, item_size)
    if count < 0:
        raise MalformedRequestError("null array in a Produce request")
    return count


def _parse_topic(reader: Reader, flexible: bool, by_id: bool) -> ProduceTopic:
    topic_id = b""
    if by_id:
        start = reader.pos
        topic_id = bytes(reader.buf[start : reader.skip(TOPIC_ID_SIZE)])
        name = ""
    else:
        name = reader.string(flexible)
    partition_size = 6 if flexible else 8  # index, the shortest records length (and tags)
    count = _count(reader, flexible, partition_size)
    partitions = [_parse_partition(reader, flexible) for _ in range(count)]
    if flexible:
        reader.tagged_fields()
    return ProduceTopic(name, partitions, topic_id)


def _parse_partition(reader: Reader, flexible: bool) -> ProducePartition:
    index = reader.int32()
    records = reader.nullable_bytes(flexible)
    if flexible:
        reader.tagged_fields()
    return ProducePartition(index, records)


def _write_topic(out: Parts, topic: ProduceTopic, name: str | None, flexible: bool) -> None:
    """`name` None: the topic goes by its id (v13+)."""
    out.write(topic.topic_id if name is None else encode_string(name, flexible))
    out.write(encode_length(len(topic.partitions), flexible, wide=True))
    for partition in topic.partitions:
        records = partition.records
        size = -1 if records is None else len(records)
        if flexible:
            out.write(_INDEX.pack(partition.index) + write_uvarint(size + 1))
        else:
            out.write(_INDEX_SIZE.pack(partition.index, size))
        if records is not None:
            out.view(records)
        if flexible:
            out.write(_NO_TAGS)
    if flexible:
        out.write(_NO_TAGS)
