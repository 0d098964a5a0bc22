"""New partitions' states against a real ZooKeeper: their parent znodes made in the same fenced
multi (one round trip per chunk), falling back to making them one by one when one exists
already, and a new topic's states read back with one children call."""

from __future__ import annotations

import uuid

import pytest

from brokers.common.clock import ManualClock
from brokers.controller import zk_paths
from brokers.controller.context import ControllerContext
from brokers.controller.controller_store import ControllerStore
from brokers.controller.election import ControllerElection
from brokers.controller.errors import ZNodeExistsError
from brokers.controller.state import LeaderAndIsr, ReplicaAssignment, TopicPartition
from brokers.controller.zk_client import ZkClient
from tests.integration.controller.test_zookeeper_controller import run, started

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]
CLOCK = ManualClock()
ASSIGNMENT = {p: ReplicaAssignment((1,)) for p in range(4)}


async def _topic(zk: ZkClient, topic: str) -> None:
    assignment = zk_paths.TopicAssignment(uuid.uuid4(), ASSIGNMENT)
    await zk.create(zk_paths.topic_path(topic), zk_paths.encode_topic(assignment))


def test_new_states_with_their_parents_in_chunks_and_read_back(chroot: str) -> None:
    async def scenario() -> None:
        zk = await started(chroot)
        try:
            election = ControllerElection(zk, 1, CLOCK)
            assert await election.elect()
            for topic in ("plain", "half-made", "dir-made"):
                await _topic(zk, topic)
            # Left by an earlier attempt: a topic's `partitions` znode, one partition's znode.
            await zk.create(f"{zk_paths.topic_path('half-made')}/partitions")
            await zk.create(f"{zk_paths.topic_path('dir-made')}/partitions/2")
            context = ControllerContext(1, 0)
            fresh = ControllerStore(zk)
            assert await fresh.load_topic(context, "plain") == [
                TopicPartition("plain", p) for p in range(4)
            ]
            changes = {
                TopicPartition(t, p): LeaderAndIsr(1, 0, (1,), 1)
                for t in ("plain", "half-made", "dir-made")
                for p in range(4)
            }
            store = ControllerStore(zk, max_ops_per_multi=3)  # chunks across topics
            written = await store.write_states(election.fence(), context, changes)
            assert written == {tp: LeaderAndIsr(1, 0, (1,), 1, zk_version=0) for tp in changes}
            for tp in changes:
                node = await zk.get(zk_paths.partition_state_path(tp))
                assert zk_paths.decode_partition_state(node.data, node.version) == written[tp]
            # A second controller reads them back: nothing missing.
            again = ControllerContext(1, 0)
            for topic in ("plain", "half-made", "dir-made"):
                assert await ControllerStore(zk).load_topic(again, topic) == []
            assert again.leadership == written
            # A partition added later to a topic whose states the context holds.
            await zk.create(f"{zk_paths.topic_path('plain')}/partitions/4")
            added = {TopicPartition("plain", 4): LeaderAndIsr(1, 0, (1,), 1)}
            context.apply(written)
            assert await store.write_states(election.fence(), context, added) == {
                TopicPartition("plain", 4): LeaderAndIsr(1, 0, (1,), 1, zk_version=0)
            }
        finally:
            await zk.close()

    run(scenario())


def test_a_parent_assumed_but_missing_is_made(chroot: str) -> None:
    async def scenario() -> None:
        zk = await started(chroot)
        try:
            election = ControllerElection(zk, 1, CLOCK)
            assert await election.elect()
            await _topic(zk, "moved-on")
            context = ControllerContext(1, 0)
            # The context holds a state whose znodes are gone: `partitions` is not re-created.
            context.leadership[TopicPartition("moved-on", 0)] = LeaderAndIsr(1, 0, (1,), 1, 0)
            tp = TopicPartition("moved-on", 1)
            changes = {tp: LeaderAndIsr(1, 0, (1,), 1)}
            written = await ControllerStore(zk).write_states(election.fence(), context, changes)
            assert written == {tp: LeaderAndIsr(1, 0, (1,), 1, zk_version=0)}
            assert await zk.exists(zk_paths.partition_state_path(tp))
        finally:
            await zk.close()

    run(scenario())


def test_a_state_that_exists_is_still_refused(chroot: str) -> None:
    async def scenario() -> None:
        zk = await started(chroot)
        try:
            election = ControllerElection(zk, 1, CLOCK)
            assert await election.elect()
            tp = TopicPartition("taken", 0)
            path = zk_paths.partition_state_path(tp)
            await zk.create(path, zk_paths.encode_partition_state(LeaderAndIsr(1, 0, (1,), 1)))
            context = ControllerContext(1, 0)
            changes = {tp: LeaderAndIsr(1, 0, (1,), 1)}
            with pytest.raises(ZNodeExistsError):
                await ControllerStore(zk).write_states(election.fence(), context, changes)
        finally:
            await zk.close()

    run(scenario())
