"""TxnMarkerChannel over real brokers: two in-process brokers each leading one replicated
partition (LeaderAndIsr by hand, as in test_cluster_replication). The channel on broker 1 writes
its own partition's marker locally and sends WriteTxnMarkers to broker 2; each answer comes once
the follower holds the marker (acks=all), so both partitions' last stable offsets pass it. It
retries while broker 2 does not know its partition yet, and while broker 2 is down, reconnecting
to the address the metadata names once it is back."""

from __future__ import annotations

import asyncio
import functools
import uuid
from pathlib import Path

import pytest

from brokers.client import TopicPartition
from brokers.common.clock import SYSTEM_CLOCK
from brokers.records.builder import build_batch
from brokers.replication.metadata_cache import (
    BrokerEndpoint,
    MetadataCache,
    PartitionMetadata,
    TopicMetadata,
)
from brokers.replication.partition import Partition
from brokers.replication.replica_manager import PartitionStateUpdate
from brokers.replication.txn_markers import (
    CHANNEL_CLIENT_CONFIG,
    MarkerErrors,
    MarkerRequest,
    RemoteBrokers,
    TxnMarkerChannel,
    write_markers_locally,
)
from brokers.wire.errors import ErrorCode
from tests.integration.replication.cluster_helpers import Node, node, produce
from tests.polling import wait_until

pytestmark = pytest.mark.integration
ONE, TWO = 1, 2
LEFT, RIGHT, LATE = "left", "right", "late"  # led by 1, by 2, by 2 once it is told
TOPIC_IDS = {name: uuid.uuid4() for name in (LEFT, RIGHT, LATE)}
LEADERS = {LEFT: ONE, RIGHT: TWO, LATE: TWO}
OK = ErrorCode.none
# the transactions are written by hand (no coordinator knows them): the leaders do not verify
UNVERIFIED = {"transaction.partition.verification.enable": "false"}


def update(topic: str, epoch: int, replicas: list[int]) -> PartitionStateUpdate:
    leader = LEADERS[topic]
    return PartitionStateUpdate(
        topic, 0, TOPIC_IDS[topic], leader, epoch, replicas, replicas, 0, {}
    )  # fmt: skip


def apply(nodes: list[Node], state: PartitionStateUpdate, epoch: int = 1) -> None:
    leaders = {n.broker.config.node_id: ("127.0.0.1", n.port) for n in nodes}
    for n in nodes:
        replicas = n.broker.replicas
        results = n.call(functools.partial(replicas.apply_leader_and_isr, epoch, [state], leaders))
        assert results == {(state.topic, 0): None}


def describe(cache: MetadataCache, nodes: list[Node], topics: list[str]) -> None:
    """What the controller's UpdateMetadata would tell the channel's broker."""
    for n in nodes:
        point(cache, n)
    for name in topics:
        add_topic(cache, name)


def point(cache: MetadataCache, n: Node) -> None:
    node_id = n.broker.config.node_id
    cache.brokers[node_id] = BrokerEndpoint(node_id, "127.0.0.1", n.port)


def add_topic(cache: MetadataCache, name: str) -> None:
    leader = LEADERS[name]
    partition = PartitionMetadata(0, leader, 1, [leader], [leader])
    cache.topics[name] = TopicMetadata(name, TOPIC_IDS[name], {0: partition})


def txn(producer_id: int) -> bytes:
    return build_batch(
        [(None, b"t")], producer_id=producer_id, producer_epoch=0, base_sequence=0,
        is_transactional=True,
    )  # fmt: skip


class Recorded:
    """The channel's remote path (RemoteBrokers) with each outcome kept for the test to see."""

    def __init__(self, cache: MetadataCache) -> None:
        self.brokers = RemoteBrokers(cache, CHANNEL_CLIENT_CONFIG)
        self.outcomes: list[MarkerErrors | Exception] = []

    async def write(self, broker_id: int, marker: MarkerRequest) -> MarkerErrors:
        try:
            answers = await self.brokers.write(broker_id, marker)
        except Exception as exc:
            self.outcomes.append(exc)
            raise
        self.outcomes.append(answers)
        return answers


