"""Transactional producers and read_committed consumers of the four clients, as the tests drive them.

Owns: `AsyncRunner` (an event loop on its own thread, so an aiokafka transaction can stay open
while blocking kafka-python calls run: the tests interleave the two producers' transactions),
`AioTransactions` (an aiokafka transactional producer driven through it), `kafka_python_producer`,
and `read_committed(client, ...)`: the records a read_committed consumer of confluent-kafka,
kafka-python, aiokafka or kcat gets from offset 0 of every partition to the end, as
(partition, offset, value) in each partition's order. A reader ends when its position reached
each partition's high watermark (the end marker included: a committed log ends in a control
batch that only moves the position), or, for kcat, at its `-e` end of partition. Blocking;
`AsyncRunner` is safe from any thread, the rest belongs to the calling thread.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Mapping
from typing import Any, TypeVar

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import TopicPartition as KpTopicPartition

from tests.e2e.kcat_driver import run_kcat
from tests.e2e.transactions.readers import READ_COMMITTED, high_watermarks, read_topic
from tests.polling import wait_until, wait_until_async

T = TypeVar("T")
CONSUMERS = ("confluent-kafka", "kafka-python", "aiokafka", "kcat")
READ_TIMEOUT_S = 60.0
Seen = tuple[int, int, bytes]  # partition, offset, value
_FIELD = "\x1f"


class AsyncRunner:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="aio-runner", daemon=True
        )
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


class AioTransactions:
    """An aiokafka transactional producer whose calls block the caller, not the loop."""

    def __init__(self, runner: AsyncRunner, bootstrap: str, transactional_id: str) -> None:
        self.runner = runner
        self.producer = runner.run(self._start(bootstrap, transactional_id))

    @staticmethod
    async def _start(bootstrap: str, transactional_id: str) -> AIOKafkaProducer:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap, transactional_id=transactional_id, enable_idempotence=True
        )
        await producer.start()  # InitProducerId
        return producer

    def begin(self) -> None:
        self.runner.run(self.producer.begin_transaction())

    def send(self, topic: str, partition: int, value: bytes) -> None:
        self.runner.run(self.producer.send_and_wait(topic, value, partition=partition))

    def commit(self) -> None:
        self.runner.run(self.producer.commit_transaction())

    def abort(self) -> None:
        self.runner.run(self.producer.abort_transaction())

    def close(self) -> None:
        self.runner.run(self.producer.stop())


def kafka_python_producer(bootstrap: str, transactional_id: str) -> KafkaProducer:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, transactional_id=transactional_id, enable_idempotence=True
    )
    producer.init_transactions()
    return producer


def read_committed(client: str, bootstrap: str, topic: str, partitions: int) -> list[Seen]:
    if client == "confluent-kafka":
        records = read_topic(bootstrap, topic, partitions, READ_COMMITTED, timeout=READ_TIMEOUT_S)
        return [(r.partition, r.offset, r.value) for r in records]
    ends = high_watermarks(bootstrap, topic, partitions)
    if client == "kafka-python":
        return _kafka_python(bootstrap, topic, ends)
    if client == "aiokafka":
        return asyncio.run(_aiokafka(bootstrap, topic, ends))
    assert client == "kcat", client
    return _kcat(bootstrap, topic)


def _kafka_python(bootstrap: str, topic: str, ends: Mapping[int, int]) -> list[Seen]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    partitions = [KpTopicPartition(topic, p) for p in ends]
    seen: list[Seen] = []
    try:
        consumer.assign(partitions)
        consumer.seek_to_beginning()

        def at_ends() -> bool:
            for batch in consumer.poll(timeout_ms=500).values():
                seen.extend((r.partition, r.offset, r.value) for r in batch)
            return all(consumer.position(tp) >= ends[tp.partition] for tp in partitions)

        wait_until(
            at_ends, what=f"kafka-python at {dict(ends)}", timeout=READ_TIMEOUT_S, interval=0
        )
    finally:
        consumer.close()
    return seen


async def _aiokafka(bootstrap: str, topic: str, ends: Mapping[int, int]) -> list[Seen]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    partitions = [AioTopicPartition(topic, p) for p in ends]
    seen: list[Seen] = []
    await consumer.start()
    try:
        consumer.assign(partitions)
        await consumer.seek_to_beginning()

        async def at_ends() -> bool:
            for batch in (await consumer.getmany(timeout_ms=500)).values():
                seen.extend((r.partition, r.offset, r.value) for r in batch)
            positions = [await consumer.position(tp) for tp in partitions]
            return all(
                pos >= ends[tp.partition] for pos, tp in zip(positions, partitions, strict=True)
            )

        await wait_until_async(
            at_ends, what=f"aiokafka at {dict(ends)}", timeout=READ_TIMEOUT_S, interval=0
        )
    finally:
        await consumer.stop()
    return seen


def _kcat(bootstrap: str, topic: str) -> list[Seen]:
    out = run_kcat(
        [
            "-C", "-t", topic, "-o", "beginning", "-e",
            "-X", "isolation.level=read_committed",
            "-f", _FIELD.join(["%p", "%o", "%s"]) + "\\n",
        ],
        bootstrap,
    )  # fmt: skip
    seen: list[Seen] = []
    for line in out.splitlines():
        partition, offset, value = line.split(_FIELD)
        seen.append((int(partition), int(offset), value.encode()))
    return seen
