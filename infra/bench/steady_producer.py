"""A producer writing acks=all records at a steady rate to one partition, timing every acknowledgement.

Owns: `SteadyProducer`, one confluent-kafka producer (acks=all, idempotent, linger.ms=0) driven by
its own thread: every `interval_s` it produces one small record whose value starts with its
sequence number, then serves delivery reports with `poll(0)`, so an acknowledgement is timed within
about one interval of its arrival. The failover phases ask it two questions: when was the first
record produced after an instant acknowledged (`first_ack_after`), and what was the longest time
between consecutive acknowledgements in a window (`longest_gap`). Idempotence keeps librdkafka's
per-partition order through retries, so the first acknowledgement of a record produced after a
leader died cannot precede those of the records retried from before. The thread is the only user
of the producer; the recorded times are read under a lock.
"""

from __future__ import annotations

import struct
import threading
import time
from bisect import bisect_right
from itertools import pairwise
from typing import Any

from confluent_kafka import KafkaError, Producer

RECORD_BYTES = 100
FLUSH_TIMEOUT_S = 60.0
_SEQUENCE = struct.Struct(">q")


class SteadyProducer:
    def __init__(
        self, bootstrap: str, topic: str, partition: int, interval_s: float = 0.002
    ) -> None:
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                # Shorter than librdkafka's 100 ms default: reconnects and metadata refreshes
                # after a leader change should not be what the benchmark measures.
                "retry.backoff.ms": 20,
                "retry.backoff.max.ms": 100,  # librdkafka ≥ 2.3 backs off exponentially to 1 s
                "reconnect.backoff.ms": 20,
                "message.timeout.ms": 120_000,
            }
        )
        self._topic, self._partition, self._interval = topic, partition, interval_s
        self._lock = threading.Lock()
        self._produced: list[float] = []  # by sequence number
        self._acked: list[tuple[float, int]] = []  # (ack time, sequence), in arrival order
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-producer", daemon=True)

    def __enter__(self) -> SteadyProducer:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _on_delivery(self, error: KafkaError | None, message: Any) -> None:
        now = time.perf_counter()
        (sequence,) = _SEQUENCE.unpack_from(message.value())
        with self._lock:
            if error is None:
                self._acked.append((now, sequence))
            else:
                self.failures.append(f"record {sequence}: {error}")

    def _run(self) -> None:
        padding = bytes(RECORD_BYTES - _SEQUENCE.size)
        next_tick = time.perf_counter()
        while not self._stop.is_set():
            with self._lock:
                sequence = len(self._produced)
                self._produced.append(time.perf_counter())
            value = _SEQUENCE.pack(sequence) + padding
            self._producer.produce(
                self._topic, value, partition=self._partition, on_delivery=self._on_delivery
            )
            self._producer.poll(0)
            next_tick += self._interval
            self._stop.wait(max(0.0, next_tick - time.perf_counter()))
        self._producer.flush(FLUSH_TIMEOUT_S)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(FLUSH_TIMEOUT_S + 5)

    def acknowledged(self) -> int:
        with self._lock:
            return len(self._acked)

    def first_ack_after(self, instant: float) -> float | None:
        """Ack time of the earliest-acknowledged record produced after `instant` (perf_counter)."""
        with self._lock:
            first_sequence = bisect_right(self._produced, instant)
            times = [at for at, sequence in self._acked if sequence >= first_sequence]
        return min(times) if times else None

    def longest_gap(self, start: float, end: float) -> float:
        """Longest time between consecutive acknowledgements within [start, end], ends included."""
        with self._lock:
            times = sorted(at for at, _ in self._acked if start <= at <= end)
        edges = [start, *times, end]
        return max(later - earlier for earlier, later in pairwise(edges))
