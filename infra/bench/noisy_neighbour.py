"""A quiet tenant's produce latency, alone and next to a noisy tenant held to its quota.

Owns: the quiet producer (`quiet_latencies`: 1 KiB records at a steady byte rate, `linger.ms=0`,
acks=1; each value starts with its send time and the delivery report's arrival minus it is the
record's produce latency; the first second is warm-up) and the noisy producer (`NoisyProducer`: a
separate process, so its Python produce loop does not take the quiet producer's GIL, offering
1 KiB records at a fixed byte rate far above its tenant's `producer_byte_rate`; librdkafka's
queue is capped at a few MB so, once the gateway throttles the tenant, the loop mostly waits for
room instead of buffering gigabytes). The noisy process reports its acknowledged bytes per second
and the throttle times the gateway sent it. Pacing sleeps are the workload (steady rates), not waits
for state. Blocking; the quiet producer runs on the calling thread.
"""

from __future__ import annotations

import multiprocessing
import struct
import time
from collections.abc import Mapping
from dataclasses import dataclass
from multiprocessing.synchronize import Event
from typing import Any

from confluent_kafka import KafkaError, Producer

from infra.bench.throughput import PRODUCER_SETTINGS, value_pool

RECORD_BYTES = 1024
WARM_UP_S = 1.0
NOISY_QUEUE_KBYTES = 4096
_STAMP = struct.Struct(">q")
_PURGED = (KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT)  # what stopping discards


def quiet_latencies(
    connection: Mapping[str, Any], topic: str, rate_mb_s: float, seconds: float
) -> list[float]:
    """Produce latencies (ms, sorted) of the records sent after the warm-up second."""
    producer = Producer({**PRODUCER_SETTINGS, "linger.ms": 0, **connection})
    per_second = rate_mb_s * 1e6 / RECORD_BYTES
    total = int(per_second * (seconds + WARM_UP_S))
    pool = value_pool(RECORD_BYTES - _STAMP.size)
    samples: list[tuple[int, float]] = []  # (send ns, latency ms)
    failures = 0

    def on_delivery(error: KafkaError | None, message: Any) -> None:
        nonlocal failures
        now = time.perf_counter_ns()
        if error is not None:
            failures += 1
            return
        (sent,) = _STAMP.unpack_from(message.value())
        samples.append((sent, (now - sent) / 1e6))

    start = time.perf_counter()
    for i in range(total):
        while (wait := start + i / per_second - time.perf_counter()) > 0:
            producer.poll(wait)  # serves delivery reports the moment they arrive
        stamp = _STAMP.pack(time.perf_counter_ns())
        producer.produce(topic, stamp + pool[i % len(pool)], on_delivery=on_delivery)
        producer.poll(0)
    remaining = producer.flush(60)
    if remaining or failures:
        raise RuntimeError(f"quiet producer: {remaining} unacknowledged, {failures} failed")
    counted_from = int((start + WARM_UP_S) * 1e9)
    counted = sorted(latency for sent, latency in samples if sent >= counted_from)
    if not counted:
        raise RuntimeError("quiet producer: no records acknowledged after warm-up")
    return counted


@dataclass(frozen=True, slots=True)
class NoisyReport:
    offered_mb_s: float
    seconds: float
    acked_bytes_per_s: list[int]  # per whole second since the first record
    throttles: int  # throttle events (throttle_time_ms > 0) the client saw
    throttle_ms_max: int
    failures: dict[str, int]  # delivery errors by name, records purged at the end excluded


def _noisy(
    connection: dict[str, Any],
    topic: str,
    rate_mb_s: float,
    started: Event,
    stop: Event,
    results: multiprocessing.Queue[NoisyReport],
) -> None:
    throttles: list[int] = []
    producer = Producer(
        {
            **PRODUCER_SETTINGS,
            "queue.buffering.max.kbytes": NOISY_QUEUE_KBYTES,
            "throttle_cb": lambda event: throttles.append(int(event.throttle_time * 1000)),
            **connection,
        }
    )
    per_second = rate_mb_s * 1e6 / RECORD_BYTES
    pool = value_pool(RECORD_BYTES)
    acked: dict[int, int] = {}
    failures: dict[str, int] = {}
    start = time.perf_counter()

    def on_delivery(error: KafkaError | None, message: Any) -> None:
        if error is not None:
            if error.code() not in _PURGED:
                failures[error.name()] = failures.get(error.name(), 0) + 1
            return
        second = int(time.perf_counter() - start)
        acked[second] = acked.get(second, 0) + len(message.value())

    started.set()
    sent = 0
    while not stop.is_set():
        if sent >= (time.perf_counter() - start) * per_second:
            producer.poll(0.001)
            continue
        try:
            producer.produce(topic, pool[sent % len(pool)], on_delivery=on_delivery)
            sent += 1
        except BufferError:  # throttled: the client's queue is full
            producer.poll(0.005)
        if sent % 100 == 0:
            producer.poll(0)
    seconds = time.perf_counter() - start
    producer.purge()  # queued and in-flight records: the run is over
    producer.flush(30)
    per_s = [acked.get(s, 0) for s in range(int(seconds))]
    results.put(
        NoisyReport(rate_mb_s, seconds, per_s, len(throttles), max(throttles, default=0), failures)
    )


class NoisyProducer:
    """`with NoisyProducer(...) as noisy:` offers load in a child process until the block ends;
    `noisy.report` is filled on exit."""

    def __init__(self, connection: Mapping[str, Any], topic: str, rate_mb_s: float) -> None:
        context = multiprocessing.get_context("spawn")
        self._started, self._stop = context.Event(), context.Event()
        self._results: multiprocessing.Queue[NoisyReport] = context.Queue()
        self._process = context.Process(
            target=_noisy,
            args=(dict(connection), topic, rate_mb_s, self._started, self._stop, self._results),
            name="noisy-producer",
            daemon=True,
        )
        self.report: NoisyReport | None = None

    def __enter__(self) -> NoisyProducer:
        self._process.start()
        if not self._started.wait(60):
            self._process.kill()
            raise RuntimeError("the noisy producer did not start")
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        try:
            self.report = self._results.get(timeout=60)
        finally:
            self._process.join(10)
            if self._process.is_alive():
                self._process.kill()
