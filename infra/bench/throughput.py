"""Produce and consume throughput runs with confluent-kafka (librdkafka), against Pier or the mock.

Owns: the value pool (text-like, so lz4 has something to do but not everything), one timed produce
run (`produce_run`: produce `count` records, flush, clock stops when the last is acknowledged),
and one timed consume run (`consume_run`: assign from offset 0, clock stops at the last record).
The same `produce_run` measures librdkafka's built-in mock cluster (`test.mock.num.brokers=1`),
which answers in C with no storage: the ceiling the client itself allows. Blocking; one run at a
time per thread.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

PRODUCER_SETTINGS: Mapping[str, Any] = {
    "acks": 1,
    "linger.ms": 5,
    "batch.size": 1_048_576,
    "queue.buffering.max.messages": 2_000_000,
    "queue.buffering.max.kbytes": 2_097_152,
    "message.timeout.ms": 300_000,
}
CONSUME_DEADLINE_S = 600.0
_WORDS = [
    "pier",
    "kafka",
    "broker",
    "segment",
    "offset",
    "batch",
    "record",
    "topic",
    "tenant",
    "quota",
    "partition",
    "log",
]


@dataclass(frozen=True, slots=True)
class Throughput:
    target: str  # "pier" or "mock" (the gateway benchmark: "direct" or "gateway")
    phase: str  # "produce" or "consume"
    records: int
    record_bytes: int
    codec: str
    seconds: float
    stored_codec: str | None = None  # what the broker's log holds (librdkafka may not compress)

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.records * self.record_bytes / self.seconds / 1e6

    def as_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "records_per_s": round(self.records_per_s),
            "mb_per_s": round(self.mb_per_s, 2),
        }


def value_pool(record_bytes: int, size: int = 512, seed: int = 7) -> list[bytes]:
    """`size` distinct values of exactly `record_bytes`: words plus a random tail (~2:1 for lz4)."""
    rng = random.Random(seed)
    pool = []
    for _ in range(size):
        text = " ".join(rng.choice(_WORDS) for _ in range(record_bytes // 6 + 1)).encode()
        noise = rng.randbytes(record_bytes // 3)
        pool.append((noise + text)[:record_bytes])
    return pool


def produce_run(
    target: str,
    connection: Mapping[str, Any],
    topic: str,
    count: int,
    record_bytes: int,
    codec: str,
) -> Throughput:
    producer = Producer({**PRODUCER_SETTINGS, **connection, "compression.type": codec})
    pool = value_pool(record_bytes)
    failures = 0

    def on_delivery(error: KafkaError | None, _message: object) -> None:
        nonlocal failures
        failures += error is not None

    start = time.perf_counter()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, pool[i % len(pool)], on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    remaining = producer.flush(300)
    seconds = time.perf_counter() - start
    if remaining or failures:
        raise RuntimeError(f"{target} produce: {remaining} unacknowledged, {failures} failed")
    return Throughput(target, "produce", count, record_bytes, codec, seconds)


def consume_run(
    bootstrap: str,
    topic: str,
    count: int,
    record_bytes: int,
    codec: str,
    *,
    connection: Mapping[str, Any] | None = None,
    target: str = "pier",
) -> Throughput:
    """`connection` adds client settings (e.g. SASL through the gateway) over the defaults."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "pier-bench",
            "enable.auto.commit": False,
            "fetch.max.bytes": 52_428_800,
            "max.partition.fetch.bytes": 8_388_608,
            # librdkafka ≥ 2.4 pauses fetching for fetch.queue.backoff.ms (1 s) whenever its local
            # queue passes queued.min.messages (100k): with 100 B records that idles the broker
            # most of the run and measures the client's back-off, not the broker.
            "fetch.queue.backoff.ms": 10,
            **(connection or {}),
        }
    )
    seen = 0
    start = time.perf_counter()
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        while seen < count:
            if time.perf_counter() - start > CONSUME_DEADLINE_S:
                raise RuntimeError(f"consumed {seen} of {count} records of {topic}")
            for message in consumer.consume(num_messages=10_000, timeout=1.0):
                if message.error() is not None:
                    raise KafkaException(message.error())
                seen += 1
        seconds = time.perf_counter() - start
    finally:
        consumer.close()
    return Throughput(target, "consume", count, record_bytes, codec, seconds)