def end_state(n: Node, topic: str) -> tuple[int, int]:
    def read() -> tuple[int, int]:
        p: Partition = n.broker.replicas.get(topic, 0)
        return p.log.log_end_offset, (p.last_stable_offset if p.is_leader else -1)

    return n.call(read)


def test_markers_reach_local_and_remote_leaders_with_retries(tmp_path: Path) -> None:
    with node(tmp_path, ONE, properties=UNVERIFIED) as one:
        cache = MetadataCache("c", ONE)
        remote = Recorded(cache)
        local = functools.partial(
            write_markers_locally, one.broker.replicas, one.broker.purgatory,
            on_offsets_marker=lambda *_: None, timeout_s=30, clock=SYSTEM_CLOCK,
        )  # fmt: skip
        channel = one.call(
            lambda: TxnMarkerChannel(
                cache, node_id=ONE, local=local, clock=SYSTEM_CLOCK, remote=remote.write
            )
        )
        try:
            with node(tmp_path, TWO, properties=UNVERIFIED) as two:
                commit_on_both_leaders(one, two, cache, channel)
                retried_until_the_leader_knows(one, two, cache, channel, remote)
            retried_until_the_leader_is_back(tmp_path, one, cache, channel, remote)
        finally:
            one.run(channel.close())
            one.run(remote.brokers.close())


def commit_on_both_leaders(
    one: Node, two: Node, cache: MetadataCache, channel: TxnMarkerChannel
) -> None:
    apply([one, two], update(LEFT, 1, [ONE, TWO]))
    apply([one, two], update(RIGHT, 1, [TWO, ONE]))
    for n, topic in ((one, LEFT), (two, RIGHT)):
        answer = produce(
            n.port, TopicPartition(topic, 0), txn(5), acks=-1, timeout_s=20, transactional_id="tx"
        )
        assert answer.error_code == OK
    assert end_state(one, LEFT) == (1, 0) and end_state(two, RIGHT) == (1, 0)
    one.call(lambda: describe(cache, [one, two], [LEFT, RIGHT]))

    commit = MarkerRequest(5, 0, True, 0, ((LEFT, 0), (RIGHT, 0)))
    assert one.run(channel.send(commit)) == {(LEFT, 0): OK, (RIGHT, 0): OK}
    # acks=all: each follower already holds the marker, so the LSOs passed it.
    assert end_state(one, LEFT) == (2, 2) and end_state(two, LEFT)[0] == 2
    assert end_state(two, RIGHT) == (2, 2) and end_state(one, RIGHT)[0] == 2


def retried_until_the_leader_knows(
    one: Node, two: Node, cache: MetadataCache, channel: TxnMarkerChannel, remote: Recorded
) -> None:
    """Broker 2 is named leader of LATE before it hears of it: retried until it does."""
    one.call(lambda: add_topic(cache, LATE))
    late = asyncio.run_coroutine_threadsafe(
        channel.send(MarkerRequest(6, 0, False, 0, ((LATE, 0),))), one.loop
    )
    refused = {(LATE, 0): ErrorCode.unknown_topic_or_partition}
    wait_until(lambda: refused in remote.outcomes, what="broker 2 refusing a partition it lacks")
    apply([two], update(LATE, 1, [TWO]))
    assert late.result(30) == {(LATE, 0): OK}
    assert end_state(two, LATE) == (1, 1)


def retried_until_the_leader_is_back(
    root: Path, one: Node, cache: MetadataCache, channel: TxnMarkerChannel, remote: Recorded
) -> None:
    """Broker 2 is down: connection failures are retried until it is back at a new address."""
    seen = len(remote.outcomes)
    down = asyncio.run_coroutine_threadsafe(
        channel.send(MarkerRequest(7, 0, True, 0, ((RIGHT, 0),))), one.loop
    )
    wait_until(
        lambda: any(isinstance(o, Exception) for o in remote.outcomes[seen:]),
        what="a failed connection to the stopped broker 2",
    )
    with node(root, TWO, properties=UNVERIFIED) as back:
        apply([one, back], update(RIGHT, 2, [TWO, ONE]), epoch=2)
        one.call(lambda: point(cache, back))
        assert down.result(30) == {(RIGHT, 0): OK}
        assert end_state(back, RIGHT) == (3, 3) and end_state(one, RIGHT)[0] == 3
