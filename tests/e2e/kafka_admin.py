"""Topic administration and offset queries for the e2e tests, all through confluent-kafka.

Owns: creating a topic with the AdminClient and waiting until every partition has a leader,
reading watermarks (ListOffsets earliest/latest), and reading every record of a topic by
assign/seek (the reference reader other tests compare with). Waits go through `tests.polling`.
Blocking; each call creates and closes its own clients, so functions are safe from any thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.polling import wait_until

ADMIN_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class StoredRecord:
    """One record as a consumer saw it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    config: Mapping[str, str] | None = None,
    *,
    security: Mapping[str, Any] | None = None,
) -> None:
    """CreateTopics through the AdminClient, then wait until Metadata shows every leader.
    `security`: extra librdkafka settings (e.g. SASL for the gateway)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(security or {})})
    futures = admin.create_topics(
        [
            NewTopic(
                name, num_partitions=partitions, replication_factor=1, config=dict(config or {})
            )
        ],
        operation_timeout=ADMIN_TIMEOUT_S,
    )
    futures[name].result(timeout=ADMIN_TIMEOUT_S)
    wait_for_leaders(admin, name, partitions)


def wait_for_leaders(admin: AdminClient, name: str, partitions: int) -> None:
    """Until Metadata (through `admin`) shows a leader for each of the topic's partitions."""

    def leaders_known() -> bool:
        topic = admin.list_topics(name, timeout=5).topics.get(name)
        if topic is None or topic.error is not None or len(topic.partitions) != partitions:
            return False
        return all(p.leader >= 0 and p.error is None for p in topic.partitions.values())

    wait_until(leaders_known, what=f"leaders of topic {name}", timeout=ADMIN_TIMEOUT_S)


def consumer_config(bootstrap: str, **extra: Any) -> dict[str, Any]:
    """A confluent consumer that only assigns (no group membership, no commits)."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": "pier-e2e-assign-only",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": True,
        **extra,
    }


def watermarks(bootstrap: str, topic: str, partition: int, **extra: Any) -> tuple[int, int]:
    """(log start offset, high watermark) via ListOffsets earliest/latest."""
    consumer = Consumer(consumer_config(bootstrap, **extra))
    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=10, cached=False
        )
        return int(low), int(high)
    finally:
        consumer.close()


def read_partitions(
    bootstrap: str,
    topic: str,
    start: Mapping[int, int],
    *,
    timeout: float = 60.0,
    **extra: Any,
) -> list[StoredRecord]:
    """Every record from `start[partition]` to each partition's end, via assign (not subscribe).

    Stops when every partition has reported end-of-partition at or past its high watermark at
    the time of the call; fails on any consumer error.
    """
    ends = {p: watermarks(bootstrap, topic, p, **extra)[1] for p in start}
    consumer = Consumer(consumer_config(bootstrap, **extra))
    records: list[StoredRecord] = []
    position = dict(start)
    try:
        consumer.assign([TopicPartition(topic, p, offset) for p, offset in start.items()])

        def at_ends() -> bool:
            if all(position[p] >= ends[p] for p in position):
                return True
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaException(error)
                record = to_stored(message)
                records.append(record)
                position[record.partition] = record.offset + 1
            return False

        wait_until(at_ends, what=f"{topic} read up to {ends}", timeout=timeout, interval=0)
    finally:
        consumer.close()
    return records


def to_stored(message: Message) -> StoredRecord:
    """A confluent-kafka Message as a StoredRecord (header values as bytes, as on the wire)."""
    _type, timestamp = message.timestamp()
    partition, offset = message.partition(), message.offset()
    assert partition is not None and offset is not None, "a record without a position"
    headers = message.headers() or []
    assert isinstance(headers, list), "librdkafka returns headers as a list of pairs"
    return StoredRecord(
        partition=partition,
        offset=offset,
        key=message.key(),
        value=message.value(),
        headers=tuple((name, v.encode() if isinstance(v, str) else v) for name, v in headers),
        timestamp_ms=timestamp,
    )
