"""Produce paths through a real broker: topic codec re-encoding, LogAppendTime, acks=0 failures."""

from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from brokers.records.compression import GZIP, NONE
from brokers.records.segment_dump import decode_log_segment
from tests.integration.inproc import running_broker
from tests.polling import wait_until

pytestmark = pytest.mark.integration


def _create(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1, config=config)]).values():
        future.result(10)


def _produce(bootstrap: str, topic: str, values: list[bytes], codec: str = "none") -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value, key=b"k")
    assert producer.flush(15) == 0


def _consume(bootstrap: str, topic: str, count: int) -> list[tuple[bytes, int, int]]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[bytes, int, int]] = []

    def all_read() -> bool:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got.append((message.value(), *message.timestamp()))
        return len(got) >= count

    try:
        wait_until(all_read, what=f"{count} records of {topic}", timeout=30, interval=0)
    finally:
        consumer.close()
    return got


def _segment_codecs(data_dir: Path, topic: str) -> set[int]:
    segment = next((data_dir / f"{topic}-0").glob("*.log"))
    return {header.compression for header, _ in decode_log_segment(segment)}


def test_a_topic_codec_re_encodes_producer_batches(tmp_path: Path) -> None:
    with running_broker(tmp_path) as bootstrap:
        _create(bootstrap, "gz", {"compression.type": "gzip"})
        _create(bootstrap, "plain", {"compression.type": "uncompressed"})
        values = [f"value-{i}".encode() for i in range(500)]
        _produce(bootstrap, "gz", values, codec="none")
        _produce(bootstrap, "plain", values, codec="lz4")
        assert [v for v, _, _ in _consume(bootstrap, "gz", 500)] == values
        assert [v for v, _, _ in _consume(bootstrap, "plain", 500)] == values
    assert _segment_codecs(tmp_path / "data", "gz") == {GZIP}
    assert _segment_codecs(tmp_path / "data", "plain") == {NONE}


def test_log_append_time_topics_stamp_records_with_broker_time(tmp_path: Path) -> None:
    with running_broker(tmp_path) as bootstrap:
        _create(bootstrap, "lat", {"message.timestamp.type": "LogAppendTime"})
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce("lat", b"v", timestamp=1_000)  # far in the past: must be replaced
        assert producer.flush(15) == 0
        [(value, kind, timestamp)] = _consume(bootstrap, "lat", 1)
    assert value == b"v"
    assert kind == 2  # TIMESTAMP_LOG_APPEND_TIME
    assert timestamp > 1_600_000_000_000
