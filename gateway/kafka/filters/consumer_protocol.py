"""The bytes a `consumer`-type group carries inside JoinGroup, SyncGroup and DescribeGroups,
parsed and rebuilt with their topic names renamed (prefixed in, stripped out).

Owns the gateway's codec of Kafka's ConsumerProtocolSubscription and ConsumerProtocolAssignment,
versions 0-3 (non-flexible; `clients/src/main/resources/common/message/`):
- Subscription: version int16, topics [string], user_data nullable bytes, v1+ owned_partitions
  [topic string, partitions [int32]], v2+ generation_id int32 (-1), v3+ rack_id nullable string.
- Assignment: version int16, assigned_partitions [topic string, partitions [int32]], user_data.
A version above 3 is read with version 3's fields, as Kafka's `ConsumerProtocol` does (newer
versions only append fields); the bytes after them are kept verbatim (`tail`) and written back, so
a newer client's extra fields survive the rewrite, unrenamed. Bytes of versions 0-3 must end with
their last field. Anything else raises `MalformedConsumerProtocol`: a request carrying it is
refused (INCONSISTENT_GROUP_PROTOCOL), a response's copy is blanked (fail closed); see
`groups_common`. `rename` returning None drops the topic (not the tenant's, on the way out).
Independent of `brokers.coordinator`. Pure; thread-safe; runs on the event loop.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, replace

KNOWN_VERSION = 3
Rename = Callable[[str], str | None]
TopicPartitions = tuple[tuple[str, tuple[int, ...]], ...]


class MalformedConsumerProtocol(ValueError):
    """The bytes are not a consumer-protocol subscription or assignment."""


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: TopicPartitions = ()
    generation_id: int = -1
    rack_id: str | None = None
    tail: bytes = b""


@dataclass(frozen=True, slots=True)
class Assignment:
    version: int
    assigned_partitions: TopicPartitions
    user_data: bytes | None = None
    tail: bytes = b""


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> int:
        try:
            (value,) = struct.unpack_from(fmt, self.data, self.at)
        except struct.error as e:
            raise MalformedConsumerProtocol("truncated") from e
        self.at += struct.calcsize(fmt)
        return int(value)

    def raw(self, size: int) -> bytes:
        if size < 0 or self.at + size > len(self.data):
            raise MalformedConsumerProtocol("truncated")
        self.at += size
        return self.data[self.at - size : self.at]

    def string(self, nullable: bool = False) -> str | None:
        size = self.take(">h")
        if size == -1 and nullable:
            return None
        try:
            return self.raw(size).decode()
        except UnicodeDecodeError as e:
            raise MalformedConsumerProtocol("not UTF-8") from e

    def name(self) -> str:
        return str(self.string())

    def nullable_bytes(self) -> bytes | None:
        size = self.take(">i")
        return None if size == -1 else self.raw(size)

    def count(self) -> int:
        size = self.take(">i")
        if size < 0 or size > len(self.data):
            raise MalformedConsumerProtocol("bad array length")
        return size

    def topic_partitions(self) -> TopicPartitions:
        return tuple(
            (self.name(), tuple(self.take(">i") for _ in range(self.count())))
            for _ in range(self.count())
        )

    def version(self) -> int:
        version = self.take(">h")
        if version < 0:
            raise MalformedConsumerProtocol(f"version {version}")
        return version

    def tail(self, version: int) -> bytes:
        rest = self.data[self.at :]
        if rest and version <= KNOWN_VERSION:
            raise MalformedConsumerProtocol("trailing bytes")
        return rest


def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def _bytes(value: bytes | None) -> bytes:
    return struct.pack(">i", -1) if value is None else struct.pack(">i", len(value)) + value


def _topic_partitions(entries: TopicPartitions) -> bytes:
    out = [struct.pack(">i", len(entries))]
    for topic, partitions in entries:
        out += [_string(topic), struct.pack(f">i{len(partitions)}i", len(partitions), *partitions)]
    return b"".join(out)


def parse_subscription(data: bytes) -> Subscription:
    reader = _Reader(data)
    version = reader.version()
    topics = tuple(reader.name() for _ in range(reader.count()))
    user_data = reader.nullable_bytes()
    owned = reader.topic_partitions() if version >= 1 else ()
    generation = reader.take(">i") if version >= 2 else -1
    rack = reader.string(nullable=True) if version >= 3 else None
    return Subscription(version, topics, user_data, owned, generation, rack, reader.tail(version))


def subscription_topic_count(data: bytes) -> int:
    """How many topics a subscription names, read from its head alone (0 when too short)."""
    if len(data) < 6:
        return 0
    return max(0, int(struct.unpack_from(">i", data, 2)[0]))


def build_subscription(sub: Subscription) -> bytes:
    topics = b"".join(_string(t) for t in sub.topics)
    out = [struct.pack(">hi", sub.version, len(sub.topics)), topics, _bytes(sub.user_data)]
    if sub.version >= 1:
        out.append(_topic_partitions(sub.owned_partitions))
    if sub.version >= 2:
        out.append(struct.pack(">i", sub.generation_id))
    if sub.version >= 3:
        out.append(_string(sub.rack_id))
    return b"".join(out) + sub.tail


def parse_assignment(data: bytes) -> Assignment:
    reader = _Reader(data)
    version = reader.version()
    assigned = reader.topic_partitions()
    user_data = reader.nullable_bytes()
    return Assignment(version, assigned, user_data, reader.tail(version))


def build_assignment(assignment: Assignment) -> bytes:
    partitions = _topic_partitions(assignment.assigned_partitions)
    head = struct.pack(">h", assignment.version) + partitions + _bytes(assignment.user_data)
    return head + assignment.tail


def _renamed(entries: TopicPartitions, rename: Rename) -> TopicPartitions:
    return tuple((n, p) for t, p in entries if (n := rename(t)) is not None)


def rename_subscription(data: bytes, rename: Rename) -> bytes:
    sub = parse_subscription(data)
    topics = tuple(n for t in sub.topics if (n := rename(t)) is not None)
    owned = _renamed(sub.owned_partitions, rename)
    return build_subscription(replace(sub, topics=topics, owned_partitions=owned))


def rename_assignment(data: bytes, rename: Rename) -> bytes:
    assignment = parse_assignment(data)
    partitions = _renamed(assignment.assigned_partitions, rename)
    return build_assignment(replace(assignment, assigned_partitions=partitions))
