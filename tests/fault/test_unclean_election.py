"""`unclean.leader.election.enable` with two real broker processes in ZooKeeper mode.

The ISR shrinks to the leader alone (its follower is killed), the leader takes more writes, then
the leader dies too and the out-of-sync follower comes back. With the topic default (false) the
partition stays offline: no leader, produce and fetch refused, nothing served from outside the
ISR. Setting the topic's `unclean.leader.election.enable=true` (IncrementalAlterConfigs, as an
operator would) elects the out-of-sync replica at once: the partition serves again and its log
end is that replica's — the writes only the dead leader had are lost, the price of unclean
election. When the old leader returns it truncates its divergent tail (KIP-101) and the replicas
hold identical batches.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, not declared
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from brokers.client import TopicPartition
from brokers.client.admin import Admin
from brokers.client.topics import NewTopic
from brokers.controller import zk_paths
from brokers.controller.state import LeaderAndIsr
from brokers.records.errors import CorruptRecordError
from brokers.wire.errors import ErrorCode
from infra.stack import BrokerProcess
from tests.cluster_probes import (
    SETTLE_S,
    TOPIC_SETTLING,
    ZNODE_MISSING,
    metadata_of,
    zk_read,
)
from tests.fault.test_leader_bounces import replica_batches
from tests.integration.replication.cluster_helpers import consume, produce
from tests.polling import wait_until
from tests.unit.log.partition_helpers import make_batch

pytestmark = [pytest.mark.fault, pytest.mark.timeout(240)]

BROKER_CONFIG = {
    "zookeeper.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "2000",
    "auto.leader.rebalance.enable": "false",
}
TOPIC = "fragile"
TP = TopicPartition(TOPIC, 0)


def create(broker: BrokerProcess, topic: str, replicas: int) -> None:
    async def run() -> dict[str, Any]:
        async with Admin.for_bootstrap(broker.bootstrap) as admin:
            return await admin.create_topics([NewTopic(topic, 1, replicas)])

    assert asyncio.run(run()) == {topic: None}


def partition_state(chroot: str) -> LeaderAndIsr:
    data, _ = zk_read(chroot, f"/brokers/topics/{TOPIC}/partitions/0/state")
    return zk_paths.decode_partition_state(data)


def produce_acked(bootstrap: str, count: int, prefix: bytes) -> list[int]:
    """`count` records with acks=all through confluent-kafka; their acknowledged offsets."""
    offsets: list[int] = []
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})

    def delivered(error: Any, message: Any) -> None:
        assert error is None, str(error)
        offsets.append(message.offset())

    for i in range(count):
        producer.produce(TOPIC, value=prefix + b"%d" % i, partition=0, on_delivery=delivered)
    assert producer.flush(30) == 0
    return offsets


def set_unclean(bootstrap: str, enabled: bool) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry(
        "unclean.leader.election.enable",
        "true" if enabled else "false",
        incremental_operation=AlterConfigOpType.SET,
    )
    resource = ConfigResource(ResourceType.TOPIC, TOPIC, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def controller_caught_up(chroot: str, survivor: BrokerProcess, name: str) -> None:
    """A barrier: the controller handles events in order, so once a topic created now is
    served, every earlier event (the survivor's registration) has been handled."""
    create(survivor, name, 1)
    wait_until(
        lambda: metadata_of(survivor).topic(name).partitions[0].leader != -1,
        what=f"{name} led",
        timeout=SETTLE_S,
        retry_on=TOPIC_SETTLING,
    )


def test_out_of_sync_replica_leads_only_when_unclean_election_is_enabled(
    chroot: str, broker_factory: Any
) -> None:
    brokers = {n: broker_factory(node_id=n, zookeeper=chroot, config=BROKER_CONFIG) for n in (1, 2)}
    wait_until(
        lambda: all(sorted(metadata_of(b).brokers) == [1, 2] for b in brokers.values()),
        what="both brokers see brokers 1 and 2",
        timeout=SETTLE_S,
    )
    create(brokers[1], TOPIC, 2)
    wait_until(
        lambda: sorted(partition_state(chroot).isr) == [1, 2],
        what="ISR [1, 2]",
        timeout=SETTLE_S,
        retry_on=ZNODE_MISSING,  # the partition state is not written yet
    )
    leader = partition_state(chroot).leader
    follower = 3 - leader
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    assert produce_acked(bootstrap, 5, b"both-") == [0, 1, 2, 3, 4]

    brokers[follower].kill()
    wait_until(
        lambda: list(partition_state(chroot).isr) == [leader],
        what=f"ISR shrunk to the leader {leader}",
        timeout=SETTLE_S,
    )
    assert produce_acked(brokers[leader].bootstrap, 5, b"leader-only-") == [5, 6, 7, 8, 9]
    brokers[leader].kill()
    survivor = brokers[follower]
    survivor.restart()

    # Clean election only: the out-of-sync survivor must not lead.
    wait_until(
        lambda: sorted(metadata_of(survivor).brokers) == [follower],
        what=f"the survivor registered alone as broker {follower}",
        timeout=SETTLE_S,
    )
    controller_caught_up(chroot, survivor, "barrier")
    state = partition_state(chroot)
    assert state.leader in (-1, leader) and list(state.isr) == [leader]
    info = metadata_of(survivor).topic(TOPIC).partitions[0]
    assert info.leader == -1 and info.error == ErrorCode.leader_not_available
    refused = produce(survivor.port, TP, make_batch(1), acks=1, timeout_s=5)
    assert refused.error_code == ErrorCode.not_leader_or_follower
    # KIP-392: a v11+ consumer may read a replica that is not the leader, but never past its high
    # watermark, so nothing beyond what both replicas held (offsets 0-4) is shown.
    stale = consume(survivor.port, TP)
    assert stale.error in (ErrorCode.none, ErrorCode.not_leader_or_follower)
    assert stale.high_watermark <= 5

    # The operator accepts the loss: the out-of-sync replica is elected with ISR = [it].
    set_unclean(survivor.bootstrap, True)
    wait_until(
        lambda: partition_state(chroot).leader == follower,
        what=f"the out-of-sync replica {follower} elected",
        timeout=SETTLE_S,
    )
    assert list(partition_state(chroot).isr) == [follower]
    wait_until(
        lambda: metadata_of(survivor).topic(TOPIC).partitions[0].leader == follower,
        what=f"the survivor's metadata names {follower} the leader",
        timeout=SETTLE_S,
        retry_on=TOPIC_SETTLING,  # LEADER_NOT_AVAILABLE until it learns of the election
    )
    assert produce_acked(survivor.bootstrap, 1, b"after-") == [5]  # the log end is the survivor's
    fetched = consume(survivor.port, TP)
    assert fetched.error == ErrorCode.none and fetched.high_watermark == 6

    # The old leader comes back as a follower, drops offsets 5-9 of epoch 1 and converges.
    brokers[leader].restart()
    wait_until(
        lambda: sorted(partition_state(chroot).isr) == [1, 2],
        what="the old leader back in the ISR",
        timeout=SETTLE_S,
    )
    wait_until(
        lambda: replica_batches(brokers[1], TOPIC, 0) == replica_batches(brokers[2], TOPIC, 0),
        what="identical batches on both replicas",
        timeout=SETTLE_S,
        retry_on=(CorruptRecordError,),  # a batch being appended is read half-written
    )
    assert [offset for offset, _, _ in replica_batches(brokers[leader], TOPIC, 0)][-1] == 5
