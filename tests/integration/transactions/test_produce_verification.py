"""KIP-890 part 1, server side (issue 14): a partition leader asks the transaction coordinator
before appending a transaction's first batch on a partition. A raw transactional Produce to a
partition never added to the producer's transaction is refused — INVALID_TXN_STATE (v9),
TRANSACTION_ABORTABLE (v11) — and nothing is written, so the last stable offset stays at the high
watermark; the same batch after AddPartitionsToTxn is accepted and commits. On an in-process
standalone broker (local coordinator) and on three ZooKeeper-mode broker processes where the
coordinator is another broker than the partition's leader (AddPartitionsToTxn v4 verify_only
over the wire)."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.static.primitive import i8

from brokers.client.messages import make, request_module
from brokers.records.builder import build_batch
from brokers.wire.errors import ErrorCode
from tests.cluster_probes import SETTLE_S, TOPIC_SETTLING, metadata_of
from tests.e2e.raw_wire import RawConnection
from tests.e2e.transactions.readers import READ_COMMITTED, high_watermarks
from tests.e2e.transactions.txn_wire import add_partitions, end_txn, init_producer_id
from tests.integration.inproc import broker_thread, raw_call
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
TOPIC = "verified-out"
TIMEOUT_S = 60.0
NOT_ADDED_V9 = ErrorCode.invalid_txn_state
NOT_ADDED_V11 = ErrorCode.transaction_abortable


def create_topic(bootstrap: str, partitions: int, replication: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [created] = admin.create_topics([NewTopic(TOPIC, partitions, replication)]).values()
    created.result(TIMEOUT_S)


def produce(
    bootstrap: str,
    version: int,
    transactional_id: str,
    producer: tuple[int, int],
    batches: Mapping[int, tuple[int, Sequence[bytes]]],
) -> dict[int, int]:
    """One Produce (acks=all) of a transactional batch per partition (partition → (base
    sequence, values)); partition → error code."""
    module = request_module(0, version)
    data = tuple(
        make(
            module,
            "PartitionProduceData",
            index=index,
            records=build_batch(
                [(None, v) for v in values],
                producer_id=producer[0],
                producer_epoch=producer[1],
                base_sequence=sequence,
                is_transactional=True,
            ),
        )
        for index, (sequence, values) in batches.items()
    )
    request = make(
        module,
        "ProduceRequest",
        transactional_id=transactional_id,
        acks=-1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(make(module, "TopicProduceData", name=TOPIC, partition_data=data),),
    )
    response = raw_call(bootstrap, request)
    (topic,) = response.responses
    return {int(p.index): int(p.error_code) for p in topic.partition_responses}


def stable_offsets(bootstrap: str, partitions: int) -> tuple[dict[int, int], dict[int, int]]:
    """(last stable offsets, high watermarks) by ListOffsets latest under both isolations."""
    lso = high_watermarks(bootstrap, TOPIC, partitions, isolation=READ_COMMITTED)
    return lso, high_watermarks(bootstrap, TOPIC, partitions)


# ---- standalone: the coordinator is on the leader ------------------------------------------


def test_standalone_refuses_a_partition_not_in_the_transaction(tmp_path: Path) -> None:
    properties = {"transaction.state.log.num.partitions": "3"}
    with broker_thread(tmp_path, properties) as broker:
        bootstrap = f"127.0.0.1:{broker.port}"
        create_topic(bootstrap, 2, 1)
        tid = f"verify-{uuid.uuid4().hex[:8]}"
        with RawConnection("127.0.0.1", broker.port) as wire:
            producer = init_producer_id(wire, tid, 60_000)
            assert produce(bootstrap, 9, tid, producer, {0: (0, [b"early"])}) == {0: NOT_ADDED_V9}
            assert produce(bootstrap, 11, tid, producer, {0: (0, [b"early"])}) == {0: NOT_ADDED_V11}
            p0 = broker.replicas.get(TOPIC, 0)
            assert p0.log.log_end_offset == 0, "a refused batch was written"
            assert p0.last_stable_offset == p0.high_watermark == 0

            # Partition 0 added, partition 1 not: one request, one verification, two answers.
            assert add_partitions(wire, tid, producer, TOPIC, [0]) == {0: ErrorCode.none}
            answers = produce(bootstrap, 9, tid, producer, {0: (0, [b"a"]), 1: (0, [b"b"])})
            assert answers == {0: ErrorCode.none, 1: NOT_ADDED_V9}
            p1 = broker.replicas.get(TOPIC, 1)
            assert p1.log.log_end_offset == 0 and p1.last_stable_offset == p1.high_watermark
            # The transaction is open on partition 0: its next batch is appended as usual.
            assert produce(bootstrap, 9, tid, producer, {0: (1, [b"c"])}) == {0: ErrorCode.none}
            assert end_txn(wire, tid, producer, commit=True) == ErrorCode.none
        wait_until(
            lambda: stable_offsets(bootstrap, 2) == ({0: 3, 1: 0}, {0: 3, 1: 0}),
            what="the committed transaction stable on partition 0 (2 records + marker)",
            timeout=TIMEOUT_S,
        )


def test_standalone_without_verification_appends_unadded_partitions(tmp_path: Path) -> None:
    """`transaction.partition.verification.enable=false`: the pre-KIP-890 behaviour."""
    properties = {
        "transaction.state.log.num.partitions": "3",
        "transaction.partition.verification.enable": "false",
    }
    with broker_thread(tmp_path, properties) as broker:
        bootstrap = f"127.0.0.1:{broker.port}"
        create_topic(bootstrap, 1, 1)
        tid = f"unverified-{uuid.uuid4().hex[:8]}"
        with RawConnection("127.0.0.1", broker.port) as wire:
            producer = init_producer_id(wire, tid, 60_000)
            assert produce(bootstrap, 9, tid, producer, {0: (0, [b"x"])}) == {0: ErrorCode.none}
        assert broker.replicas.get(TOPIC, 0).log.log_end_offset == 1


# ---- three brokers: the coordinator is another broker --------------------------------------

CLUSTER_CONFIG = {
    "zookeeper.session.timeout.ms": "6000",
    "auto.leader.rebalance.enable": "false",
    "transaction.state.log.num.partitions": "3",
    "offsets.topic.num.partitions": "3",
}


def find_coordinator(bootstrap: str, transactional_id: str) -> int:
    """The node id of the transactional id's coordinator (creates `__transaction_state`)."""
    request = FindCoordinatorRequest(key_type=i8(1), coordinator_keys=(transactional_id,))

    def found() -> int | None:
        (answer,) = raw_call(bootstrap, request).coordinators
        return int(answer.node_id) if answer.error_code == ErrorCode.none else None

    node = wait_until(found, what=f"coordinator of {transactional_id}", timeout=TIMEOUT_S)
    assert node is not None
    return node


