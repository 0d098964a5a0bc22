"""Real read_committed consumers (confluent-kafka, kafka-python) against a running broker whose
transactions are written by hand: transactional batches by Produce, their ends by WriteTxnMarkers
(key 27) over the wire. Each consumer must skip the aborted transaction and the markers, and stop
at the open transaction (the last stable offset); read_uncommitted ones see everything."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition

from brokers.client import TopicPartition as Tp
from brokers.records.builder import build_batch
from brokers.wire.entities import make, request_module
from brokers.wire.errors import ErrorCode
from tests.integration.inproc import raw_call, running_broker
from tests.integration.replication.cluster_helpers import produce
from tests.polling import wait_until

pytestmark = pytest.mark.integration
TOPIC = "txn"
ABORTED, COMMITTED, OPEN = 100, 101, 102
# offsets: p0 @0 | a1 a2 @1-2 (aborted) | c1 @3 (committed) | ABORT @4 | p1 @5 | COMMIT @6 |
# o1 @7 (open: the last stable offset) | p2 @8
COMMITTED_VALUES: list[bytes | None] = [b"p0", b"c1", b"p1"]
ALL_VALUES: list[bytes | None] = [b"p0", b"a1", b"a2", b"c1", b"p1", b"o1", b"p2"]
LSO = 7


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # the transactions are written by hand (no coordinator knows them): the leader does not verify
    unverified = {"transaction.partition.verification.enable": "false"}
    with running_broker(tmp_path_factory.mktemp("txn"), unverified) as address:
        admin = AdminClient({"bootstrap.servers": address})
        for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
            future.result(10)
        port = int(address.rsplit(":", 1)[1])
        write = _writer(port)
        write(_plain(b"p0"))
        write(_txn(ABORTED, [b"a1", b"a2"]))
        write(_txn(COMMITTED, [b"c1"]))
        assert _end(address, ABORTED, commit=False) == ErrorCode.none
        write(_plain(b"p1"))
        assert _end(address, COMMITTED, commit=True) == ErrorCode.none
        write(_txn(OPEN, [b"o1"]))
        write(_plain(b"p2"))
        yield address


def _writer(port: int) -> Callable[[bytes], None]:
    def write(batch: bytes) -> None:
        answer = produce(port, Tp(TOPIC, 0), batch, acks=-1, timeout_s=10, transactional_id="tx")
        assert answer.error_code == ErrorCode.none

    return write


def _plain(value: bytes) -> bytes:
    return build_batch([(None, value)])


def _txn(producer_id: int, values: list[bytes]) -> bytes:
    return build_batch(
        [(None, v) for v in values],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )


def _end(bootstrap: str, producer_id: int, *, commit: bool) -> ErrorCode:
    """WriteTxnMarkers v1 for partition 0, as a transaction coordinator sends it."""
    module = request_module(27, 1)
    marker = make(
        module,
        "WritableTxnMarker",
        producer_id=producer_id,
        producer_epoch=0,
        transaction_result=commit,
        coordinator_epoch=0,
        topics=(make(module, "WritableTxnMarkerTopic", name=TOPIC, partition_indexes=(0,)),),
    )
    response = raw_call(bootstrap, make(module, "WriteTxnMarkersRequest", markers=(marker,)))
    (result,) = response.markers
    (topic,) = result.topics
    (partition,) = topic.partitions
    return ErrorCode(partition.error_code)


def _confluent(bootstrap: str, isolation: str, until_position: int) -> list[bytes | None]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"cg-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    tp = TopicPartition(TOPIC, 0, 0)
    consumer.assign([tp])
    got: list[bytes | None] = []

    def caught_up() -> bool:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got.append(message.value())
        (position,) = consumer.position([tp])
        return bool(position.offset >= until_position)

    try:
        wait_until(caught_up, what=f"confluent {isolation} at {until_position}", timeout=30)
    finally:
        consumer.close()
    return got


def _kafka_python(bootstrap: str, isolation: str, until_position: int) -> list[bytes | None]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    tp = KafkaTopicPartition(TOPIC, 0)
    consumer.assign([tp])
    got: list[bytes | None] = []

    def caught_up() -> bool:
        for records in consumer.poll(timeout_ms=200).values():
            got.extend(r.value for r in records)
        return bool(consumer.position(tp) >= until_position)

    try:
        wait_until(caught_up, what=f"kafka-python {isolation} at {until_position}", timeout=30)
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("read", [_confluent, _kafka_python], ids=["confluent", "kafka-python"])
def test_read_committed_skips_aborted_data_and_stops_at_the_open_transaction(
    bootstrap: str, read: Callable[[str, str, int], list[bytes | None]]
) -> None:
    assert read(bootstrap, "read_committed", LSO) == COMMITTED_VALUES


@pytest.mark.parametrize("read", [_confluent, _kafka_python], ids=["confluent", "kafka-python"])
def test_read_uncommitted_sees_every_record(
    bootstrap: str, read: Callable[[str, str, int], list[bytes | None]]
) -> None:
    assert read(bootstrap, "read_uncommitted", 9) == ALL_VALUES
