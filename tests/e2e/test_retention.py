"""Retention by time and by size moves the log start offset, and a consumer below it is told
OFFSET_OUT_OF_RANGE when it has no reset policy.

The shared broker runs retention every 200 ms (`log.retention.check.interval.ms`); tests poll the
log start offset (ListOffsets earliest) with a deadline. Segments are 1 MiB: Kafka 4.0 refuses a
smaller `segment.bytes` (KIP-1030), so ~5 MiB of 1 KiB records make five segments. Only whole
segments go, so the log start is always a segment base offset. The time tests stamp all but the
last few records two hours back and keep one hour, so old segments expire while the active one
(recent records) stays; a topic whose every record expired is emptied, the active segment too
(rolled first, as Kafka does), leaving log start = log end.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from kafka import KafkaConsumer
from kafka.errors import OffsetOutOfRangeError
from kafka.structs import TopicPartition as KpTopicPartition

from infra.stack import BrokerProcess
from tests.e2e.client_drivers import produce_with_backpressure
from tests.e2e.kafka_admin import (
    consumer_config,
    create_topic,
    read_partitions,
    watermarks,
)
from tests.polling import wait_until

pytestmark = [pytest.mark.e2e]

SEGMENT_BYTES = 1 << 20
RECORDS, VALUE = 5_000, b"r" * 1024
RETENTION_DEADLINE_S = 60.0
HOUR_MS = 3_600_000
RECENT_RECORDS = 10  # stamped now: they keep the active segment alive under a one-hour retention


def fill(bootstrap: str, topic: str, *, aged: bool = False) -> None:
    """RECORDS records; with `aged`, all but the last RECENT_RECORDS are two hours old."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": "all"})
    old = int(time.time() * 1000) - 2 * HOUR_MS
    for seq in range(RECORDS):
        timestamp = old if aged and seq < RECORDS - RECENT_RECORDS else 0  # 0: now
        produce_with_backpressure(
            producer, topic=topic, partition=0, value=b"%06d" % seq + VALUE, timestamp=timestamp
        )
    assert producer.flush(60) == 0


def segment_bases(data_dir: Path, topic: str) -> list[int]:
    """Base offsets of the live segments (deleted ones are renamed `.log.deleted`)."""
    return sorted(int(path.stem) for path in (data_dir / f"{topic}-0").glob("*.log"))


def live_log_bytes(data_dir: Path, topic: str) -> int:
    return sum(path.stat().st_size for path in (data_dir / f"{topic}-0").glob("*.log"))


def wait_for_log_start(broker: BrokerProcess, topic: str) -> tuple[int, int]:
    def moved() -> tuple[int, int] | None:
        low, high = watermarks(broker.bootstrap, topic, 0)
        return (low, high) if low > 0 else None

    found = wait_until(
        moved, what=f"log start of {topic} past 0", timeout=RETENTION_DEADLINE_S, interval=0.3
    )
    assert found is not None
    return found


def assert_readable_from_log_start(broker: BrokerProcess, topic: str, low: int, high: int) -> None:
    assert low in segment_bases(broker.data_dir, topic), "log start is not a segment boundary"
    records = read_partitions(broker.bootstrap, topic, {0: low})
    assert [r.offset for r in records] == list(range(low, high))
    assert records[0].value is not None and records[0].value[:6] == b"%06d" % low


def test_retention_ms_deletes_old_segments(module_broker: BrokerProcess, topic_name: str) -> None:
    create_topic(
        module_broker.bootstrap,
        topic_name,
        config={"segment.bytes": str(SEGMENT_BYTES), "retention.ms": str(HOUR_MS)},
    )
    fill(module_broker.bootstrap, topic_name, aged=True)
    low, high = wait_for_log_start(module_broker, topic_name)
    assert high == RECORDS
    assert_readable_from_log_start(module_broker, topic_name, low, high)


def test_retention_bytes_keeps_the_partition_under_its_budget(
    module_broker: BrokerProcess, topic_name: str
) -> None:
    budget = 2 * SEGMENT_BYTES
    create_topic(
        module_broker.bootstrap,
        topic_name,
        config={"segment.bytes": str(SEGMENT_BYTES), "retention.bytes": str(budget)},
    )
    fill(module_broker.bootstrap, topic_name)
    wait_for_log_start(module_broker, topic_name)
    # Kafka deletes the oldest segment only while the log without it still holds ≥ the budget.
    wait_until(
        lambda: live_log_bytes(module_broker.data_dir, topic_name) < budget + SEGMENT_BYTES,
        what="log size under budget + one segment",
        timeout=RETENTION_DEADLINE_S,
    )
    assert live_log_bytes(module_broker.data_dir, topic_name) >= budget
    low, high = watermarks(module_broker.bootstrap, topic_name, 0)
    assert high == RECORDS
    assert_readable_from_log_start(module_broker, topic_name, low, high)


