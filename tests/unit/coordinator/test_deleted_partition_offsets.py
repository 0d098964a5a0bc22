"""A deleted partition's offsets leave every group (Kafka's onPartitionsDeleted), committed and
pending transactional ones, with tombstones: a tenant creating and deleting topics all day no
longer leaves each group's offsets of every deleted partition in the coordinator's memory and
log for `offsets.retention.minutes` (7 days), and a topic created again under the same name
starts without the old offsets. Real standalone broker (no listener), its handlers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.coordinator.group_records import OffsetAndMetadata
from brokers.coordinator.offsets import GroupOffsets
from tests.unit.coordinator.test_handlers import COMMIT, FETCH, Api, _commit_topic, api, ms
from tests.unit.handlers.admin_harness import entity

pytestmark = pytest.mark.unit


async def commit(a: Api, group: str, topic: str, partition: int, offset: int) -> None:
    answer = await a.call(
        COMMIT, 9, "OffsetCommitRequest", group_id=group, generation_id_or_member_epoch=-1,
        member_id="", group_instance_id=None, retention_time=ms(-1),
        topics=(_commit_topic(9, topic, partition, offset),),
    )  # fmt: skip
    assert [p.error_code for t in answer.topics for p in t.partitions] == [0]


async def fetched(a: Api, group: str, topic: str, partitions: tuple[int, ...]) -> list[int]:
    wanted = entity(FETCH, 7, "OffsetFetchRequestTopic", name=topic, partition_indexes=partitions)
    answer = await a.call(
        FETCH, 7, "OffsetFetchRequest", group_id=group, topics=(wanted,), require_stable=True
    )
    assert all(p.error_code == 0 for p in answer.topics[0].partitions)
    return [p.committed_offset for p in answer.topics[0].partitions]


async def settled(a: Api) -> None:
    """The coordinator's removal runs as a task: wait for the ones begun."""
    await asyncio.gather(*a.broker.groups.coordinator._forgetting)


def test_a_deleted_topics_offsets_leave_every_group(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with api(tmp_path) as a:
            a.broker.topics.create_topic("u", 1, 1, {})
            await commit(a, "s", "t", 0, 10)
            await commit(a, "s", "t", 1, 11)
            await commit(a, "s", "u", 0, 12)
            await commit(a, "other", "t", 1, 13)
            coordinator = a.broker.groups.coordinator
            pending = {("t", 0): OffsetAndMetadata(20, -1, "", -1)}
            written = await coordinator.txn_offset_commit("tx", "s", 77, 0, "", -1, None, pending)
            assert written == {("t", 0): None}

            a.broker.topics.delete_topic("t")
            await settled(a)
            assert await fetched(a, "s", "t", (0, 1)) == [-1, -1]  # pending one gone too
            assert await fetched(a, "other", "t", (1,)) == [-1]
            assert await fetched(a, "s", "u", (0,)) == [12], "other topics keep theirs"

            a.broker.topics.create_topic("t", 2, 1, {})
            assert await fetched(a, "s", "t", (0, 1)) == [-1, -1]
            coordinator.complete_transaction(coordinator.partition_for("s"), 77, commit=True)
            assert await fetched(a, "s", "t", (0,)) == [-1], "a late marker revives nothing"

    asyncio.run(scenario())


def test_the_tombstones_outlive_a_reload(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with api(tmp_path) as a:
            await commit(a, "s", "t", 0, 10)
            a.broker.topics.delete_topic("t")
            await settled(a)
        async with api(tmp_path) as again:  # the same data dir, `t` created anew: from the log
            assert await fetched(again, "s", "t", (0,)) == [-1]

    asyncio.run(scenario())


_TPS = [(t, p) for t in ("a", "b", "c") for p in range(3)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from(_TPS), st.integers(0, 5)), max_size=40))
def test_a_group_knows_which_topics_it_holds_after_any_commits_and_tombstones(
    writes: list[tuple[bool, tuple[str, int], int]],
) -> None:
    """At each deletion every broker asks every group it coordinates whether it holds offsets of
    the deleted topics: a look-up per topic (`GroupOffsets.holds_topic`), kept right by every
    commit (older records ignored) and tombstone."""
    offsets = GroupOffsets()
    model: dict[tuple[str, int], int] = {}
    for put, tp, record in writes:
        if put:
            if offsets.put(tp, OffsetAndMetadata(record, -1, "", 0), record):
                model[tp] = record
        else:
            offsets.remove(tp)
            model.pop(tp, None)
    assert offsets.topics() == {t for t, _ in model}
    for topic in ("a", "b", "c"):
        assert offsets.holds_topic(topic) == any(t == topic for t, _ in model)
