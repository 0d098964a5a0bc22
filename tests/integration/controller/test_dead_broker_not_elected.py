"""The controller never elects a broker that is gone but still registered (issue 13).

Three real broker processes on a real ZooKeeper with a long session timeout (30 s), so a broker
killed with -9 stays in `/brokers/ids` for the whole test, as it does for seconds in any cluster.
Then a controlled shutdown (SIGTERM) of another broker must move its leaderships to the one
broker that is really up, never to the dead one: its listener refuses the controller's
connections. Before the fix every such partition whose assignment listed the dead broker first
went to it and was offline until the session expired. Leaders are read from the partition state
znodes, which the controller writes before telling anyone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from brokers.client.admin import Admin
from brokers.client.topics import NewTopic
from brokers.controller import zk_paths
from brokers.controller.state import LeaderAndIsr, ReplicaAssignment, TopicPartition
from tests.cluster_probes import SETTLE_S, TOPIC_SETTLING, ZNODE_MISSING, metadata_of, zk_read
from tests.conftest import BrokerFactory
from tests.polling import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

TOPIC = "dead-not-elected"
PARTITIONS = 12
CONFIG = {
    "zookeeper.session.timeout.ms": "30000",  # the killed broker stays registered throughout
    "auto.leader.rebalance.enable": "false",
}


def states(chroot: str) -> dict[int, LeaderAndIsr]:
    found = {}
    for p in range(PARTITIONS):
        data, version = zk_read(chroot, zk_paths.partition_state_path(TopicPartition(TOPIC, p)))
        found[p] = zk_paths.decode_partition_state(data, version)
    return found


def test_controlled_shutdown_never_moves_leaders_to_a_killed_broker(
    chroot: str, broker_factory: BrokerFactory
) -> None:
    brokers = {n: broker_factory(node_id=n, zookeeper=chroot, config=CONFIG) for n in (1, 2, 3)}
    wait_until(
        lambda: sorted(metadata_of(brokers[1]).brokers) == [1, 2, 3],
        what="broker 1 sees brokers 1, 2 and 3",
        timeout=SETTLE_S,
    )

    async def create() -> Mapping[str, object]:
        async with Admin.for_bootstrap(brokers[1].bootstrap) as admin:
            return await admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, {})])

    assert asyncio.run(create()) == {TOPIC: None}
    wait_until(
        lambda: all(sorted(s.isr) == [1, 2, 3] for s in states(chroot).values()),
        what=f"every partition of {TOPIC} with all three replicas in sync",
        timeout=SETTLE_S,
        retry_on=ZNODE_MISSING + TOPIC_SETTLING,
    )
    controller = zk_paths.decode_controller(zk_read(chroot, zk_paths.CONTROLLER)[0]).broker_id
    assignment = zk_paths.decode_topic(zk_read(chroot, zk_paths.topic_path(TOPIC))[0]).partitions
    before = states(chroot)
    # The broker to stop and the one to kill, neither the controller, such that some partition
    # the first leads lists the dead one before the survivor: the controller of old chose it.
    a, b = sorted({1, 2, 3} - {controller})
    stopping, dead = max([(a, b), (b, a)], key=lambda pair: len(traps(assignment, before, *pair)))
    (survivor,) = {1, 2, 3} - {dead, stopping}
    trapped = traps(assignment, before, stopping, dead)
    assert trapped, f"no partition led by {stopping} lists {dead} before {survivor}: {assignment}"
    led_by_stopping = sorted(p for p, s in before.items() if s.leader == stopping)

    brokers[dead].kill()
    assert brokers[stopping].stop() == 0, "the SIGTERMed broker should exit cleanly"

    def moved_away() -> dict[int, LeaderAndIsr] | None:
        now = states(chroot)
        return now if all(now[p].leader not in (stopping, -1) for p in led_by_stopping) else None

    after = wait_until(
        moved_away, what=f"broker {stopping}'s partitions led by another broker", timeout=SETTLE_S
    )
    assert after is not None  # wait_until returns a truthy value
    moved = {p: after[p].leader for p in led_by_stopping}
    assert set(moved.values()) == {survivor}, (
        f"broker {stopping}'s partitions went to {moved} (broker {dead} was killed but is still"
        f" registered, only broker {survivor} is up; {len(trapped)} of them list {dead} first)"
    )


def traps(
    assignment: Mapping[int, ReplicaAssignment],
    states: Mapping[int, LeaderAndIsr],
    stopping: int,
    dead: int,
) -> list[int]:
    """Partitions led by `stopping` whose replica order puts `dead` right after it."""
    return [
        p
        for p, replicas in assignment.items()
        if states[p].leader == stopping and replicas.replicas[:2] == (stopping, dead)
    ]
