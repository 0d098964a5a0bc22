"""Transactions under faults on one broker (issue 14, "Correctness under faults").

- A producer stalls inside a transaction (`transaction.timeout.ms` 10 s). While it is open, the
  last stable offset stays at its first record, so a read_committed reader gets nothing of a
  transaction committed after it. The coordinator aborts it proactively at its timeout (the
  sweep runs every 200 ms here): the LSO advances to the high watermark, the reader gets the
  committed records behind it and none of the stalled ones. When the stalled producer wakes up,
  its produce and commit are fenced (the abort bumped its epoch), and nothing it sends leaves a
  transaction hanging: the LSO stays at the high watermark.
- A delayed EndTxn of an old epoch cannot complete a later transaction (the KAFKA-17754
  hazard), sent raw: a producer's transaction is left open, a new instance of the same
  transactional id takes over (InitProducerId: the coordinator aborts the old transaction and
  bumps the epoch) and opens its own transaction, then the old instance's EndTxn(commit)
  arrives. It is refused as fenced, the new transaction stays open (its records invisible, the
  LSO held), and when the new instance aborts, none of its records ever become visible.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from brokers.wire.errors import ErrorCode
from tests.e2e.kafka_admin import create_topic
from tests.e2e.raw_wire import RawConnection
from tests.e2e.transactions.conftest import TxnBroker
from tests.e2e.transactions.readers import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    high_watermarks,
    read_topic,
)
from tests.e2e.transactions.txn_wire import (
    add_partitions,
    end_txn,
    init_producer_id,
    produce_transactional,
)
from tests.polling import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

TIMEOUT_MS = 10_000
RECORDS = 5
# How the client reports a producer whose epoch the coordinator bumped under it: fenced (fatal)
# or an abortable INVALID_PRODUCER_EPOCH (KIP-360), depending on which request hits it first.
FENCED = {
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
}


def offsets(bootstrap: str, topic: str) -> tuple[int, int]:
    """(last stable offset, high watermark) of partition 0: ListOffsets latest both ways."""
    lso = high_watermarks(bootstrap, topic, 1, isolation=READ_COMMITTED)[0]
    return lso, high_watermarks(bootstrap, topic, 1)[0]


def values_of(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    return [r.value for r in read_topic(bootstrap, topic, 1, isolation)]


def batch(tag: str, count: int = RECORDS) -> list[bytes]:
    return [f"{tag}/{i}".encode() for i in range(count)]


def transactional(bootstrap: str, transactional_id: str, **extra: object) -> Producer:
    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **extra}
    )
    producer.init_transactions(60)
    return producer


def test_a_stalled_transaction_is_aborted_at_its_timeout_and_its_producer_fenced(
    txn_broker: TxnBroker, topic_name: str
) -> None:
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, topic_name)
    suffix = uuid.uuid4().hex[:8]
    healthy = transactional(bootstrap, f"healthy-{suffix}")
    stalled = transactional(
        bootstrap, f"stalled-{suffix}", **{"transaction.timeout.ms": TIMEOUT_MS}
    )

    stalled.begin_transaction()
    for value in batch("stalled"):
        stalled.produce(topic_name, value, partition=0)
    assert stalled.flush(30) == 0
    opened = time.monotonic()
    healthy.begin_transaction()
    for value in batch("healthy"):
        healthy.produce(topic_name, value, partition=0)
    healthy.commit_transaction(30)
    lso, high = offsets(bootstrap, topic_name)
    held = time.monotonic() - opened
    assert held < TIMEOUT_MS / 1000, f"too slow to see the open transaction: {held:.1f} s"
    # stalled 0-4, healthy 5-9, healthy's COMMIT marker at 10: the LSO is the stalled one's start
    assert (lso, high) == (0, 2 * RECORDS + 1), (
        f"LSO, high watermark {lso, high} after {held:.1f} s"
    )

    wait_until(
        lambda: (now := offsets(bootstrap, topic_name))[0] == now[1] and now,
        what="the stalled transaction aborted by the coordinator (LSO = high watermark)",
        timeout=TIMEOUT_MS / 1000 + 30,
    )
    aborted_after = time.monotonic() - opened
    assert values_of(bootstrap, topic_name, READ_COMMITTED) == batch("healthy")
    assert values_of(bootstrap, topic_name, READ_UNCOMMITTED)[:RECORDS] == batch("stalled")

    # The stalled producer wakes up: whatever it sends now belongs to an epoch the abort fenced.
    for value in batch("late"):
        stalled.produce(topic_name, value, partition=0)
    with pytest.raises(KafkaException) as refused:
        stalled.commit_transaction(30)
    error: KafkaError = refused.value.args[0]
    assert error.code() in FENCED, f"commit after the timeout: {error}"
    if error.txn_requires_abort():
        stalled.abort_transaction(30)
    lso, high = offsets(bootstrap, topic_name)
    assert lso == high, (
        f"LSO {lso} behind high watermark {high}: a late batch left a transaction open"
    )
    assert values_of(bootstrap, topic_name, READ_COMMITTED) == batch("healthy")
    print(
        f"\nstalled transaction aborted {aborted_after:.1f} s after its records (timeout"
        f" {TIMEOUT_MS} ms); its late commit failed with {error.name()}"
    )


def test_a_delayed_end_txn_of_an_old_epoch_cannot_complete_a_later_transaction(
    txn_broker: TxnBroker, topic_name: str
) -> None:
    bootstrap = txn_broker.bootstrap
    create_topic(bootstrap, topic_name)
    txn_id = f"zombie-{uuid.uuid4().hex[:8]}"
    with RawConnection(txn_broker.host, txn_broker.port) as wire:
        old = init_producer_id(wire, txn_id, 60_000)
        assert add_partitions(wire, txn_id, old, topic_name, [0]) == {0: ErrorCode.none}
        assert produce_transactional(wire, txn_id, topic_name, 0, old, 0, batch("old")) == 0
        # A new instance takes over: the old transaction is aborted, the epoch bumped.
        new = init_producer_id(wire, txn_id, 60_000)
        assert new[0] == old[0] and new[1] > old[1], f"new instance {new}, old {old}"
        assert add_partitions(wire, txn_id, new, topic_name, [0]) == {0: ErrorCode.none}
        assert produce_transactional(wire, txn_id, topic_name, 0, new, 0, batch("new")) == 0
        logged = read_topic(bootstrap, topic_name, 1, READ_UNCOMMITTED)
        first_new = next(r.offset for r in logged if r.value == b"new/0")

        # The old instance's EndTxn(commit), held back until now.
        late = end_txn(wire, txn_id, old, commit=True)
        assert late in (ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch), (
            f"a delayed EndTxn of epoch {old[1]} (current {new[1]}) answered {late!r}"
        )
        lso, _ = offsets(bootstrap, topic_name)
        assert lso == first_new, f"LSO {lso}: the new transaction (from {first_new}) was completed"
        assert values_of(bootstrap, topic_name, READ_COMMITTED) == []

        assert end_txn(wire, txn_id, new, commit=False) == ErrorCode.none
    wait_until(
        lambda: (now := offsets(bootstrap, topic_name))[0] == now[1] and now,
        what="the new transaction's abort completed",
        timeout=30,
    )
    assert values_of(bootstrap, topic_name, READ_COMMITTED) == []
    assert set(values_of(bootstrap, topic_name, READ_UNCOMMITTED)) == set(
        batch("old") + batch("new")
    )
