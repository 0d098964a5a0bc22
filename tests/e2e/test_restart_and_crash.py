"""Crash safety of the log: acknowledged records survive `kill -9`, and a damaged segment tail is
cut back to the intact prefix on restart (Kafka's `LogSegment.recover` after an unclean shutdown).

Corruption cases stop the broker with `kill -9`, not SIGTERM: Kafka trusts its segments after a
clean shutdown (the `.kafka_cleanshutdown` marker) and only re-validates the active segment after a
crash, so a crash is what makes recovery run. The deleted-index case also holds after a clean
stop (a missing index is always rebuilt), so it stops cleanly.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer

from brokers.records.batch import iter_headers
from infra.stack import BrokerProcess
from tests.conftest import BrokerFactory
from tests.e2e.client_drivers import keep_pace, produce_with_backpressure
from tests.e2e.kafka_admin import create_topic, read_partitions, watermarks

pytestmark = [pytest.mark.e2e, pytest.mark.fault]

TOPIC = "crash"
ROUNDS, PER_ROUND = 20, 50  # one flush per round: ~20 batches with known boundaries


def producer(bootstrap: str, **extra: object) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **extra})


def produce_rounds(bootstrap: str, first: int, rounds: int) -> int:
    """Produce `rounds` × PER_ROUND values numbered from `first`, flushing each round."""
    client = producer(bootstrap, acks="all")
    for round_no in range(rounds):
        for i in range(PER_ROUND):
            client.produce(TOPIC, value=b"%d" % (first + round_no * PER_ROUND + i), partition=0)
        assert client.flush(30) == 0
    return first + rounds * PER_ROUND


def values(broker: BrokerProcess) -> list[int]:
    records = read_partitions(broker.bootstrap, TOPIC, {0: 0})
    assert [r.offset for r in records] == list(range(len(records)))
    return [int(r.value or b"-1") for r in records]


def active_segment(broker: BrokerProcess) -> Path:
    return sorted((broker.data_dir / f"{TOPIC}-0").glob("*.log"))[-1]


def last_batch(segment: Path) -> tuple[int, int, int]:
    """(position, size, records) of the last batch in the segment."""
    *_, (position, header) = iter_headers(segment.read_bytes())
    return position, header.size, header.records_count


def assert_all_acknowledged_stored(broker: BrokerProcess, acked: dict[int, bytes]) -> None:
    stored = {r.offset: r.value for r in read_partitions(broker.bootstrap, TOPIC, {0: 0})}
    lost = sorted(offset for offset, value in acked.items() if stored.get(offset) != value)
    assert not lost, f"{len(lost)} acknowledged records lost or changed, first offsets {lost[:5]}"


def test_acknowledged_records_survive_kill_9(broker_factory: BrokerFactory) -> None:
    """acks=1 at a steady 10,000 records/s; `kill -9` mid-stream; every record whose delivery
    report came back without error is readable right after the restart (before any new append
    could move the high watermark), and still after the stream resumes."""
    broker = broker_factory()
    create_topic(broker.bootstrap, TOPIC)
    client = producer(broker.bootstrap, acks=1, **{"message.timeout.ms": 60_000})
    acked: dict[int, bytes] = {}

    def on_delivery(error: KafkaError | None, message: Message) -> None:
        offset, value = message.offset(), message.value()
        if error is None and offset is not None and value is not None:
            acked[offset] = value

    def stream(first: int, last: int) -> None:
        started = time.monotonic()
        for seq in range(first, last):
            produce_with_backpressure(
                client, TOPIC, partition=0, value=b"%d" % seq, on_delivery=on_delivery
            )
            if seq % 500 == 0:
                keep_pace(client, seq - first, started, 10_000)

    stream(0, 15_000)
    broker.kill()  # batches are in flight: the stream was running a moment ago
    client.poll(0.5)  # serve reports that raced the kill; in-flight ones are retried later
    assert acked, "nothing was acknowledged before the kill"
    broker.restart()
    assert_all_acknowledged_stored(broker, dict(acked))
    stream(15_000, 30_000)
    assert client.flush(60) == 0
    assert_all_acknowledged_stored(broker, acked)


def corrupt_flip_bits(segment: Path) -> None:
    position, size, _ = last_batch(segment)
    with segment.open("r+b") as log:
        log.seek(position + size - 3)
        tail = bytearray(log.read(3))
        log.seek(position + size - 3)
        log.write(bytes(b ^ 0xA5 for b in tail))


def corrupt_truncate_mid_batch(segment: Path) -> None:
    position, size, _ = last_batch(segment)
    os.truncate(segment, position + size // 2)


@pytest.mark.parametrize(
    "damage", [corrupt_flip_bits, corrupt_truncate_mid_batch], ids=["flipped-bits", "truncated"]
)
def test_damaged_tail_is_cut_to_intact_prefix(
    broker_factory: BrokerFactory, damage: Callable[[Path], None]
) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, TOPIC)
    end = produce_rounds(broker.bootstrap, 0, ROUNDS)
    broker.kill()
    segment = active_segment(broker)
    _, _, lost_records = last_batch(segment)
    damage(segment)
    broker.restart()

    intact = end - lost_records
    assert values(broker) == list(range(intact))
    assert watermarks(broker.bootstrap, TOPIC, 0) == (0, intact)
    # New appends continue right after the intact prefix.
    produce_rounds(broker.bootstrap, intact, 2)
    assert values(broker) == list(range(intact + 2 * PER_ROUND))


def test_deleted_offset_index_is_rebuilt(broker_factory: BrokerFactory) -> None:
    broker = broker_factory(config={"log.index.interval.bytes": "128"})  # many index entries
    create_topic(broker.bootstrap, TOPIC)
    end = produce_rounds(broker.bootstrap, 0, ROUNDS)
    broker.stop()
    index = active_segment(broker).with_suffix(".index")
    assert index.exists(), f"no offset index at {index}"
    index.unlink()
    broker.restart()

    assert values(broker) == list(range(end))
    middle = end // 2 + 7  # a seek the index must resolve, inside a batch
    tail = read_partitions(broker.bootstrap, TOPIC, {0: middle})
    assert [int(r.value or b"-1") for r in tail] == list(range(middle, end))
    produce_rounds(broker.bootstrap, end, 1)
    assert values(broker) == list(range(end + PER_ROUND))