def test_retention_ms_empties_a_quiet_topic(module_broker: BrokerProcess, topic_name: str) -> None:
    """Kafka rolls an expired active segment and deletes it: nothing expired stays readable."""
    bootstrap, sent = module_broker.bootstrap, 100
    create_topic(bootstrap, topic_name, config={"retention.ms": "1000"})
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for seq in range(sent):
        produce_with_backpressure(producer, topic=topic_name, partition=0, value=b"%06d" % seq)
    assert producer.flush(30) == 0
    wait_until(
        lambda: watermarks(bootstrap, topic_name, 0) == (sent, sent),
        what="ListOffsets earliest == latest == records sent",
        timeout=RETENTION_DEADLINE_S,
        interval=0.2,
    )
    assert segment_bases(module_broker.data_dir, topic_name) == [sent]  # rolled at the log end
    assert live_log_bytes(module_broker.data_dir, topic_name) == 0
    assert consume_from_beginning(bootstrap, topic_name) == ([], sent)
    # stamped a minute ahead, so its own 1 s retention cannot delete it before a consumer on a
    # loaded machine reads it back (it did, 2 runs in 14 at load 17-29)
    ahead_ms = int(time.time() * 1000) + 60_000
    produce_with_backpressure(
        producer, topic=topic_name, partition=0, value=b"after", timestamp=ahead_ms
    )
    assert producer.flush(30) == 0
    records, _end = consume_from_beginning(bootstrap, topic_name)
    assert [(r.offset(), r.value()) for r in records] == [(sent, b"after")]


def consume_from_beginning(bootstrap: str, topic: str) -> tuple[list[Message], int]:
    """Records from the earliest offset until end of partition, and the end offset reported."""
    consumer = Consumer(consumer_config(bootstrap))
    records: list[Message] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])

        def at_end() -> int | None:
            for message in consumer.consume(num_messages=100, timeout=0.5):
                error = message.error()
                if error is None:
                    records.append(message)
                elif error.code() == KafkaError._PARTITION_EOF:
                    return message.offset()
                else:
                    raise KafkaException(error)
            return None

        end = wait_until(at_end, what=f"end of {topic}-0", timeout=30, interval=0)
    finally:
        consumer.close()
    assert end is not None
    return records, end


@pytest.fixture
def truncated_topic(module_broker: BrokerProcess, topic_name: str) -> tuple[str, int]:
    """A topic whose log start offset has moved past 0; (name, log start)."""
    create_topic(
        module_broker.bootstrap,
        topic_name,
        config={"segment.bytes": str(SEGMENT_BYTES), "retention.ms": str(HOUR_MS)},
    )
    fill(module_broker.bootstrap, topic_name, aged=True)
    low, _ = wait_for_log_start(module_broker, topic_name)
    return topic_name, low


def test_confluent_consumer_below_log_start_gets_offset_out_of_range(
    module_broker: BrokerProcess, truncated_topic: tuple[str, int]
) -> None:
    topic, _low = truncated_topic
    consumer = Consumer(consumer_config(module_broker.bootstrap, **{"auto.offset.reset": "error"}))
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])

        def first_error() -> KafkaError | None:
            for message in consumer.consume(num_messages=100, timeout=0.5):
                error = message.error()
                assert error is not None, f"got a record at {message.offset()}"
                if error.code() != KafkaError._PARTITION_EOF:
                    return error
            return None

        error = wait_until(first_error, what="an offset reset error", timeout=30, interval=0)
    finally:
        consumer.close()
    assert error is not None
    assert error.code() == KafkaError._AUTO_OFFSET_RESET
    assert "out of range" in error.str().lower() or "OFFSET_OUT_OF_RANGE" in error.str()


def test_kafka_python_consumer_below_log_start_raises_out_of_range(
    module_broker: BrokerProcess, truncated_topic: tuple[str, int]
) -> None:
    topic, _low = truncated_topic
    consumer = KafkaConsumer(
        bootstrap_servers=module_broker.bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="none",
    )
    try:
        partition = KpTopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        with pytest.raises(OffsetOutOfRangeError):
            for _ in range(60):
                assert not consumer.poll(timeout_ms=500), "records returned below the log start"
    finally:
        consumer.close()
