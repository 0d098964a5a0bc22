"""Transactions on a standalone in-process broker with confluent-kafka's transactional producer:
commit and abort (a read_committed consumer sees exactly the committed records, a
read_uncommitted one sees both), a zombie fenced by a second producer with the same
transactional.id, offsets sent to a transaction (committed only with it), the coordinator's
abort of a transaction past its timeout, and the state surviving a broker restart."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.types import TransactionalId

from tests.integration.inproc import raw_call, running_broker
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]
TOPIC = "txn-out"
TIMEOUT_S = 30.0
BROKER_PROPERTIES = {
    "transaction.state.log.num.partitions": "5",
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
}


def create_topic(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    [created] = admin.create_topics([NewTopic(TOPIC, 2, 1)]).values()
    created.result(TIMEOUT_S)


@pytest.fixture
def bootstrap(tmp_path: Path) -> Iterator[str]:
    with running_broker(tmp_path, BROKER_PROPERTIES) as address:
        create_topic(address)
        yield address


def producer(bootstrap: str, transactional_id: str, **config: Any) -> Producer:
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id, **config})
    p.init_transactions(TIMEOUT_S)
    return p


def read_all(bootstrap: str, isolation: str, expected: int) -> list[str]:
    """Every record of TOPIC under `isolation`, once `expected` of them have arrived."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{isolation}-{time.monotonic_ns()}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(2)])
    seen: list[str] = []

    def enough() -> bool:
        for message in consumer.consume(100, 0.2):
            if message.error() is None:
                seen.append((message.value() or b"").decode())
        return len(seen) >= expected

    try:
        wait_until(enough, what=f"{expected} records under {isolation}", timeout=TIMEOUT_S)
        for message in consumer.consume(100, 0.5):  # nothing more may come
            if message.error() is None:
                seen.append((message.value() or b"").decode())
    finally:
        consumer.close()
    return sorted(seen)


def send(p: Producer, prefix: str, count: int = 4) -> list[str]:
    values = [f"{prefix}-{i}" for i in range(count)]
    for i, value in enumerate(values):
        p.produce(TOPIC, value.encode(), partition=i % 2)
    return values


def describe(bootstrap: str, transactional_id: str) -> Any:
    request = DescribeTransactionsRequest(transactional_ids=(TransactionalId(transactional_id),))
    [state] = raw_call(bootstrap, request).transaction_states
    return state


def test_commit_and_abort_seen_by_read_committed(bootstrap: str) -> None:
    p = producer(bootstrap, "copier")
    p.begin_transaction()
    committed = send(p, "c1")
    p.commit_transaction(TIMEOUT_S)
    p.begin_transaction()
    aborted = send(p, "a1")
    p.flush(TIMEOUT_S)  # on the partitions before the abort: read_committed must skip them
    p.abort_transaction(TIMEOUT_S)
    p.begin_transaction()
    committed += send(p, "c2")
    p.commit_transaction(TIMEOUT_S)
    assert read_all(bootstrap, "read_committed", len(committed)) == sorted(committed)
    everything = sorted(committed + aborted)
    assert read_all(bootstrap, "read_uncommitted", len(everything)) == everything
    state = describe(bootstrap, "copier")
    assert (state.error_code, state.transaction_state) == (0, "CompleteCommit")


def test_a_second_producer_fences_the_zombie(bootstrap: str) -> None:
    zombie = producer(bootstrap, "shared-id")
    zombie.begin_transaction()
    lost = send(zombie, "zombie")
    zombie.flush(TIMEOUT_S)
    successor = producer(bootstrap, "shared-id")  # aborts the zombie's open transaction
    successor.begin_transaction()
    kept = send(successor, "successor")
    successor.commit_transaction(TIMEOUT_S)
    with pytest.raises(KafkaException) as raised:
        zombie.commit_transaction(TIMEOUT_S)
    error: KafkaError = raised.value.args[0]
    assert error.code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED), error
    assert error.fatal(), error
    assert read_all(bootstrap, "read_committed", len(kept)) == sorted(kept)
    assert read_all(bootstrap, "read_uncommitted", len(kept + lost)) == sorted(kept + lost)


@pytest.mark.parametrize("commit", [True, False])
def test_offsets_sent_to_a_transaction_commit_with_it(bootstrap: str, commit: bool) -> None:
    group = f"copier-group-{commit}"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    p = producer(bootstrap, f"offsets-{commit}")
    p.begin_transaction()
    send(p, "out")
    offsets = [TopicPartition(TOPIC, 0, 3), TopicPartition(TOPIC, 1, 5)]
    p.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), TIMEOUT_S)
    if commit:
        p.commit_transaction(TIMEOUT_S)
    else:
        p.abort_transaction(TIMEOUT_S)
    wanted = {0: 3, 1: 5} if commit else {0: -1001, 1: -1001}  # -1001: none committed

    def committed() -> dict[int, int]:
        tps = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
        return {tp.partition: tp.offset for tp in consumer.committed(tps, timeout=10)}

    try:
        wait_until(
            lambda: committed() == wanted,
            what=f"committed offsets {wanted}",
            timeout=TIMEOUT_S,
            retry_on=(KafkaException,),  # UNSTABLE_OFFSET_COMMIT until the marker lands
        )
    finally:
        consumer.close()


def test_the_coordinator_aborts_a_transaction_past_its_timeout(bootstrap: str) -> None:
    p = producer(bootstrap, "slow", **{"transaction.timeout.ms": 1000})
    p.begin_transaction()
    stale = send(p, "stale")
    p.flush(TIMEOUT_S)
    wait_until(
        lambda: describe(bootstrap, "slow").transaction_state == "CompleteAbort",
        what="the timed-out transaction aborted",
        timeout=TIMEOUT_S,
    )
    with pytest.raises(KafkaException) as raised:
        p.commit_transaction(TIMEOUT_S)  # its epoch was bumped: fenced
    assert raised.value.args[0].code() != KafkaError.NO_ERROR
    # The LSO moved past the aborted records: later committed data is readable.
    fresh = producer(bootstrap, "after-timeout")
    fresh.begin_transaction()
    kept = send(fresh, "kept")
    fresh.commit_transaction(TIMEOUT_S)
    assert read_all(bootstrap, "read_committed", len(kept)) == sorted(kept)
    assert read_all(bootstrap, "read_uncommitted", len(kept + stale)) == sorted(kept + stale)


def test_transactional_state_survives_a_restart(tmp_path: Path) -> None:
    with running_broker(tmp_path, BROKER_PROPERTIES) as address:
        create_topic(address)
        p = producer(address, "durable")
        p.begin_transaction()
        send(p, "before")
        p.commit_transaction(TIMEOUT_S)
        wait_until(
            lambda: describe(address, "durable").transaction_state == "CompleteCommit",
            what="the transaction complete",
        )
        before = describe(address, "durable")
    with running_broker(tmp_path, BROKER_PROPERTIES) as address:
        after = wait_until(
            lambda: (s := describe(address, "durable")).error_code == 0 and s,
            what="the transactional id loaded back",
        )
        assert (after.producer_id, after.producer_epoch, after.transaction_state) == (
            before.producer_id,
            before.producer_epoch,
            "CompleteCommit",
        )
        again = producer(address, "durable")  # the same producer id, the next epoch
        again.begin_transaction()
        send(again, "after")
        again.commit_transaction(TIMEOUT_S)
        state = describe(address, "durable")
        assert (state.producer_id, state.producer_epoch) == (
            before.producer_id,
            before.producer_epoch + 1,
        )
