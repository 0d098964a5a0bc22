"""One driver per real Kafka client, so the round-trip test runs the same scenario through each.

Owns: producing a list of `Outgoing` records with a codec, reading a topic back by assign/seek,
and ListOffsets by timestamp (`offsets_for_times`), for confluent-kafka (librdkafka), kafka-python,
aiokafka and the kcat binary. Every driver creates and closes its own clients per call (aiokafka on
its own event loop via `asyncio.run`). Blocking; safe from any thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition

from tests.e2e.kafka_admin import StoredRecord, consumer_config, read_partitions
from tests.e2e.workload import Outgoing

NOT_FOUND = -1  # ListOffsets answer when no record has a timestamp at or after the target
DELIVERY_TIMEOUT_S = 120.0
DeliveryCallback = Callable[[KafkaError | None, Message], None]


class ClientDriver(Protocol):
    name: str
    explicit_timestamps: bool

    def produce(self, bootstrap: str, topic: str, records: Sequence[Outgoing], codec: str) -> None:
        """Produce every record (acks=all) and return once each is acknowledged."""

    def read(self, bootstrap: str, topic: str, partitions: int) -> list[StoredRecord]:
        """Every record of the topic, assigned partitions read from offset 0 to the end."""

    def offsets_for_times(
        self, bootstrap: str, topic: str, targets: Mapping[int, int]
    ) -> dict[int, int]:
        """Partition → first offset with timestamp ≥ target, or NOT_FOUND."""


class ConfluentDriver:
    """`security`: extra librdkafka settings for every client (e.g. SASL for the gateway)."""

    name = "confluent-kafka"
    explicit_timestamps = True

    def __init__(self, security: Mapping[str, Any] | None = None) -> None:
        self.security = dict(security or {})

    def produce(self, bootstrap: str, topic: str, records: Sequence[Outgoing], codec: str) -> None:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "compression.type": codec,
                "linger.ms": 5,
                "message.timeout.ms": int(DELIVERY_TIMEOUT_S * 1000),
                **self.security,
            }
        )
        failures: list[str] = []
        delivered = 0

        def on_delivery(error: KafkaError | None, _message: Message) -> None:
            nonlocal delivered
            if error is not None:
                failures.append(str(error))
            delivered += 1

        for record in records:
            produce_with_backpressure(
                producer,
                topic,
                partition=record.partition,
                key=record.key,
                value=record.value,
                headers=list(record.headers),
                timestamp=record.timestamp_ms,
                on_delivery=on_delivery,
            )
        remaining = producer.flush(DELIVERY_TIMEOUT_S)
        assert remaining == 0, f"{remaining} records never acknowledged"
        assert not failures, f"delivery failed: {failures[:3]}"
        assert delivered == len(records)

    def read(self, bootstrap: str, topic: str, partitions: int) -> list[StoredRecord]:
        return read_partitions(
            bootstrap, topic, dict.fromkeys(range(partitions), 0), **self.security
        )

    def offsets_for_times(
        self, bootstrap: str, topic: str, targets: Mapping[int, int]
    ) -> dict[int, int]:
        consumer = Consumer(consumer_config(bootstrap, **self.security))
        try:
            query = [TopicPartition(topic, p, ts) for p, ts in targets.items()]
            found = consumer.offsets_for_times(query, timeout=10)
        finally:
            consumer.close()
        for tp in found:
            assert tp.error is None, f"offsets_for_times p{tp.partition}: {tp.error}"
        return {tp.partition: tp.offset if tp.offset >= 0 else NOT_FOUND for tp in found}


def produce_with_backpressure(
    producer: Producer,
    topic: str,
    *,
    value: bytes,
    partition: int = -1,
    key: bytes | None = None,
    headers: list[tuple[str, bytes | str | None]] | None = None,
    timestamp: int = 0,
    on_delivery: DeliveryCallback | None = None,
) -> None:
    """`Producer.produce`, waiting for deliveries while librdkafka's local queue is full."""
    while True:
        try:
            producer.produce(
                topic,
                value,
                key,
                partition,
                on_delivery=on_delivery,
                timestamp=timestamp,
                headers=headers,
            )
        except BufferError:
            producer.poll(0.05)
            continue
        producer.poll(0)
        return


def keep_pace(producer: Producer, sent: int, started: float, rate: float) -> None:
    """Serve delivery reports until `sent` records are due at `rate` records/s since `started`
    (monotonic clock): a steady stream, so batches are always in flight when a fault hits."""
    while (due := started + sent / rate - time.monotonic()) > 0:
        producer.poll(due)
