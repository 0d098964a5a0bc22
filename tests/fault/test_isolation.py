"""A leader isolated from its followers but not from ZooKeeper (issue 4 acceptance).

Three brokers, each behind its own inter-broker proxy; an RF 3 topic with min.insync.replicas=2.
Cutting one leader's proxy stops its followers' fetches (and the controller's requests to it) while
its ZooKeeper session and client endpoint stay up. Kafka's behaviour, mirrored: the leader drops
the lagging followers from the ISR after replica.lag.time.max.ms (written to ZooKeeper), then
refuses acks=all with NOT_ENOUGH_REPLICAS without appending, still takes acks=1, and no broker
outside the ISR is made leader — the leader is alive in ZooKeeper, so the controller has no reason
to move it, and the followers are out of the ISR, so they could not be chosen anyway (clean
election). After healing, the followers catch up, the ISR grows back, acks=all works again, and
every replica holds identical batches.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from brokers.controller.state import LeaderAndIsr
from brokers.wire.errors import ErrorCode
from tests.cluster_probes import SETTLE_S, ZNODE_MISSING
from tests.fault.harness import FaultCluster
from tests.fault.replicas import assert_replicas_identical
from tests.polling import wait_until

pytestmark = [pytest.mark.fault, pytest.mark.timeout(240)]
TOPIC = "isolated"
PARTITIONS = 3
TOPIC_CONFIG = {"min.insync.replicas": "2"}


class StateWatch:
    """Polls one partition's state znode on a thread, keeping every distinct state seen."""

    def __init__(self, cluster: FaultCluster, partition: int) -> None:
        self._cluster, self._partition = cluster, partition
        self.seen: list[LeaderAndIsr] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            state = self._cluster.state(TOPIC, self._partition)
            if not self.seen or state != self.seen[-1]:
                self.seen.append(state)
            self._stop.wait(0.05)

    def __enter__(self) -> StateWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop.set()
        self._thread.join(5)


@pytest.fixture
def cluster(fault_cluster: FaultCluster) -> Iterator[FaultCluster]:
    for node_id in (1, 2, 3):
        fault_cluster.start(node_id)
    wait_until(
        lambda: all(sorted(fault_cluster.metadata(n).brokers) == [1, 2, 3] for n in (1, 2, 3)),
        what="every broker sees brokers 1, 2 and 3",
        timeout=SETTLE_S,
    )
    fault_cluster.create_topic(TOPIC, PARTITIONS, TOPIC_CONFIG)
    wait_until(
        lambda: fault_cluster.fully_replicated(TOPIC, PARTITIONS),
        what=f"{TOPIC} led with every broker in every ISR",
        timeout=SETTLE_S,
        retry_on=ZNODE_MISSING,  # partition states not written yet
    )
    yield fault_cluster


