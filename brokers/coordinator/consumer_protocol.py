"""The consumer protocol's subscription prefix: which topics a `consumer`-type member wants.

Owns: `subscribed_topics(metadata)` — reads the version-0 prefix every ConsumerProtocol
subscription version starts with (version int16, topics [string]), as Kafka's coordinator does to
know which topics a group consumes (OffsetDelete's GROUP_SUBSCRIBED_TO_TOPIC, offset expiry of
stable groups). `encode_subscription` builds one (tests, benchmarks). Pure; thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable

from brokers.coordinator.binary import Reader, Writer

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscribed_topics(metadata: bytes) -> frozenset[str]:
    """Topics of one member's subscription; GroupRecordError when it does not parse."""
    reader = Reader(metadata)
    reader.int16()  # version: every version keeps the v0 prefix
    return frozenset(reader.string() for _ in range(reader.array_length()))


def encode_subscription(topics: Iterable[str], user_data: bytes = b"", version: int = 0) -> bytes:
    """A ConsumerProtocolSubscription of `version` 0 (topics, user data)."""
    names = list(topics)
    writer = Writer().int16(version).int32(len(names))
    for name in names:
        writer.string(name)
    return writer.bytes_(user_data).build()
