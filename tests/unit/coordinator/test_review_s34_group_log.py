"""Review of session 34's group-log batching (brokers/coordinator/group_log.py, ccfd592): the
coordinator's cache agrees with `__consumer_offsets` when one loop turn appends an OffsetDelete's
tombstone and a commit of the same partition, in either order.

Both batches go to the log in call order, so the log, and any coordinator that loads it, holds
the later one. The cache must say the same, so callers resume in append order (ccfd592's
`_Run.settle` resolved the futures last-first: the later caller updated the cache first and the
earlier one then overwrote it; fixed in 10950e5). The coordinator harness's
in-memory offsets topic (as tests/unit/coordinator/test_commit_batching.py), one partition.
"""

from __future__ import annotations

import asyncio

import pytest

from brokers.coordinator.group_coordinator import GroupCoordinator
from brokers.coordinator.offset_store import CommitRequest, OffsetCommit
from tests.unit.coordinator.harness import MemoryOffsetsTopic, config, driver

pytestmark = pytest.mark.unit


def _commit(offset: int) -> CommitRequest:
    return CommitRequest("g", "", None, -1, [OffsetCommit("t", 0, offset)])


@pytest.mark.parametrize("delete_first", [True, False], ids=["delete-commit", "commit-delete"])
def test_a_commit_and_a_delete_in_one_turn_leave_the_cache_as_the_log(delete_first: bool) -> None:
    async def scenario() -> tuple[int | None, int | None]:
        topic = MemoryOffsetsTopic(partitions=1)
        d = await driver(topic)
        [(_c, error)] = await d.coordinator.commit_offsets(_commit(5))  # an Empty group
        assert error is None
        delete = d.coordinator.delete_offsets("g", [("t", [0])])
        commit = d.coordinator.commit_offsets(_commit(7))
        if delete_first:
            deleted, committed = await asyncio.gather(delete, commit)
        else:
            committed, deleted = await asyncio.gather(commit, delete)
        assert deleted[0] is None and [e for _t, _p, e in deleted[1]] == [None]
        assert [e for _c, e in committed] == [None]
        _, [cached] = d.coordinator.fetch_offsets("g", [("t", [0])])
        reloaded = GroupCoordinator(config(), topic, d.clock)
        await reloaded.load_partitions([0])
        _, [logged] = reloaded.fetch_offsets("g", [("t", [0])])
        return (
            None if cached.value is None else cached.value.offset,
            None if logged.value is None else logged.value.offset,
        )

    cached, logged = asyncio.run(scenario())
    assert logged == (7 if delete_first else None)  # the log's last record for the partition
    assert cached == logged
