"""A running broker compacts a `cleanup.policy=compact` topic by itself, keeping the latest value
of every key at its original offset, and refuses records without keys."""

from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from prometheus_client import generate_latest

from tests.integration.inproc import broker_thread
from tests.polling import wait_until

pytestmark = pytest.mark.integration

KEYS = 100
ROUNDS = 30
VALUE = 1024


def _read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "c", "enable.auto.commit": False,
                         "enable.partition.eof": True})  # fmt: skip
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[tuple[int, bytes, bytes]] = []

    def at_end() -> bool:
        message = consumer.poll(0.5)
        if message is None:
            return False
        if message.error() is not None:
            if message.error().code() == KafkaError._PARTITION_EOF:
                return True
            raise KafkaException(message.error())
        got.append((message.offset(), message.key(), message.value()))
        return False

    try:
        wait_until(at_end, what=f"the end of {topic}", timeout=30, interval=0)
    finally:
        consumer.close()
    return got


def test_the_broker_compacts_keyed_topics(tmp_path: Path) -> None:
    properties = {"log.cleaner.backoff.ms": "100"}
    with broker_thread(tmp_path, properties) as broker:
        bootstrap = f"127.0.0.1:{broker.port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        config = {"cleanup.policy": "compact", "segment.bytes": "1048576",
                  "min.cleanable.dirty.ratio": "0.01"}  # fmt: skip
        for future in admin.create_topics([NewTopic("kv", 1, 1, config=config)]).values():
            future.result(10)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        latest: dict[bytes, bytes] = {}
        for round_ in range(ROUNDS):
            for key in range(KEYS):
                value = f"{round_}:{key}:".encode().ljust(VALUE, b".")
                producer.produce("kv", value, key=str(key).encode())
                latest[str(key).encode()] = value
        assert producer.flush(30) == 0
        total = ROUNDS * KEYS

        def compacted() -> list[tuple[int, bytes, bytes]] | None:
            records = _read_all(bootstrap, "kv")  # the cleaner runs on its own schedule
            return records if len(records) < total else None

        records = wait_until(compacted, what="kv compacted", timeout=60, interval=0.2)
        assert records
        offsets = [offset for offset, _, _ in records]
        assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
        final = {key: value for _, key, value in records}
        assert final == latest
        scrape = generate_latest(broker.registry).decode()  # the whole registry scrapes cleanly
        removed = next(
            line for line in scrape.splitlines()
            if line.startswith("kafka_log_logcleaner_records_removed_total ")
        )  # fmt: skip
        assert float(removed.split()[1]) > 0
        for offset, key, value in records:  # survivors keep the offset they were written at
            round_, key_index = value.split(b":")[:2]
            assert offset == int(round_) * KEYS + int(key_index)
            assert key == key_index

        keyless = Producer({"bootstrap.servers": bootstrap, "retries": 0})
        errors: list[KafkaError] = []
        keyless.produce("kv", b"no key", on_delivery=lambda err, _msg: errors.append(err))
        keyless.flush(10)
        assert errors and errors[0] is not None
        assert errors[0].code() == KafkaError.INVALID_RECORD
