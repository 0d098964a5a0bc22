"""A running broker compacts a topic written by a transactional producer (issue 14): the records of
aborted transactions disappear from the log (a read_uncommitted reader no longer sees them), the
committed value of every key survives even where an aborted write came after it, and a
read_committed reader rebuilds the same table before and after compaction."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from prometheus_client import generate_latest

from tests.integration.inproc import broker_thread
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TOPIC = "ledger"
KEYS = 50
ROUNDS = 12
VALUE = 1024
TIMEOUT_S = 30.0
BROKER_PROPERTIES = {
    "log.cleaner.backoff.ms": "100",
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "1",
}
Record = tuple[int, bytes, bytes]


def read_all(bootstrap: str, isolation: str) -> list[Record]:
    """(offset, key, value) of every record of TOPIC visible under `isolation`, to its end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}",
            "enable.auto.commit": False, "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )  # fmt: skip
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[Record] = []

    def at_end() -> bool:
        message = consumer.poll(0.5)
        if message is None:
            return False
        error = message.error()
        if error is not None:
            if error.code() == KafkaError._PARTITION_EOF:
                return True
            raise KafkaException(error)
        got.append((message.offset() or 0, message.key() or b"", message.value() or b""))
        return False

    try:
        wait_until(at_end, what=f"the end of {TOPIC} ({isolation})", timeout=TIMEOUT_S, interval=0)
    finally:
        consumer.close()
    return got


def table(records: list[Record]) -> dict[bytes, bytes]:
    return {key: value for _, key, value in records}


def value(kind: str, round_: int, key: int) -> bytes:
    return f"{kind}:{round_}:{key}:".encode().ljust(VALUE, b".")


def test_the_broker_compacts_away_aborted_transactions(tmp_path: Path) -> None:
    with broker_thread(tmp_path, BROKER_PROPERTIES) as broker:
        bootstrap = f"127.0.0.1:{broker.port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        config = {
            "cleanup.policy": "compact", "segment.bytes": "1048576",
            "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "0",
        }  # fmt: skip
        [created] = admin.create_topics([NewTopic(TOPIC, 1, 1, config=config)]).values()
        created.result(TIMEOUT_S)
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "ledger-writer"})
        producer.init_transactions(TIMEOUT_S)
        for round_ in range(ROUNDS):
            for kind in ("commit", "abort"):  # every key's latest write is an aborted one
                producer.begin_transaction()
                for key in range(KEYS):
                    producer.produce(TOPIC, value(kind, round_, key), key=b"%d" % key)
                if kind == "commit":
                    producer.commit_transaction(TIMEOUT_S)
                else:  # sent first: librdkafka purges what an abort finds still queued
                    assert producer.flush(TIMEOUT_S) == 0
                    producer.abort_transaction(TIMEOUT_S)
        filler = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for n in range(1200):  # the transactions leave the active segment, never cleaned
            filler.produce(TOPIC, value("filler", n, 0), key=b"filler")
        assert filler.flush(TIMEOUT_S) == 0
        expected = {b"%d" % key: value("commit", ROUNDS - 1, key) for key in range(KEYS)}
        written = 2 * ROUNDS * KEYS + 1200

        def aborted_gone() -> list[Record] | None:
            records = read_all(bootstrap, "read_uncommitted")  # the cleaner runs on its own
            if any(v.startswith(b"abort:") for _, _, v in records) or len(records) >= written:
                return None
            return records

        uncommitted = wait_until(aborted_gone, what="aborted records compacted away", timeout=90)
        assert uncommitted is not None
        committed = read_all(bootstrap, "read_committed")
        assert {k: v for k, v in table(committed).items() if k != b"filler"} == expected
        assert {k: v for k, v in table(uncommitted).items() if k != b"filler"} == expected
        offsets = [offset for offset, _, _ in committed]
        assert offsets == sorted(set(offsets))
        for offset, record_key, stored in committed:  # survivors keep their original offset
            origin, written_in, _ = stored.split(b":", 2)
            if origin == b"commit":  # each round: 50 commits, a marker, 50 aborts, a marker
                assert offset == int(written_in) * 2 * (KEYS + 1) + int(record_key)
        scrape = generate_latest(broker.registry).decode()
        removed = next(
            line for line in scrape.splitlines()
            if line.startswith("kafka_log_logcleaner_records_removed_total ")
        )  # fmt: skip
        assert float(removed.split()[1]) >= ROUNDS * KEYS
