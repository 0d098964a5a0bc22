"""Round-trip drivers for the pure-Python clients: kafka-python and aiokafka.

Owns: the same three operations as `client_drivers.ConfluentDriver` (produce with a codec and
explicit timestamps, read back by assign/seek, offsets_for_times) in each library's idiom. Both
use their own codec packages (gzip, python-snappy, lz4, zstandard). Blocking; aiokafka runs on a
fresh event loop per call (`asyncio.run`), so the driver is safe from any thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import TopicPartition as KpTopicPartition

from tests.e2e.client_drivers import DELIVERY_TIMEOUT_S, NOT_FOUND
from tests.e2e.kafka_admin import StoredRecord
from tests.e2e.workload import Outgoing
from tests.polling import wait_until, wait_until_async

READ_TIMEOUT_S = 60.0


def _stored(record: Any) -> StoredRecord:
    """A kafka-python or aiokafka ConsumerRecord as a StoredRecord (both have the same fields)."""
    return StoredRecord(
        partition=record.partition,
        offset=record.offset,
        key=record.key,
        value=record.value,
        headers=tuple((name, value) for name, value in record.headers or ()),
        timestamp_ms=record.timestamp,
    )


def _codec(codec: str) -> str | None:
    return None if codec == "none" else codec


class KafkaPythonDriver:
    """`security`: extra keyword settings for every client (e.g. SASL for the gateway)."""

    name = "kafka-python"
    explicit_timestamps = True

    def __init__(self, security: Mapping[str, Any] | None = None) -> None:
        self.security = dict(security or {})

    def produce(self, bootstrap: str, topic: str, records: Sequence[Outgoing], codec: str) -> None:
        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            compression_type=_codec(codec),
            linger_ms=5,
            **self.security,
        )
        try:
            futures = [
                producer.send(
                    topic,
                    value=r.value,
                    key=r.key,
                    headers=list(r.headers),
                    partition=r.partition,
                    timestamp_ms=r.timestamp_ms,
                )
                for r in records
            ]
            producer.flush(timeout=DELIVERY_TIMEOUT_S)
            for future in futures:
                future.get(timeout=DELIVERY_TIMEOUT_S)  # raises the delivery error, if any
        finally:
            producer.close()

    def read(self, bootstrap: str, topic: str, partitions: int) -> list[StoredRecord]:
        consumer = self._consumer(bootstrap)
        try:
            assigned = [KpTopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(assigned)
            for tp in assigned:
                consumer.seek(tp, 0)
            ends = consumer.end_offsets(assigned)
            records: list[StoredRecord] = []

            def at_ends() -> bool:
                if all(consumer.position(tp) >= ends[tp] for tp in assigned):
                    return True
                for batch in consumer.poll(timeout_ms=500, max_records=10_000).values():
                    records.extend(_stored(r) for r in batch)
                return False

            wait_until(
                at_ends,
                what=f"kafka-python read {topic} to its end",
                timeout=READ_TIMEOUT_S,
                interval=0,
            )
            return records
        finally:
            consumer.close()

    def offsets_for_times(
        self, bootstrap: str, topic: str, targets: Mapping[int, int]
    ) -> dict[int, int]:
        consumer = self._consumer(bootstrap)
        try:
            query = {KpTopicPartition(topic, p): ts for p, ts in targets.items()}
            found = consumer.offsets_for_times(query)
        finally:
            consumer.close()
        return {tp.partition: NOT_FOUND if hit is None else hit.offset for tp, hit in found.items()}

    def _consumer(self, bootstrap: str, **extra: Any) -> KafkaConsumer:
        return KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=None,
            enable_auto_commit=False,
            **self.security,
            **extra,
        )


class AioKafkaDriver:
    """`security`: extra keyword settings for every client (e.g. SASL for the gateway)."""

    name = "aiokafka"
    explicit_timestamps = True

    def __init__(self, security: Mapping[str, Any] | None = None) -> None:
        self.security = dict(security or {})

    def produce(self, bootstrap: str, topic: str, records: Sequence[Outgoing], codec: str) -> None:
        asyncio.run(self._produce(bootstrap, topic, records, codec))

    def read(self, bootstrap: str, topic: str, partitions: int) -> list[StoredRecord]:
        return asyncio.run(self._read(bootstrap, topic, partitions))

    def offsets_for_times(
        self, bootstrap: str, topic: str, targets: Mapping[int, int]
    ) -> dict[int, int]:
        return asyncio.run(self._offsets_for_times(bootstrap, topic, targets))

    async def _produce(
        self, bootstrap: str, topic: str, records: Sequence[Outgoing], codec: str
    ) -> None:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap,
            acks="all",
            compression_type=_codec(codec),
            linger_ms=5,
            **self.security,
        )
        await producer.start()
        try:
            acks = [
                await producer.send(
                    topic,
                    value=r.value,
                    key=r.key,
                    partition=r.partition,
                    timestamp_ms=r.timestamp_ms,
                    headers=list(r.headers),
                )
                for r in records
            ]
            await asyncio.wait_for(asyncio.gather(*acks), DELIVERY_TIMEOUT_S)
        finally:
            await producer.stop()

    async def _read(self, bootstrap: str, topic: str, partitions: int) -> list[StoredRecord]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, **self.security
        )
        await consumer.start()
        try:
            assigned = [AioTopicPartition(topic, p) for p in range(partitions)]
            consumer.assign(assigned)
            for tp in assigned:
                consumer.seek(tp, 0)
            ends = await consumer.end_offsets(assigned)
            records: list[StoredRecord] = []

            async def at_ends() -> bool:
                if all([await consumer.position(tp) >= ends[tp] for tp in assigned]):
                    return True
                batches = await consumer.getmany(timeout_ms=500, max_records=10_000)
                for batch in batches.values():
                    records.extend(_stored(r) for r in batch)
                return False

            await wait_until_async(
                at_ends,
                what=f"aiokafka read {topic} to its end",
                timeout=READ_TIMEOUT_S,
                interval=0,
            )
            return records
        finally:
            await consumer.stop()

    async def _offsets_for_times(
        self, bootstrap: str, topic: str, targets: Mapping[int, int]
    ) -> dict[int, int]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap, enable_auto_commit=False, **self.security
        )
        await consumer.start()
        try:
            query = {AioTopicPartition(topic, p): ts for p, ts in targets.items()}
            found = await consumer.offsets_for_times(query)
        finally:
            await consumer.stop()
        return {tp.partition: NOT_FOUND if hit is None else hit.offset for tp, hit in found.items()}
