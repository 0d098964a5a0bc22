"""Transactional offset commits on a real in-process broker, over the wire: TxnOffsetCommit
writes the offsets pending, OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT, a
WriteTxnMarkers COMMIT on the group's `__consumer_offsets` partition makes them the committed
offsets (an ABORT drops them), and a restarted broker reads all of it back from the log — an
open transaction's offsets still pending until its marker arrives. Then the whole path with a
real client: confluent-kafka's send_offsets_to_transaction, committed or aborted through the
transaction coordinator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_INVALID, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from brokers.coordinator.offsets_topic import OFFSETS_TOPIC, partition_for
from brokers.wire.errors import ErrorCode
from tests.integration.inproc import broker_thread, raw_call
from tests.polling import wait_until
from tests.unit.handlers.admin_harness import entity

pytestmark = pytest.mark.integration
TXN_COMMIT, FETCH, MARKERS = 28, 9, 27
GROUP, PID, EPOCH = "txn-group", 9100, 2
OFFSETS_PARTITIONS = 5
PROPERTIES = {"offsets.topic.num.partitions": str(OFFSETS_PARTITIONS)}
# Hand-written commits and markers, no transaction coordinator: not verified.
UNVERIFIED = {**PROPERTIES, "transaction.partition.verification.enable": "false"}


def create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic("events", num_partitions=2, replication_factor=1)])
    futures["events"].result(30)


def txn_commit(bootstrap: str, offsets: dict[int, int], *, epoch: int = EPOCH) -> list[int]:
    partitions = tuple(
        entity(
            TXN_COMMIT,
            3,
            "TxnOffsetCommitRequestPartition",
            partition_index=p,
            committed_offset=o,
            committed_leader_epoch=-1,
            committed_metadata="",
        )
        for p, o in offsets.items()
    )
    topic = entity(
        TXN_COMMIT, 3, "TxnOffsetCommitRequestTopic", name="events", partitions=partitions
    )
    request = entity(
        TXN_COMMIT, 3, "TxnOffsetCommitRequest", transactional_id="tx-1", group_id=GROUP,
        producer_id=PID, producer_epoch=epoch, generation_id=-1, member_id="",
        group_instance_id=None, topics=(topic,),
    )  # fmt: skip
    response = raw_call(bootstrap, request)
    return [p.error_code for t in response.topics for p in t.partitions]


def fetch_stable(bootstrap: str) -> list[tuple[int, int, int]]:
    """(partition, committed offset, error) for events-0 and events-1, require_stable."""
    wanted = entity(FETCH, 7, "OffsetFetchRequestTopic", name="events", partition_indexes=(0, 1))
    request = entity(
        FETCH, 7, "OffsetFetchRequest", group_id=GROUP, topics=(wanted,), require_stable=True
    )
    response = raw_call(bootstrap, request)
    assert response.error_code == ErrorCode.none
    return [
        (p.partition_index, p.committed_offset, p.error_code)
        for t in response.topics
        for p in t.partitions
    ]


def write_marker(bootstrap: str, commit: bool) -> Any:
    """The transaction coordinator's marker on the group's offsets partition."""
    topic = entity(
        MARKERS, 1, "WritableTxnMarkerTopic", name=OFFSETS_TOPIC,
        partition_indexes=(partition_for(GROUP, OFFSETS_PARTITIONS),),
    )  # fmt: skip
    marker = entity(
        MARKERS, 1, "WritableTxnMarker", producer_id=PID, producer_epoch=EPOCH,
        transaction_result=commit, topics=(topic,), coordinator_epoch=0,
    )  # fmt: skip
    response = raw_call(bootstrap, entity(MARKERS, 1, "WriteTxnMarkersRequest", markers=(marker,)))
    [answer] = response.markers
    codes = [p.error_code for t in answer.topics for p in t.partitions]
    assert codes == [ErrorCode.none]


def test_txn_offsets_pending_until_the_marker_and_read_back(tmp_path: Path) -> None:
    unstable = ErrorCode.unstable_offset_commit
    with broker_thread(tmp_path, UNVERIFIED) as broker:
        bootstrap = f"127.0.0.1:{broker.port}"
        create_topic(bootstrap)
        assert txn_commit(bootstrap, {0: 10, 1: 11}) == [ErrorCode.none, ErrorCode.none]
        assert fetch_stable(bootstrap) == [(0, -1, unstable), (1, -1, unstable)]
        write_marker(bootstrap, commit=True)
        assert fetch_stable(bootstrap) == [(0, 10, 0), (1, 11, 0)]

        assert txn_commit(bootstrap, {0: 20}) == [ErrorCode.none]
        write_marker(bootstrap, commit=False)
        assert fetch_stable(bootstrap) == [(0, 10, 0), (1, 11, 0)]

        assert txn_commit(bootstrap, {1: 30}) == [ErrorCode.none]  # left open
        assert txn_commit(bootstrap, {0: 40}, epoch=EPOCH - 1) == [ErrorCode.invalid_producer_epoch]
        assert fetch_stable(bootstrap) == [(0, 10, 0), (1, -1, unstable)]

    with broker_thread(tmp_path, UNVERIFIED) as broker:
        bootstrap = f"127.0.0.1:{broker.port}"
        assert fetch_stable(bootstrap) == [(0, 10, 0), (1, -1, unstable)]
        write_marker(bootstrap, commit=True)  # the coordinator completes it after the restart
        assert fetch_stable(bootstrap) == [(0, 10, 0), (1, 30, 0)]


def committed_offset(consumer: Consumer, partition: int) -> int:
    [tp] = consumer.committed([TopicPartition("events", partition)], timeout=30)
    assert tp.error is None
    return int(tp.offset)


def test_send_offsets_to_transaction_with_confluent_kafka(tmp_path: Path) -> None:
    """A consume-transform-produce loop's offsets (librdkafka's send_offsets_to_transaction):
    committed only with the transaction, never by an aborted one."""
    with broker_thread(tmp_path, PROPERTIES) as broker:
        bootstrap = f"127.0.0.1:{broker.port}"
        create_topic(bootstrap)
        producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": "txn-copier"})
        # read_uncommitted: OffsetFetch without require_stable, so pending offsets read as none
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "copier-group",
                "enable.auto.commit": False,
                "isolation.level": "read_uncommitted",
            }
        )
        try:
            producer.init_transactions(30)
            group = consumer.consumer_group_metadata()

            producer.begin_transaction()
            producer.produce("events", b"copied", partition=1)
            producer.send_offsets_to_transaction([TopicPartition("events", 0, 5)], group, 30)
            assert committed_offset(consumer, 0) == OFFSET_INVALID  # pending
            producer.commit_transaction(30)
            wait_until(
                lambda: committed_offset(consumer, 0) == 5,
                what="the transaction's offset committed by its marker",
            )

            producer.begin_transaction()
            producer.send_offsets_to_transaction([TopicPartition("events", 0, 9)], group, 30)
            producer.abort_transaction(30)
            # The next transaction can only start once the abort's markers are written, so
            # its commit proves the aborted offset was dropped, not merely not yet applied.
            producer.begin_transaction()
            producer.send_offsets_to_transaction([TopicPartition("events", 1, 3)], group, 30)
            producer.commit_transaction(30)
            wait_until(
                lambda: committed_offset(consumer, 1) == 3,
                what="the second committed transaction's offset",
            )
            assert committed_offset(consumer, 0) == 5
        finally:
            consumer.close()
