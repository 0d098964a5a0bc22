"""The idempotent producer (KIP-98) across broker restarts: no duplicates, no gaps, order kept.

confluent-kafka with `enable.idempotence=true`, acks=all, produces a numbered stream over three
partitions while the broker is restarted mid-stream — cleanly (SIGTERM) in one test, with
`kill -9` in the other. librdkafka retries every in-flight batch with its original producer id and
sequence numbers through the outage (`message.timeout.ms` is generous), so the broker must
deduplicate retries of batches it had already appended before going down, from its recovered
producer state (snapshot, or a rebuild from the log after a crash). After flush every record is
acknowledged, and reading back yields each sequence number exactly once, in order, per partition.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, Message, Producer

from infra.stack import BrokerProcess
from tests.conftest import BrokerFactory
from tests.e2e.client_drivers import keep_pace, produce_with_backpressure
from tests.e2e.kafka_admin import create_topic, read_partitions
from tests.e2e.workload import by_partition, seq_of

pytestmark = [pytest.mark.e2e]

RECORDS = 50_000
PARTITIONS = 3
RESTART_AFTER = 20_000  # records handed to the producer before the broker goes down
RATE = 10_000  # records/s: the stream lasts 5 s, the outage starts after 2 s
AFTER_OUTAGE = 5_000  # the last records wait until the broker is back
TIMEOUT_MS = 180_000


def idempotent_producer(bootstrap: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": TIMEOUT_MS,
            "retry.backoff.ms": 50,
            "reconnect.backoff.max.ms": 500,
        }
    )


class NumberedStream:
    """Produces 0..RECORDS-1 at a steady RATE on its own thread (which also serves the delivery
    reports), so the stream keeps flowing while the main thread takes the broker down."""

    def __init__(self, producer: Producer, topic: str) -> None:
        self.producer = producer
        self.topic = topic
        self.acknowledged = 0
        self.failures: list[str] = []
        self.errors: list[BaseException] = []
        self.halfway = threading.Event()
        self.back = threading.Event()  # set by the main thread once the broker answers again
        self._thread = threading.Thread(target=self._run, name="numbered-stream")

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        self._thread.join()
        if self.errors:
            raise self.errors[0]

    def _on_delivery(self, error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            self.failures.append(str(error))
        self.acknowledged += 1

    def _run(self) -> None:
        started = time.monotonic()
        try:
            for seq in range(RECORDS):
                produce_with_backpressure(
                    self.producer,
                    self.topic,
                    partition=seq % PARTITIONS,
                    value=b"%d:" % seq,
                    on_delivery=self._on_delivery,
                )
                if seq % 500 == 0:
                    keep_pace(self.producer, seq, started, RATE)
                if seq == RESTART_AFTER:
                    self.halfway.set()
                if seq == RECORDS - AFTER_OUTAGE:  # some records go out after the restart
                    assert self.back.wait(120), "the broker did not come back"
        except BaseException as exc:  # surfaced by join() on the main thread
            self.errors.append(exc)
        finally:
            self.halfway.set()


def produce_through_outage(broker: BrokerProcess, topic: str, outage: Callable[[], None]) -> None:
    """Run `outage` on the main thread (the launcher restarts brokers from a long-lived thread)
    once RESTART_AFTER records were handed over, while the stream goes on producing."""
    stream = NumberedStream(idempotent_producer(broker.bootstrap), topic)
    stream.start()
    try:
        assert stream.halfway.wait(120), "the stream never reached the outage point"
        outage()
    finally:
        stream.back.set()
        stream.join()
    assert stream.producer.flush(TIMEOUT_MS / 1000) == 0, "records left unacknowledged"
    assert not stream.failures, (
        f"{len(stream.failures)} deliveries failed, first: {stream.failures[0]}"
    )
    assert stream.acknowledged == RECORDS


def assert_exactly_once_in_order(broker: BrokerProcess, topic: str) -> None:
    records = read_partitions(broker.bootstrap, topic, dict.fromkeys(range(PARTITIONS), 0))
    for partition, stored in by_partition(records).items():
        seqs = [seq_of(r.value) for r in stored]
        expected = list(range(partition, RECORDS, PARTITIONS))
        duplicates = len(seqs) - len(set(seqs))
        missing = sorted(set(expected) - set(seqs))[:5]
        assert seqs == expected, (
            f"partition {partition}: {len(seqs)} records, {duplicates} duplicates, "
            f"first missing {missing}"
        )
        assert [r.offset for r in stored] == list(range(len(stored)))
    assert len(records) == RECORDS


@pytest.mark.parametrize("crash", [False, True], ids=["clean-restart", "kill-9"])
def test_idempotent_stream_survives_restart(broker_factory: BrokerFactory, crash: bool) -> None:
    broker = broker_factory()
    topic = f"idempotent-{'crash' if crash else 'clean'}"
    create_topic(broker.bootstrap, topic, PARTITIONS)

    def outage() -> None:
        if crash:
            broker.kill()
        broker.restart()

    produce_through_outage(broker, topic, outage)
    assert_exactly_once_in_order(broker, topic)