def test_isolated_leader_shrinks_isr_to_itself_and_refuses_acks_all(
    cluster: FaultCluster,
) -> None:
    controller = cluster.controller()
    # A partition led by a broker that is not the controller: the controller keeps its view.
    partition = next(p for p in range(PARTITIONS) if cluster.state(TOPIC, p).leader != controller)
    before = cluster.state(TOPIC, partition)
    leader = before.leader
    for p in range(PARTITIONS):
        cluster.produce_eventually(TOPIC, p, b"a")
    last_committed = cluster.produce(leader, TOPIC, partition, b"committed", acks=-1)

    with StateWatch(cluster, partition) as watch:
        cluster.brokers[leader].link.cut()
        # Kafka keeps a silent follower that is at the leader's end in the ISR; the first write
        # it does not fetch makes it lag, and replica.lag.time.max.ms later it is out.
        uncommitted = cluster.produce(leader, TOPIC, partition, b"lagging", acks=1)
        assert uncommitted == last_committed + 1
        shrunk = wait_until(
            lambda: (s := cluster.state(TOPIC, partition)).isr == (leader,) and s,
            what=f"the ISR of {TOPIC}-{partition} shrunk to its leader {leader}",
            timeout=SETTLE_S,
        )
        assert shrunk and (shrunk.leader, shrunk.leader_epoch) == (leader, before.leader_epoch)
        code = wait_until(
            lambda: cluster.produce_error(leader, TOPIC, partition, acks=-1),
            what="acks=all refused by the isolated leader",
            timeout=SETTLE_S,
        )
        assert code == ErrorCode.not_enough_replicas
        # Refused before the append (Kafka checks min.insync.replicas first): the next acks=1
        # record takes the offset right after the last one written.
        assert cluster.produce(leader, TOPIC, partition, b"acks1", acks=1) == uncommitted + 1
        wait_until(lambda: len(watch.seen) >= 2, what="the watch saw the shrunk state")
        isolated_view = cluster.metadata(leader).topic(TOPIC).partitions[partition]
        assert isolated_view.leader == leader

        cluster.brokers[leader].link.heal()
        healed = wait_until(
            lambda: sorted((s := cluster.state(TOPIC, partition)).isr) == [1, 2, 3] and s,
            what=f"the ISR of {TOPIC}-{partition} grown back to [1, 2, 3]",
            timeout=SETTLE_S,
        )
        assert healed and healed.leader == leader
        cluster.produce_eventually(TOPIC, partition, b"after", via=leader)

    for state in watch.seen:  # never a leader outside the ISR, never a new leader
        assert state.leader == leader and leader in state.isr, watch.seen
    assert any(s.isr == (leader,) for s in watch.seen)
    expect = [(TOPIC, p) for p in range(PARTITIONS)]
    assert_replicas_identical(cluster.data_dirs, expect=expect)  # every topic, internal too


def assert_isolated(cluster: FaultCluster, leader: int, partition: int) -> None:
    """The ISR in ZooKeeper shrinks to the leader alone, which then refuses acks=all."""
    wait_until(
        lambda: cluster.state(TOPIC, partition).isr == (leader,),
        what=f"the ISR of {TOPIC}-{partition} shrunk to its leader {leader}",
        timeout=SETTLE_S,
    )
    code = wait_until(
        lambda: cluster.produce_error(leader, TOPIC, partition, acks=-1),
        what=f"acks=all refused by the isolated leader {leader}",
        timeout=SETTLE_S,
    )
    assert code == ErrorCode.not_enough_replicas


@pytest.mark.slow
def test_isolating_each_broker_in_turn_loses_no_acknowledged_record(cluster: FaultCluster) -> None:
    """The heavier variant: every broker (the controller too) is isolated once; acks=all writes
    to the partitions it does not lead keep succeeding, its own partitions shrink to it alone and
    refuse acks=all; after each heal every acknowledged record is at its offset, once."""
    acknowledged: dict[tuple[int, int], bytes] = {}  # (partition, offset) -> value

    def write_all(tag: str, skip_leader: int | None = None) -> None:
        for p in range(PARTITIONS):
            if cluster.state(TOPIC, p).leader != skip_leader:
                value = f"{tag}-{p}".encode()
                acknowledged[(p, cluster.produce_eventually(TOPIC, p, value))] = value

    write_all("start")
    for victim in (1, 2, 3):
        led = [p for p in range(PARTITIONS) if cluster.state(TOPIC, p).leader == victim]
        cluster.brokers[victim].link.cut()
        for p in led:
            cluster.produce(victim, TOPIC, p, b"unacknowledged", acks=1)
        for p in led:
            assert_isolated(cluster, victim, p)
        write_all(f"isolated-{victim}", skip_leader=victim)
        cluster.brokers[victim].link.heal()
        wait_until(
            lambda: cluster.fully_replicated(TOPIC, PARTITIONS),
            what=f"every broker back in every ISR after healing broker {victim}",
            timeout=SETTLE_S,
        )
        write_all(f"healed-{victim}")
        assert all(cluster.state(TOPIC, p).leader == victim for p in led)

    for p in range(PARTITIONS):
        leader = cluster.state(TOPIC, p).leader
        values = cluster.consume(leader, TOPIC, p, 0)
        for (partition, offset), value in acknowledged.items():
            if partition == p:
                assert values[offset] == value
    assert_replicas_identical(cluster.data_dirs, expect=[(TOPIC, p) for p in range(PARTITIONS)])