def test_cluster_verifies_with_a_remote_coordinator(chroot: str, broker_factory: Any) -> None:
    brokers = {
        n: broker_factory(node_id=n, zookeeper=chroot, config=CLUSTER_CONFIG) for n in (1, 2, 3)
    }
    wait_until(
        lambda: all(sorted(metadata_of(b).brokers) == [1, 2, 3] for b in brokers.values()),
        what="brokers 1, 2 and 3 registered",
        timeout=SETTLE_S,
    )
    create_topic(brokers[1].bootstrap, 3, 1)

    def leaders() -> dict[int, int] | None:
        topic = metadata_of(brokers[1]).topic(TOPIC)
        found = {int(i): int(p.leader) for i, p in topic.partitions.items()}
        return found if sorted(found.values()) == [1, 2, 3] else None

    led = wait_until(
        leaders, what=f"{TOPIC} led by 1, 2 and 3", timeout=SETTLE_S, retry_on=TOPIC_SETTLING
    )
    assert led is not None
    tid = f"remote-{uuid.uuid4().hex[:8]}"
    coordinator = find_coordinator(brokers[1].bootstrap, tid)
    index = next(i for i, leader in led.items() if leader != coordinator)
    leader = brokers[led[index]]
    coord = brokers[coordinator]
    host, port = coord.bootstrap.rsplit(":", 1)
    with RawConnection(host, int(port)) as wire:
        producer = init_producer_id(wire, tid, 60_000)
        refused = produce(leader.bootstrap, 9, tid, producer, {index: (0, [b"early"])})
        assert refused == {index: NOT_ADDED_V9}, (
            f"leader {led[index]}, coordinator {coordinator}: {refused}"
        )
        lso, high = stable_offsets(leader.bootstrap, 3)
        assert high[index] == 0, "a refused batch was written"
        assert lso[index] == high[index]

        assert add_partitions(wire, tid, producer, TOPIC, [index]) == {index: ErrorCode.none}
        accepted = produce(leader.bootstrap, 9, tid, producer, {index: (0, [b"a"])})
        assert accepted == {index: ErrorCode.none}
        assert end_txn(wire, tid, producer, commit=True) == ErrorCode.none
    wait_until(
        lambda: stable_offsets(leader.bootstrap, 3)[0][index] == 2,
        what="the committed record and its marker stable on the remote leader",
        timeout=TIMEOUT_S,
    )
