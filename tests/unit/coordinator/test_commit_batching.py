"""The commits of one loop turn reach `__consumer_offsets` in one append (`GroupLog`).

Consumers that commit after every batch they read (OMB's) send many OffsetCommits a turn, all into
their group's partition; `GroupLog` queues each batch and appends a turn's batches together, in
call order. Each commit still gets its own offsets (the cache and a reload agree with the log),
a later commit of the same partition still wins, and a failed append fails every commit in it
without caching any. An in-memory offsets topic with one partition, so every group shares it.
"""

from __future__ import annotations

import asyncio

import pytest

from brokers.coordinator import errors
from brokers.coordinator.group_coordinator import GroupCoordinator
from brokers.coordinator.group_records import encode_offset_commit_key
from brokers.coordinator.offset_store import CommitRequest, OffsetCommit
from brokers.records.builder import read_batch
from tests.unit.coordinator.harness import MemoryOffsetsTopic, config, driver

pytestmark = pytest.mark.unit

GROUPS = 16


def _commit(group: str, offset: int) -> CommitRequest:
    return CommitRequest(group, "", None, -1, [OffsetCommit("t", 0, offset)])


def test_the_commits_of_one_turn_are_one_append_each_with_its_own_offsets() -> None:
    async def scenario() -> None:
        topic = MemoryOffsetsTopic(partitions=1)
        d = await driver(topic)
        results = await asyncio.gather(
            *(d.coordinator.commit_offsets(_commit(f"g{i}", 100 + i)) for i in range(GROUPS))
        )
        assert [error for [(_c, error)] in results] == [None] * GROUPS
        assert topic.append_calls == 1  # sixteen commits, one append
        assert len(topic.logs[0]) == GROUPS  # each still its own batch, in call order
        keys = [r.key for b in topic.logs[0] for r in read_batch(b)[1]]
        assert keys == [encode_offset_commit_key(f"g{i}", "t", 0) for i in range(GROUPS)]
        for i in range(GROUPS):
            _, [fetched] = d.coordinator.fetch_offsets(f"g{i}", [("t", [0])])
            assert fetched.value is not None and fetched.value.offset == 100 + i
        # a coordinator loading the partition finds the same offsets
        reloaded = GroupCoordinator(config(), topic, d.clock)
        await reloaded.load_partitions([0])
        for i in range(GROUPS):
            _, [fetched] = reloaded.fetch_offsets(f"g{i}", [("t", [0])])
            assert fetched.value is not None and fetched.value.offset == 100 + i

    asyncio.run(scenario())


def test_a_later_commit_of_the_same_partition_in_the_turn_wins() -> None:
    async def scenario() -> int:
        topic = MemoryOffsetsTopic(partitions=1)
        d = await driver(topic)
        await asyncio.gather(*(d.coordinator.commit_offsets(_commit("g", o)) for o in (5, 6, 7)))
        assert topic.append_calls == 1
        _, [fetched] = d.coordinator.fetch_offsets("g", [("t", [0])])
        assert fetched.value is not None
        return fetched.value.offset

    assert asyncio.run(scenario()) == 7


def test_a_failed_append_fails_every_commit_of_its_turn() -> None:
    async def scenario() -> None:
        topic = MemoryOffsetsTopic(partitions=1)
        d = await driver(topic)
        topic.fail_with = errors.NotCoordinatorError("moved")
        results = await asyncio.gather(
            *(d.coordinator.commit_offsets(_commit(f"g{i}", i)) for i in range(3))
        )
        assert [type(error) for [(_c, error)] in results] == [errors.NotCoordinatorError] * 3
        for i in range(3):
            _, fetched = d.coordinator.fetch_offsets(f"g{i}", [("t", [0])])
            assert [f.value for f in fetched] == [None]  # nothing cached

    asyncio.run(scenario())
