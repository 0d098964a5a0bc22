"""Reading a transactional output topic back, read_committed or read_uncommitted, with confluent-kafka.

Owns: `OutputRecord` (a record with the `txn` header the copier stamps), `TopicTail` (an assigned
consumer from offset 0 of every partition that remembers each partition's end-of-partition
position — under read_committed librdkafka reports the end at the last stable offset, after the
control batches, which never reach the application; connection errors are left to librdkafka,
a fatal one fails the read), `read_topic` (everything up to the ends at call time: high
watermarks, or last stable offsets under read_committed) and `ConcurrentReader` (a `TopicTail` on
its own thread while the copiers run). Waits go through `tests.polling`. A `TopicTail` belongs to
one thread; `ConcurrentReader`'s records are appended by its thread and handed to the test by
`stop()`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from tests.polling import wait_until

READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"


@dataclass(frozen=True, slots=True)
class OutputRecord:
    partition: int
    offset: int
    key: bytes
    value: bytes
    txn: str  # the copier's `txn` header ("" for a record without one)


def to_output(message: Message) -> OutputRecord:
    headers = dict(message.headers() or [])
    txn = headers.get("txn")
    partition, offset = message.partition(), message.offset()
    assert partition is not None and offset is not None
    return OutputRecord(
        partition,
        offset,
        message.key() or b"",
        message.value() or b"",
        txn.decode() if isinstance(txn, bytes) else "",
    )


def high_watermarks(
    bootstrap: str,
    topic: str,
    partitions: int,
    settings: Mapping[str, Any] | None = None,
    isolation: str = READ_UNCOMMITTED,
) -> dict[int, int]:
    """ListOffsets latest of every partition: the high watermarks, or under read_committed the
    last stable offsets."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "txn-e2e-watermarks",
            "isolation.level": isolation,
            **(settings or {}),
        }
    )
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), 30, cached=False)[1]
            for p in range(partitions)
        }
    finally:
        consumer.close()


class TopicTail:
    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        isolation: str,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self.fatal: KafkaError | None = None
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "error_cb": self._client_error,
                "group.id": f"txn-e2e-{isolation}-reader",
                "isolation.level": isolation,
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                **(settings or {}),
            }
        )
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.records: list[OutputRecord] = []
        self.end_seen: dict[int, int] = dict.fromkeys(range(partitions), -1)

    def _client_error(self, error: KafkaError) -> None:
        """Connection errors (a broker bouncing) are librdkafka's to retry; a fatal one is kept
        and raised by the next `step`."""
        if error.fatal():
            self.fatal = error

    def step(self, timeout: float = 0.5) -> None:
        if self.fatal is not None:
            raise KafkaException(self.fatal)
        for message in self.consumer.consume(num_messages=10_000, timeout=timeout):
            error = message.error()
            if error is None:
                self.records.append(to_output(message))
            elif error.code() == KafkaError._PARTITION_EOF:
                partition, position = message.partition(), message.offset()
                assert partition is not None and position is not None
                self.end_seen[partition] = position
            else:
                raise KafkaException(error)

    def reached(self, ends: Mapping[int, int]) -> bool:
        return all(self.end_seen[p] >= end for p, end in ends.items())

    def close(self) -> None:
        self.consumer.close()


def read_topic(
    bootstrap: str,
    topic: str,
    partitions: int,
    isolation: str,
    *,
    settings: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
) -> list[OutputRecord]:
    """Every record up to the ends of now (the high watermarks; read_committed: the last stable
    offsets), in partition order (offset order within)."""
    ends = high_watermarks(bootstrap, topic, partitions, settings, isolation)
    tail = TopicTail(bootstrap, topic, partitions, isolation, settings)
    try:

        def caught_up() -> bool:
            tail.step()
            return tail.reached(ends)

        wait_until(
            caught_up, what=f"{topic} read {isolation} up to {ends}", timeout=timeout, interval=0
        )
    finally:
        tail.close()
    return sorted(tail.records, key=lambda r: (r.partition, r.offset))


class ConcurrentReader:
    """A read_committed consumer of the output while it is being written (ducktape's
    `concurrent_consumer`); it must see exactly the committed output, never an aborted record."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        partitions: int,
        settings: Mapping[str, Any] | None = None,
    ) -> None:
        self._tail = TopicTail(bootstrap, topic, partitions, READ_COMMITTED, settings)
        self._stop = threading.Event()
        self._closed = False
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="concurrent-reader", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self._tail.step(0.2)
        except BaseException as exc:  # surfaced to the test by check()
            self.error = exc

    def check(self) -> None:
        if self.error is not None:
            raise AssertionError(f"the concurrent reader failed: {self.error!r}") from self.error

    @property
    def count(self) -> int:
        return len(self._tail.records)

    def wait_caught_up(self, ends: Mapping[int, int], timeout: float) -> None:
        def caught_up() -> bool:
            self.check()
            return self._tail.reached(ends)

        wait_until(caught_up, what=f"the concurrent reader at {dict(ends)}", timeout=timeout)

    def stop(self) -> list[OutputRecord]:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the concurrent reader did not stop"
        if not self._closed:
            self._closed = True
            self._tail.close()
        self.check()
        return list(self._tail.records)  # in arrival order: the checks look at the order too

    def stop_quietly(self) -> None:
        """For clean-up after a failure: stop, without raising what the reader ran into."""
        self._stop.set()
        self._thread.join(30)
        if not self._closed and not self._thread.is_alive():
            self._closed = True
            self._tail.close()
