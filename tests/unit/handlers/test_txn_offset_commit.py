"""TxnOffsetCommit (key 28, v0–4) over a real standalone broker (no listener): per-partition
errors, the producer-epoch fence of the real `__consumer_offsets` log, and OffsetFetch's
require_stable (v7 per partition, v8+ per group) answering UNSTABLE_OFFSET_COMMIT until the
transaction's marker completes it."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from brokers.coordinator.offsets_topic import OFFSETS_TOPIC
from brokers.records.batch import iter_headers
from brokers.wire.errors import ErrorCode
from tests.unit.coordinator.test_handlers import Api, api
from tests.unit.handlers.admin_harness import entity

pytestmark = pytest.mark.unit
TXN_COMMIT, FETCH = 28, 9
PID = 7001
# These commits belong to no transaction coordinator's transaction (their markers are written by
# hand), so the broker must not verify them (`tests/integration/transactions` covers that).
UNVERIFIED = {"transaction.partition.verification.enable": "false"}


def _topic(version: int, name: str, *offsets: tuple[int, int], metadata: str = "md") -> Any:
    partitions = tuple(
        entity(
            TXN_COMMIT,
            version,
            "TxnOffsetCommitRequestPartition",
            partition_index=p,
            committed_offset=o,
            committed_leader_epoch=4,
            committed_metadata=metadata,
        )
        for p, o in offsets
    )
    return entity(
        TXN_COMMIT, version, "TxnOffsetCommitRequestTopic", name=name, partitions=partitions
    )


async def txn_commit(
    a: Api, version: int, *topics: Any, group: str = "s", epoch: int = 0, **fields: Any
) -> dict[tuple[str, int], ErrorCode]:
    response = await a.call(
        TXN_COMMIT, version, "TxnOffsetCommitRequest", transactional_id="tx", group_id=group,
        producer_id=PID, producer_epoch=epoch, topics=topics, **fields,
    )  # fmt: skip
    return {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


async def fetch(a: Api, version: int, group: str = "s", *, stable: bool = True) -> list[Any]:
    """(partition, offset, error) of t-0 and t-1."""
    if version >= 8:
        wanted = entity(
            FETCH, version, "OffsetFetchRequestTopics", name="t", partition_indexes=(0, 1)
        )
        request_group = entity(
            FETCH, version, "OffsetFetchRequestGroup", group_id=group, topics=(wanted,)
        )
        response = await a.call(
            FETCH, version, "OffsetFetchRequest", groups=(request_group,), require_stable=stable
        )
        [answer] = response.groups
        assert answer.error_code == ErrorCode.none
    else:
        wanted = entity(
            FETCH, version, "OffsetFetchRequestTopic", name="t", partition_indexes=(0, 1)
        )
        answer = await a.call(
            FETCH, version, "OffsetFetchRequest", group_id=group, topics=(wanted,),
            require_stable=stable,
        )  # fmt: skip
    return [
        (p.partition_index, p.committed_offset, p.error_code)
        for t in answer.topics
        for p in t.partitions
    ]


def complete(a: Api, group: str, commit: bool) -> None:
    coordinator = a.broker.groups.coordinator
    coordinator.complete_transaction(coordinator.partition_for(group), PID, commit)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_commit_per_partition_errors_then_marker(tmp_path: Path, version: int) -> None:
    async def scenario() -> None:
        async with api(tmp_path, UNVERIFIED) as a:
            codes = await txn_commit(
                a, version, _topic(version, "t", (0, 10), (1, 11), (9, 1)),
                _topic(version, "nope", (0, 1)),
            )  # fmt: skip
            assert codes == {
                ("t", 0): ErrorCode.none,
                ("t", 1): ErrorCode.none,
                ("t", 9): ErrorCode.unknown_topic_or_partition,
                ("nope", 0): ErrorCode.unknown_topic_or_partition,
            }
            unstable = ErrorCode.unstable_offset_commit
            assert await fetch(a, 7) == [(0, -1, unstable), (1, -1, unstable)]
            assert await fetch(a, 8) == [(0, -1, unstable), (1, -1, unstable)]
            assert await fetch(a, 6, stable=False) == [(0, -1, 0), (1, -1, 0)]
            complete(a, "s", commit=True)
            assert await fetch(a, 8) == [(0, 10, 0), (1, 11, 0)]
            epochs = await a.call(
                FETCH, 7, "OffsetFetchRequest", group_id="s", topics=None, require_stable=True
            )
            leader_epochs = {p.committed_leader_epoch for p in epochs.topics[0].partitions}
            assert leader_epochs == ({4} if version >= 2 else {-1})

    asyncio.run(scenario())


def test_the_log_fences_an_older_producer_epoch(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with api(tmp_path, UNVERIFIED) as a:
            first = await txn_commit(a, 3, _topic(3, "t", (0, 1)), epoch=5)
            again = await txn_commit(
                a, 3, _topic(3, "t", (0, 2)), epoch=5
            )  # no sequence: not a duplicate
            assert set(first.values()) == set(again.values()) == {ErrorCode.none}
            fenced = await txn_commit(a, 3, _topic(3, "t", (0, 3), (1, 3)), epoch=4)
            assert set(fenced.values()) == {ErrorCode.invalid_producer_epoch}
            complete(a, "s", commit=True)
            assert await fetch(a, 7) == [(0, 2, 0), (1, -1, 0)]
            # what was written: transactional batches of the producer, without sequence
            coordinator = a.broker.groups.coordinator
            replica = a.broker.replicas.get(OFFSETS_TOPIC, coordinator.partition_for("s"))
            data = replica.log.read(0, 1 << 20).region
            assert data is not None
            headers = [h for _, h in iter_headers(data.read())]
            assert [(h.producer_id, h.producer_epoch, h.base_sequence) for h in headers] == [
                (PID, 5, -1),
                (PID, 5, -1),
            ]
            assert all(h.is_transactional and not h.is_control for h in headers)

    asyncio.run(scenario())


def test_group_level_errors_go_to_every_partition(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with api(tmp_path, UNVERIFIED) as a:
            topic = _topic(3, "t", (0, 1), (1, 1))
            unknown = await txn_commit(a, 3, topic, group="nobody", member_id="m", generation_id=3)
            assert set(unknown.values()) == {ErrorCode.illegal_generation}
            empty = await txn_commit(a, 3, topic, group="")
            assert set(empty.values()) == {ErrorCode.invalid_group_id}
            big = await txn_commit(a, 3, _topic(3, "t", (0, 1), metadata="x" * 5000))
            assert big == {("t", 0): ErrorCode.offset_metadata_too_large}

    asyncio.run(scenario())


def test_abort_leaves_the_committed_offset(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with api(tmp_path, UNVERIFIED) as a:
            await txn_commit(a, 4, _topic(4, "t", (0, 10)))
            complete(a, "s", commit=True)
            await txn_commit(a, 4, _topic(4, "t", (0, 20)))
            all_stable = await a.call(
                FETCH, 7, "OffsetFetchRequest", group_id="s", topics=None, require_stable=True
            )
            [partition] = all_stable.topics[0].partitions
            assert (partition.committed_offset, partition.error_code) == (
                -1,
                ErrorCode.unstable_offset_commit,
            )
            complete(a, "s", commit=False)
            assert await fetch(a, 7) == [(0, 10, 0), (1, -1, 0)]

    asyncio.run(scenario())
