"""The transaction coordinator fails over with `__transaction_state` leadership (issue 14, Deliver 1
and 3): three real broker processes in ZooKeeper mode, `__transaction_state` with replication
factor 3 and min ISR 2. A confluent-kafka transactional producer commits one transaction, then
has a second one open (records acknowledged) when the broker leading its transactional id's
partition — the coordinator — is killed with SIGKILL. The new leader reads the partition back:
the id keeps its producer id and epoch, the open transaction is still Ongoing with its
partitions, the producer's commit goes through the new coordinator (its client finds it again),
markers reach the partitions' current leaders, and a read_committed consumer sees both
transactions' records exactly once; a third transaction commits as usual."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.types import TransactionalId

from brokers.coordinator.transactions import TRANSACTION_STATE_TOPIC
from brokers.coordinator.transactions.state_topic import partition_for
from infra.stack import BrokerProcess
from tests.cluster_probes import SETTLE_S, TOPIC_SETTLING, metadata_of
from tests.integration.inproc import raw_call
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
TOPIC, PARTITIONS, STATE_PARTITIONS = "txn-failover", 3, 3
TID = "failover-copier"
TIMEOUT_S = 60.0
BROKER_CONFIG = {
    "zookeeper.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "2000",
    "auto.leader.rebalance.enable": "false",
    "transaction.state.log.num.partitions": str(STATE_PARTITIONS),
    "offsets.topic.num.partitions": "3",
}


def start_cluster(broker_factory: Any, chroot: str) -> dict[int, BrokerProcess]:
    brokers = {
        n: broker_factory(node_id=n, zookeeper=chroot, config=BROKER_CONFIG) for n in (1, 2, 3)
    }
    wait_until(
        lambda: all(sorted(metadata_of(b).brokers) == [1, 2, 3] for b in brokers.values()),
        what="brokers 1, 2 and 3 registered",
        timeout=SETTLE_S,
    )
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    [created] = admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)]).values()
    created.result(TIMEOUT_S)
    wait_until(
        lambda: all(
            p.leader in (1, 2, 3) for p in metadata_of(brokers[1]).topic(TOPIC).partitions.values()
        ),
        what=f"every partition of {TOPIC} led",
        timeout=SETTLE_S,
        retry_on=TOPIC_SETTLING,
    )
    return brokers


def coordinator_of(broker: BrokerProcess) -> int:
    topic = metadata_of(broker).topic(TRANSACTION_STATE_TOPIC)
    return int(topic.partitions[partition_for(TID, STATE_PARTITIONS)].leader)


def state_replicated(broker: BrokerProcess) -> bool:
    topic = metadata_of(broker).topic(TRANSACTION_STATE_TOPIC)
    led = topic.partitions[partition_for(TID, STATE_PARTITIONS)]
    return sorted(led.replicas) == [1, 2, 3] and sorted(led.isr) == [1, 2, 3]


def describe(broker: BrokerProcess) -> Any:
    request = DescribeTransactionsRequest(transactional_ids=(TransactionalId(TID),))
    [state] = raw_call(broker.bootstrap, request).transaction_states
    return state


def send(producer: Producer, prefix: str) -> list[str]:
    values = [f"{prefix}-{i}" for i in range(9)]
    for i, value in enumerate(values):
        producer.produce(TOPIC, value.encode(), partition=i % PARTITIONS)
    return values


def read_committed(bootstrap: str, expected: int) -> list[str]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "failover-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    seen: list[str] = []

    def enough() -> bool:
        seen.extend(
            (m.value() or b"").decode() for m in consumer.consume(100, 0.2) if m.error() is None
        )
        return len(seen) >= expected

    try:
        wait_until(enough, what=f"{expected} committed records", timeout=TIMEOUT_S)
        seen.extend(
            (m.value() or b"").decode() for m in consumer.consume(100, 1.0) if m.error() is None
        )
    finally:
        consumer.close()
    return sorted(seen)


def test_a_transaction_survives_the_coordinators_sigkill(chroot: str, broker_factory: Any) -> None:
    brokers = start_cluster(broker_factory, chroot)
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": TID, "acks": "all"})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    first = send(producer, "first")
    producer.commit_transaction(TIMEOUT_S)
    wait_until(
        lambda: state_replicated(brokers[1]),
        what=f"{TRANSACTION_STATE_TOPIC} on every broker, all in sync",
        timeout=SETTLE_S,
        retry_on=TOPIC_SETTLING,
    )
    victim = coordinator_of(brokers[1])
    before = wait_until(
        lambda: (s := describe(brokers[victim])).transaction_state == "CompleteCommit" and s,
        what="the first transaction complete",
        timeout=TIMEOUT_S,
    )
    producer.begin_transaction()
    second = send(producer, "second")
    assert producer.flush(TIMEOUT_S) == 0  # acknowledged by the ISR before the kill
    ongoing = describe(brokers[victim])
    assert ongoing.transaction_state == "Ongoing"
    assert sorted(p for t in ongoing.topics for p in t.partitions) == list(range(PARTITIONS))

    brokers[victim].kill()
    survivor = brokers[next(n for n in brokers if n != victim)]
    new = wait_until(
        lambda: (c := coordinator_of(survivor)) not in (victim, -1) and c,
        what=f"a coordinator other than {victim}",
        timeout=SETTLE_S,
    )
    taken_over = wait_until(
        lambda: (s := describe(brokers[new])).error_code == 0 and s,
        what="the new coordinator loaded the transactional id",
        timeout=SETTLE_S,
        retry_on=(OSError,),
    )
    assert (taken_over.producer_id, taken_over.producer_epoch) == (
        before.producer_id,
        before.producer_epoch,
    )
    assert taken_over.transaction_state == "Ongoing"
    assert sorted(p for t in taken_over.topics for p in t.partitions) == list(range(PARTITIONS))

    producer.commit_transaction(TIMEOUT_S)  # through the new coordinator
    producer.begin_transaction()
    third = send(producer, "third")
    producer.commit_transaction(TIMEOUT_S)
    alive = ",".join(b.bootstrap for n, b in brokers.items() if n != victim)
    expected = sorted(first + second + third)
    assert read_committed(alive, len(expected)) == expected
    final = wait_until(
        lambda: (s := describe(brokers[new])).transaction_state == "CompleteCommit" and s,
        what="the third transaction complete",
        timeout=TIMEOUT_S,
    )
    assert (final.producer_id, final.producer_epoch) == (before.producer_id, before.producer_epoch)
