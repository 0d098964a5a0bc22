"""Produce request bodies (API key 0, v3–13; v9+ flexible) read as a view of spans.

Owns: parsing a Produce body into `ProduceRequestView`: names and numbers decoded, each
partition's record set kept as a view of the request buffer, never decoded or copied. The broker's
Produce handler reads its requests this way (kio's reader would copy every record set into a new
bytes object: a tenth of a broker's CPU on 1 KiB uncompressed produce, docs/benchmarks.md), and
the gateway renames them from it (`gateway.kafka.raw.produce_request` writes them back out). From
v13 (KIP-516) a topic is named by its 16-byte id: the view keeps the id and leaves its name ""
for the caller to fill in. Unknown tagged fields are skipped at every level: Produce ≤ 13 defines
none. Every length is checked against the bytes left (`raw_reader.Reader`): a malformed body is
a `MalformedRequestError`, as kio's would be. Pure; thread-safe.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from brokers.wire.primitives import MalformedRequestError
from brokers.wire.raw_reader import Reader

FIRST_VERSION = 3
LAST_VERSION = 13
FIRST_FLEXIBLE_VERSION = 9
TOPIC_ID_VERSION = 13
TOPIC_ID_SIZE = 16
# Fixed-width runs of the body, shared with the gateway's rebuild.
ACKS_TIMEOUT = struct.Struct(">hi")
PARTITION_INDEX = struct.Struct(">i")
CLASSIC_PARTITION_HEAD = struct.Struct(">ii")  # a classic partition's index and records length


@dataclass(slots=True)  # not frozen: one per partition, and a frozen one is 6x as slow to build
class ProducePartition:
    index: int
    records: memoryview | None  # the record set as sent: a view of the request, never copied


@dataclass(slots=True)  # not frozen, as the partitions
class ProduceTopic:
    name: str  # v13: "" as parsed (the caller names it from the id)
    partitions: list[ProducePartition]
    topic_id: bytes = b""  # v13+: the 16-byte id the topic is named by


@dataclass(slots=True)  # not frozen, as the partitions
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
    flexible = is_flexible(version)
    reader = Reader(body)
    transactional_id = reader.nullable_string(flexible)
    start = reader.pos
    reader.skip(ACKS_TIMEOUT.size)
    acks, timeout_ms = ACKS_TIMEOUT.unpack_from(body, start)
    by_id = version >= TOPIC_ID_VERSION
    topic_size = (TOPIC_ID_SIZE + 2) if by_id else (3 if flexible else 6)  # key, count (tags)
    count = _count(reader, flexible, topic_size)
    topics = [_parse_topic(reader, flexible, by_id) for _ in range(count)]
    if flexible:
        reader.tagged_fields()
    reader.expect_end()
    return ProduceRequestView(version, transactional_id, acks, timeout_ms, topics)


def is_flexible(version: int) -> bool:
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
    if flexible:
        partitions = _compact_partitions(reader, count)
        reader.tagged_fields()
    else:
        partitions = _classic_partitions(reader, count)
    return ProduceTopic(name, partitions, topic_id)


# The partition loops read the buffer directly rather than through `Reader`'s methods: a
# request of many small batches (the OpenMessaging Benchmark's shape) spends most of its parse
# here. Every length is checked against the bytes left before it is used, as `Reader` does.


def _classic_partitions(reader: Reader, count: int) -> list[ProducePartition]:
    buf, pos, end = reader.buf, reader.pos, len(reader.buf)
    partitions = []
    for _ in range(count):
        if end - pos < 8:
            raise MalformedRequestError("Produce partition truncated")
        index, size = CLASSIC_PARTITION_HEAD.unpack_from(buf, pos)
        pos += 8
        if size < -1 or size > end - pos:
            raise MalformedRequestError(f"records of {size} bytes claimed, {end - pos} left")
        if size < 0:
            partitions.append(ProducePartition(index, None))
            continue
        partitions.append(ProducePartition(index, buf[pos : pos + size]))
        pos += size
    reader.pos = pos
    return partitions


def _compact_partitions(reader: Reader, count: int) -> list[ProducePartition]:
    buf, pos, end = reader.buf, reader.pos, len(reader.buf)
    partitions = []
    for _ in range(count):
        if end - pos < 6:  # index, a one-byte length, no tags: the shortest partition
            raise MalformedRequestError("Produce partition truncated")
        index = PARTITION_INDEX.unpack_from(buf, pos)[0]
        pos += 4
        first, second = buf[pos], buf[pos + 1]  # the shortest partition leaves both in range
        if first < 0x80:  # a one-byte length (up to 126 bytes of records)
            size = first - 1
            pos += 1
        elif second < 0x80:  # two bytes (up to 16 KiB)
            size = (first & 0x7F | second << 7) - 1
            pos += 2
        else:
            reader.pos = pos
            size = reader.uvarint() - 1
            pos = reader.pos
        if size < -1 or size > end - pos:
            raise MalformedRequestError(f"records of {size} bytes claimed, {end - pos} left")
        records = None
        if size >= 0:
            records = buf[pos : pos + size]
            pos += size
        if pos < end and buf[pos] == 0:  # no tagged fields: the usual case
            pos += 1
        else:
            reader.pos = pos
            reader.tagged_fields()
            pos = reader.pos
        partitions.append(ProducePartition(index, records))
    reader.pos = pos
    return partitions
