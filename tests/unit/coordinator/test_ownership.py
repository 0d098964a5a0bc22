"""The group coordinator follows `__consumer_offsets` leadership (Kafka's onElection /
onResignation): leader epochs order the elections, a resignation unloads the partition's groups
and cancels its load, a stale load never installs; and, through a real ReplicaManager, a
LeaderAndIsr that makes this broker leader loads the partition, one that makes it a follower
unloads it and fails a commit still waiting for its ISR with NOT_COORDINATOR."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from brokers.app.runtime import Broker
from brokers.app.standalone import build_standalone
from brokers.common.clock import ManualClock
from brokers.common.config import BrokerConfig
from brokers.coordinator import errors
from brokers.coordinator.group_coordinator import GroupCoordinator
from brokers.coordinator.group_records import (
    OffsetAndMetadata,
    encode_offset_commit_key,
    encode_offset_commit_value,
)
from brokers.coordinator.offset_store import CommitRequest, OffsetCommit
from brokers.coordinator.offsets_topic import OFFSETS_TOPIC
from brokers.records.builder import build_batch
from brokers.replication.replica_manager import PartitionStateUpdate
from tests.unit.coordinator.harness import (
    MemoryOffsetsTopic,
    config,
    driver,
    join_request,
    settle,
)

pytestmark = pytest.mark.unit
NODE = 1
OTHER = 2


def committed_batch(group: str, offset: int) -> bytes:
    value = encode_offset_commit_value(OffsetAndMetadata(offset, -1, "", 0))
    return build_batch([(encode_offset_commit_key(group, "t", 0), value)])


def committed(coordinator: GroupCoordinator, group: str) -> int | None:
    error, fetched = coordinator.fetch_offsets(group, [("t", [0])])
    assert error is None
    return None if fetched[0].value is None else fetched[0].value.offset


async def loaded(coordinator: GroupCoordinator) -> None:
    await asyncio.wait_for(coordinator.ownership.wait_loaded(), 5)


def test_election_loads_and_resignation_unloads() -> None:
    async def scenario() -> None:
        topic = MemoryOffsetsTopic(partitions=2)
        coordinator = GroupCoordinator(config(), topic, ManualClock())
        partition = coordinator.partition_for("g")
        topic.logs[partition] = [committed_batch("g", 7)] * 200  # long enough to yield
        coordinator.on_election(partition, 3)
        assert isinstance(coordinator.check("g"), errors.CoordinatorLoadInProgressError)
        await loaded(coordinator)
        assert coordinator.check("g") is None and committed(coordinator, "g") == 7
        coordinator.on_resignation(partition, 3)
        assert isinstance(coordinator.check("g"), errors.NotCoordinatorError)
        assert "g" not in coordinator.groups

    asyncio.run(scenario())


def test_orders_older_than_the_last_epoch_are_ignored() -> None:
    async def scenario() -> None:
        topic = MemoryOffsetsTopic(partitions=1)
        coordinator = GroupCoordinator(config(), topic, ManualClock())
        coordinator.on_election(0, 5)
        await loaded(coordinator)
        coordinator.on_resignation(0, 4)  # a delayed order from an older term
        assert coordinator.check("g") is None
        coordinator.on_resignation(0, 6)
        coordinator.on_election(0, 5)  # stale: epoch 6 already resigned
        await loaded(coordinator)
        assert isinstance(coordinator.check("g"), errors.NotCoordinatorError)
        assert coordinator.ownership.epoch_of(0) == 6

    asyncio.run(scenario())


def test_resignation_mid_load_cancels_it_and_nothing_is_installed() -> None:
    async def scenario() -> None:
        topic = MemoryOffsetsTopic(partitions=1)
        topic.logs[0] = [committed_batch("g", 9)] * 500
        coordinator = GroupCoordinator(config(), topic, ManualClock())
        coordinator.on_election(0, 1)
        task = coordinator.ownership._loads[0]
        await asyncio.sleep(0)
        coordinator.on_resignation(0, 1)
        await asyncio.wait([task])
        assert task.cancelled()
        assert coordinator.groups == {} and not coordinator.loading
        assert isinstance(coordinator.check("g"), errors.NotCoordinatorError)

    asyncio.run(scenario())


def test_a_newer_epoch_while_serving_keeps_the_load_and_records_the_epoch() -> None:
    """Still serving means no resignation came in between: the same leader under a newer epoch
    (an ISR change). Kafka does not re-elect then; the running load is kept."""

    async def scenario() -> None:
        topic = MemoryOffsetsTopic(partitions=1)
        topic.logs[0] = [committed_batch("g", 1)] * 300
        coordinator = GroupCoordinator(config(), topic, ManualClock())
        coordinator.on_election(0, 1)
        first = coordinator.ownership._loads[0]
        await asyncio.sleep(0)
        coordinator.on_election(0, 2)
        await loaded(coordinator)
        assert not first.cancelled() and coordinator.ownership.epoch_of(0) == 2
        assert committed(coordinator, "g") == 1

    asyncio.run(scenario())


def test_after_a_resignation_a_newer_term_reads_the_log_again() -> None:
    async def scenario() -> None:
        topic = MemoryOffsetsTopic(partitions=1)
        topic.logs[0] = [committed_batch("g", 1)]
        coordinator = GroupCoordinator(config(), topic, ManualClock())
        coordinator.on_election(0, 1)
        await loaded(coordinator)
        coordinator.on_resignation(0, 2)
        topic.logs[0] = [*topic.logs[0], committed_batch("g", 2)]  # another leader wrote
        coordinator.on_election(0, 3)
        await loaded(coordinator)
        assert committed(coordinator, "g") == 2

    asyncio.run(scenario())


def test_parked_members_get_not_coordinator_on_resignation() -> None:
    async def scenario() -> None:
        d = await driver()
        partition = d.coordinator.partition_for("g")
        member = await d.new_member()
        join = await d.start_join(join_request(member))  # parked: the initial delay
        d.coordinator.on_resignation(partition)
        await settle()
        assert isinstance(join.result().error, errors.NotCoordinatorError)

    asyncio.run(scenario())


# ---- through the replica manager's leadership listener -------------------------------------
@asynccontextmanager
async def broker_of(tmp_path: Path) -> AsyncIterator[Broker]:
    properties = {"offsets.topic.num.partitions": "1", "group.initial.rebalance.delay.ms": "0"}
    config_ = BrokerConfig(data_dir=tmp_path / "data", port=0, node_id=NODE, properties=properties)
    broker = build_standalone(config_, clock=ManualClock(time_ms=1_700_000_000_000))
    broker.log_manager.startup()
    broker.replicas.startup()
    broker.topics.load()
    broker.groups.topic.ensure_created()  # standalone: created locally, nothing loaded yet
    try:
        yield broker
    finally:
        await broker.groups.stop()
        broker.log_manager.shutdown()


def lead(broker: Broker, leader: int, epoch: int, isr: list[int]) -> None:
    update = PartitionStateUpdate(
        OFFSETS_TOPIC, 0, uuid.uuid4(), leader, epoch, isr, [NODE, OTHER], epoch, {}
    )
    results = broker.replicas.apply_leader_and_isr(1, [update], {})
    assert results == {(OFFSETS_TOPIC, 0): None}


def commit(group: str, offset: int) -> CommitRequest:
    return CommitRequest(group, "", None, -1, [OffsetCommit("t", 0, offset)])


def test_leader_and_isr_drives_loading_and_unloading(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_of(tmp_path) as broker:
            coordinator = broker.groups.coordinator
            assert isinstance(coordinator.check("g"), errors.NotCoordinatorError)
            lead(broker, NODE, 1, [NODE])
            await broker.groups.loaded()
            [(_, error)] = await coordinator.commit_offsets(commit("g", 42))
            assert error is None and committed(coordinator, "g") == 42
            lead(broker, OTHER, 2, [OTHER, NODE])  # now a follower: unloaded at once
            assert isinstance(coordinator.check("g"), errors.NotCoordinatorError)
            assert "g" not in coordinator.groups
            lead(broker, NODE, 3, [NODE])  # leader again: the committed offset is read back
            assert isinstance(coordinator.check("g"), errors.CoordinatorLoadInProgressError)
            await broker.groups.loaded()
            assert committed(coordinator, "g") == 42

    asyncio.run(scenario())


def test_a_commit_waiting_for_the_isr_fails_when_leadership_moves(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_of(tmp_path) as broker:
            coordinator = broker.groups.coordinator
            lead(broker, NODE, 1, [NODE, OTHER])  # the follower never fetches: no HW advance
            await broker.groups.loaded()
            pending = asyncio.ensure_future(coordinator.commit_offsets(commit("g", 5)))
            await settle()
            assert not pending.done()
            lead(broker, OTHER, 2, [OTHER, NODE])
            [(_, error)] = await asyncio.wait_for(pending, 5)
            assert isinstance(error, errors.NotCoordinatorError)

    asyncio.run(scenario())


def test_an_isr_change_under_the_same_leader_keeps_groups_and_pending_commits(
    tmp_path: Path,
) -> None:
    """A follower leaving the ISR bumps the leader epoch with the same leader: groups stay loaded
    and a commit waiting for the ISR completes once the smaller ISR has it (Kafka's makeLeader
    returns false: no re-election)."""

    async def scenario() -> None:
        async with broker_of(tmp_path) as broker:
            coordinator = broker.groups.coordinator
            lead(broker, NODE, 1, [NODE, OTHER])  # the follower never fetches: no HW advance
            await broker.groups.loaded()
            pending = asyncio.ensure_future(coordinator.commit_offsets(commit("g", 5)))
            await settle()
            assert not pending.done()
            lead(broker, NODE, 2, [NODE])  # the follower left the ISR: same leader, epoch 2
            assert coordinator.check("g") is None  # no reload
            [(_, error)] = await asyncio.wait_for(pending, 5)
            assert error is None and committed(coordinator, "g") == 5

    asyncio.run(scenario())


def test_stopping_or_deleting_the_replica_unloads(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with broker_of(tmp_path) as broker:
            coordinator = broker.groups.coordinator
            lead(broker, NODE, 1, [NODE])
            await broker.groups.loaded()
            assert coordinator.check("g") is None
            broker.replicas.stop_replicas([(OFFSETS_TOPIC, 0)], delete=False)
            assert isinstance(coordinator.check("g"), errors.NotCoordinatorError)
            lead(broker, NODE, 2, [NODE])
            await broker.groups.loaded()
            assert coordinator.check("g") is None
            broker.replicas.stop_replicas([(OFFSETS_TOPIC, 0)], delete=True)
            assert isinstance(coordinator.check("g"), errors.NotCoordinatorError)

    asyncio.run(scenario())
