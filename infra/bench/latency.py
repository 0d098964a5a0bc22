"""End-to-end latency at a steady produce rate: producer send time → consumer receive time.

Owns: one latency run. A consumer thread is assigned to the (fresh, one-partition) topic first;
the main thread then produces 1 KiB records at a fixed byte rate for a fixed duration, each value
starting with its send time (`time.time_ns()`, same host, same clock), and the consumer records
`receive − send` per record. The first second is warm-up and is not counted. `latency_samples`
gives the counted samples (sorted, ms) for callers that want other percentiles, with optional
client settings (e.g. SASL through the gateway); `latency_run` summarises them. Pacing sleeps are
the point of the workload (a steady rate), not a wait for state. Blocking; uses one extra thread.
"""

from __future__ import annotations

import statistics
import struct
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from infra.bench.throughput import PRODUCER_SETTINGS, value_pool

RECORD_BYTES = 1024
WARM_UP_S = 1.0
_STAMP = struct.Struct(">q")


@dataclass(frozen=True, slots=True)
class Latency:
    rate_mb_s: float
    seconds: float
    records: int
    p50_ms: float
    p99_ms: float
    max_ms: float

    def as_json(self) -> dict[str, Any]:
        return {
            "rate_mb_s": self.rate_mb_s,
            "seconds": self.seconds,
            "records": self.records,
            "p50_ms": round(self.p50_ms, 2),
            "p99_ms": round(self.p99_ms, 2),
            "max_ms": round(self.max_ms, 2),
        }


def _consume(
    connection: Mapping[str, Any],
    topic: str,
    expected: int,
    samples: list[float],
    ready: threading.Event,
) -> None:
    consumer = Consumer(
        {
            "group.id": "pier-bench-latency",
            "enable.auto.commit": False,
            **connection,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        ready.set()
        deadline = time.monotonic() + 600
        while len(samples) < expected and time.monotonic() < deadline:
            # poll(), not consume(n): consume waits for n records or its timeout, which would
            # add up to that timeout to every record's latency.
            message = consumer.poll(0.1)
            if message is None:
                continue
            if message.error() is not None:
                raise KafkaException(message.error())
            value = message.value() or b""
            samples.append((time.time_ns() - _STAMP.unpack_from(value)[0]) / 1e6)
    finally:
        consumer.close()


def percentile(ordered: Sequence[float], fraction: float) -> float:
    """The sample at `fraction` of a sorted, non-empty sequence (nearest rank, rounding down)."""
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def latency_samples(
    connection: Mapping[str, Any], topic: str, rate_mb_s: float, seconds: float
) -> list[float]:
    """Receive − send (ms) of every record after the warm-up, sorted; `connection` holds
    `bootstrap.servers` and any other client settings, for the producer and the consumer."""
    per_second = int(rate_mb_s * 1e6 / RECORD_BYTES)
    total = int(per_second * seconds)
    samples: list[float] = []
    ready = threading.Event()
    reader = threading.Thread(target=_consume, args=(connection, topic, total, samples, ready))
    reader.start()
    ready.wait(30)
    producer = Producer({**PRODUCER_SETTINGS, **connection})
    pool = value_pool(RECORD_BYTES - _STAMP.size)
    start = time.monotonic()
    for i in range(total):
        pause = start + i / per_second - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        producer.produce(topic, _STAMP.pack(time.time_ns()) + pool[i % len(pool)])
        producer.poll(0)
    producer.flush(60)
    reader.join()
    counted = sorted(samples[int(per_second * WARM_UP_S) :])
    if not counted:
        raise RuntimeError("latency run: no records received after warm-up")
    return counted


def latency_run(bootstrap: str, topic: str, rate_mb_s: float, seconds: float) -> Latency:
    counted = latency_samples({"bootstrap.servers": bootstrap}, topic, rate_mb_s, seconds)
    return Latency(
        rate_mb_s=rate_mb_s,
        seconds=seconds,
        records=len(counted),
        p50_ms=statistics.median(counted),
        p99_ms=percentile(counted, 0.99),
        max_ms=counted[-1],
    )
