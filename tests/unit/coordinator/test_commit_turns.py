"""Many OffsetCommits in one loop turn (`GroupLog`'s flush callback), over a real standalone broker's
`__consumer_offsets` and over the in-memory topic with replication held.

With the broker's topic, the leader is its whole ISR, so the flush appends and settles the turn's
commits at once, in the callback; with replication held (the harness's `gate`) they wait for the
ISR in a task. Either way: one log append for the turn, every commit in the log in call order
(none lost), callers resumed in call order (so the cache ends as the log does: the s34 review's
point), and the cache, the log and a coordinator reloading it agree on each group's last offset.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path

import pytest

from brokers.app.standalone import build_standalone
from brokers.common.clock import ManualClock
from brokers.common.config import BrokerConfig
from brokers.coordinator.group_coordinator import GroupCoordinator
from brokers.coordinator.group_records import decode_key, decode_offset_commit_value
from brokers.coordinator.offset_store import CommitRequest, OffsetCommit
from brokers.records.builder import read_batch
from tests.unit.coordinator.harness import MemoryOffsetsTopic, config, driver, settle

pytestmark = pytest.mark.unit
GROUPS = 4
COMMITS = 40  # ten per group, interleaved, all of partition t-0


def _commit(i: int) -> CommitRequest:
    return CommitRequest(f"g{i % GROUPS}", "", None, -1, [OffsetCommit("t", 0, 1000 + i)])


async def _one_turn(coordinator: GroupCoordinator) -> list[int]:
    """COMMITS commits started together (one turn); the order in which their callers resumed."""
    resumed: list[int] = []

    async def commit(i: int) -> None:
        [(_c, error)] = await coordinator.commit_offsets(_commit(i))
        assert error is None
        resumed.append(i)

    # a lost commit would never resume its caller: fail after a deadline instead of hanging
    await asyncio.wait_for(asyncio.gather(*(commit(i) for i in range(COMMITS))), timeout=10)
    return resumed


def _logged(batches: list[bytes]) -> list[tuple[str, int]]:
    """(group, offset) of every offset commit record, in log order."""
    found = []
    for batch in batches:
        for record in read_batch(batch)[1]:
            key = decode_key(record.key or b"")
            if record.value is not None and key is not None and hasattr(key, "topic"):
                found.append((key.group, decode_offset_commit_value(record.value).offset))
    return found


def _expected_log() -> list[tuple[str, int]]:
    return [(f"g{i % GROUPS}", 1000 + i) for i in range(COMMITS)]


def _last_offsets(coordinator: GroupCoordinator) -> list[int | None]:
    found = []
    for g in range(GROUPS):
        error, [fetched] = coordinator.fetch_offsets(f"g{g}", [("t", [0])])
        assert error is None
        found.append(None if fetched.value is None else fetched.value.offset)
    return found


LAST = [1000 + COMMITS - GROUPS + g for g in range(GROUPS)]


def test_a_turn_of_commits_on_the_brokers_topic_is_one_append_in_call_order(
    tmp_path: Path,
) -> None:
    async def scenario() -> None:
        properties = {"offsets.topic.num.partitions": "1"}
        clock = ManualClock(time_ms=1_700_000_000_000)
        config_ = BrokerConfig(data_dir=tmp_path / "data", port=0, properties=properties)
        broker = build_standalone(config_, clock=clock)
        broker.log_manager.startup()
        broker.replicas.startup()
        broker.topics.load()
        try:
            broker.topics.create_topic("t", 1, 1, {})
            broker.groups.start()
            await broker.groups.loaded()
            coordinator = broker.groups.coordinator
            group_log = coordinator.log
            before = group_log.log_appends
            resumed = await _one_turn(coordinator)
            assert resumed == list(range(COMMITS))  # callers resumed in call order
            assert group_log.log_appends == before + 1  # the turn's forty batches, one append
            topic = broker.groups.topic
            assert _logged(list(topic.read_batches(0, 0))) == _expected_log()
            assert _last_offsets(coordinator) == LAST
            reloaded = GroupCoordinator(coordinator.config, topic, clock)
            await reloaded.load_partitions([0])
            assert _last_offsets(reloaded) == LAST
            await broker.groups.stop()
        finally:
            broker.log_manager.shutdown()

    asyncio.run(scenario())


def test_a_turn_of_commits_waiting_for_replication_resumes_in_call_order() -> None:
    async def scenario() -> None:
        topic = MemoryOffsetsTopic(partitions=1)
        d = await driver(topic)
        topic.gate = asyncio.Event()  # appended at once, committed when the gate opens
        turn: Awaitable[list[int]] = asyncio.ensure_future(_one_turn(d.coordinator))
        await settle()  # the turn's commits queue and its flush runs; the gate holds them
        assert _last_offsets(d.coordinator) == [None] * GROUPS  # cached only once committed
        topic.gate.set()
        assert await turn == list(range(COMMITS))
        assert topic.append_calls == 1
        assert _logged(topic.logs[0]) == _expected_log()
        assert _last_offsets(d.coordinator) == LAST
        reloaded = GroupCoordinator(config(), topic, d.clock)
        await reloaded.load_partitions([0])
        assert _last_offsets(reloaded) == LAST

    asyncio.run(scenario())
