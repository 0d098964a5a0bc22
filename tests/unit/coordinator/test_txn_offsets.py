"""Transactional offset commits (KIP-98, KIP-447) in the group coordinator: TxnOffsetCommit's
checks, the one transactional batch it writes, offsets pending per producer until the marker
(`complete_transaction`), the log order between plain and transactional commits (Kafka's
replayEndTransactionMarker), require_stable, retention, deletion and reading it all back."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from brokers.coordinator import errors
from brokers.coordinator.group_admin import delete_groups
from brokers.coordinator.group_coordinator import GroupCoordinator
from brokers.coordinator.group_records import OffsetAndMetadata
from brokers.coordinator.offset_store import CommitRequest, OffsetCommit
from brokers.records.batch import set_base_offset
from brokers.records.builder import read_batch
from brokers.records.control import EndTxnMarker, build_marker_batch
from tests.unit.coordinator.harness import (
    Driver,
    MemoryOffsetsTopic,
    config,
    driver,
    join_request,
    settle,
)

pytestmark = pytest.mark.unit
PID, EPOCH = 4000, 3
DAY_MS = 24 * 60 * 60 * 1000
Offsets = Mapping[tuple[str, int], OffsetAndMetadata]


def offsets(
    *items: tuple[str, int, int], metadata: str = ""
) -> dict[tuple[str, int], OffsetAndMetadata]:
    return {(t, p): OffsetAndMetadata(o, -1, metadata, -1) for t, p, o in items}


async def txn_commit(
    d: Driver,
    group: str,
    values: Offsets,
    *,
    producer_id: int = PID,
    epoch: int = EPOCH,
    member: str = "",
    generation: int = -1,
    instance: str | None = None,
) -> dict[tuple[str, int], errors.GroupError | None]:
    return await d.coordinator.txn_offset_commit(
        "txn", group, producer_id, epoch, member, generation, instance, values
    )


def committed(d: Driver, group: str, topic: str = "t", partition: int = 0) -> int | None:
    error, [fetched] = d.coordinator.fetch_offsets(group, [(topic, [partition])])
    assert error is None and fetched.error is None
    return None if fetched.value is None else fetched.value.offset


def stable(d: Driver, group: str, topic: str = "t", partition: int = 0) -> object:
    """require_stable: the offset, or the error class's name."""
    _, [fetched] = d.coordinator.fetch_offsets(group, [(topic, [partition])], require_stable=True)
    if fetched.error is not None:
        return type(fetched.error).__name__
    return None if fetched.value is None else fetched.value.offset


async def plain_commit(d: Driver, group: str, offset: int, partition: int = 0) -> None:
    request = CommitRequest(group, "", None, -1, [OffsetCommit("t", partition, offset)])
    [(_, error)] = await d.coordinator.commit_offsets(request)
    assert error is None


def marker(d: Driver, group: str, commit: bool, producer_id: int = PID) -> None:
    """Write the transaction's marker into the group's partition and tell the coordinator, as
    the marker writer does once the marker is committed."""
    partition = d.coordinator.partition_for(group)
    d.topic.logs[partition].append(_marker_batch(d.topic, partition, commit, producer_id))
    d.coordinator.complete_transaction(partition, producer_id, commit)


def _marker_batch(
    topic: MemoryOffsetsTopic, partition: int, commit: bool, producer_id: int = PID
) -> bytes:
    """A marker batch at the partition's log end."""
    batch = build_marker_batch(producer_id, EPOCH, EndTxnMarker(commit, 0), timestamp_ms=1)
    stored = bytearray(batch)
    set_base_offset(stored, 0, topic.high_watermark(partition))
    return bytes(stored)


# ---- TxnOffsetCommit --------------------------------------------------------------------------
def test_offsets_stay_pending_until_the_commit_marker() -> None:
    async def scenario() -> None:
        d = await driver()
        result = await txn_commit(d, "s", offsets(("t", 0, 10), ("t", 1, 20)))
        assert result == {("t", 0): None, ("t", 1): None}
        assert committed(d, "s") is None and committed(d, "s", partition=1) is None
        assert stable(d, "s") == "UnstableOffsetCommitError"
        assert stable(d, "s", partition=2) is None  # not in the transaction
        marker(d, "s", commit=True)
        assert (committed(d, "s"), committed(d, "s", partition=1)) == (10, 20)
        assert stable(d, "s") == 10

    asyncio.run(scenario())


def test_abort_drops_the_offsets_and_keeps_the_committed_one() -> None:
    async def scenario() -> None:
        d = await driver()
        await plain_commit(d, "s", 5)
        await txn_commit(d, "s", offsets(("t", 0, 10)))
        assert committed(d, "s") == 5 and stable(d, "s") == "UnstableOffsetCommitError"
        marker(d, "s", commit=False)
        assert committed(d, "s") == 5 and stable(d, "s") == 5
        marker(d, "s", commit=True)  # a later marker with nothing pending changes nothing
        assert committed(d, "s") == 5

    asyncio.run(scenario())


def test_one_transactional_batch_in_the_groups_partition() -> None:
    async def scenario() -> None:
        d = await driver()
        await txn_commit(d, "s", offsets(("t", 0, 10), ("u", 3, 7), metadata="m"))
        partition = d.coordinator.partition_for("s")
        [batch] = d.topic.logs[partition]
        header, records = read_batch(batch)
        assert header.is_transactional and not header.is_control
        assert (header.producer_id, header.producer_epoch) == (PID, EPOCH)
        assert header.base_sequence == -1  # no sequence: the log checks only the epoch
        assert len(records) == 2
        marker(d, "s", commit=True)
        _, [fetched] = d.coordinator.fetch_offsets("s", [("u", [3])])
        assert fetched.value == OffsetAndMetadata(7, -1, "m", d.clock.time_ms())

    asyncio.run(scenario())


def test_a_plain_commit_after_the_transactions_batch_wins() -> None:
    """Log order decides (Kafka compares the records' offsets): the transaction's offset beats
    the plain commit before its batch, not the one appended after it."""

    async def scenario() -> None:
        d = await driver()
        await plain_commit(d, "s", 1, partition=0)
        await plain_commit(d, "s", 1, partition=1)
        await txn_commit(d, "s", offsets(("t", 0, 50), ("t", 1, 50)))
        await plain_commit(d, "s", 9, partition=1)  # after the transaction's batch
        marker(d, "s", commit=True)
        assert committed(d, "s", partition=0) == 50
        assert committed(d, "s", partition=1) == 9

    asyncio.run(scenario())


def test_a_marker_completes_only_its_producer_in_its_partition() -> None:
    async def scenario() -> None:
        d = await driver()
        other = next(
            g
            for g in ("a", "b", "c", "d", "e", "f")
            if d.coordinator.partition_for(g) != d.coordinator.partition_for("s")
        )
        await txn_commit(d, "s", offsets(("t", 0, 10)))
        await txn_commit(d, "s", offsets(("t", 1, 11)), producer_id=PID + 1)
        await txn_commit(d, other, offsets(("t", 0, 12)))
        marker(d, "s", commit=True)
        assert committed(d, "s") == 10
        assert stable(d, "s", partition=1) == "UnstableOffsetCommitError"
        assert stable(d, other) == "UnstableOffsetCommitError"
        marker(d, other, commit=True)
        marker(d, "s", commit=True, producer_id=PID + 1)
        assert (committed(d, other), committed(d, "s", partition=1)) == (12, 11)

    asyncio.run(scenario())


def test_unknown_groups_simple_commits_and_generations() -> None:
    async def scenario() -> None:
        d = await driver()
        result = await txn_commit(d, "lost", offsets(("t", 0, 1)), member="m", generation=2)
        assert isinstance(result[("t", 0)], errors.IllegalGenerationError)
        assert "lost" not in d.coordinator.groups
        assert await txn_commit(d, "simple", offsets(("t", 0, 1))) == {("t", 0): None}
        assert "simple" in d.coordinator.groups

    asyncio.run(scenario())


def test_member_checks_of_a_group_managed_commit() -> None:
    async def scenario() -> None:
        d = await driver()
        join = await d.start_join(join_request(instance="i-1"))
        d.advance(0)
        d.advance(0)
        await settle()
        await d.sync_all([join.result()])
        mid = join.result().member_id

        async def outcome(**kwargs: object) -> object:
            [(_, error)] = (await txn_commit(d, "g", offsets(("t", 0, 1)), **kwargs)).items()  # type: ignore[arg-type]
            return None if error is None else type(error).__name__

        assert await outcome(member=mid, generation=1, instance="i-1") is None
        assert await outcome(member=mid, generation=2, instance="i-1") == "IllegalGenerationError"
        assert await outcome(member="ghost", generation=1) == "UnknownMemberIdError"
        assert (
            await outcome(member="other", generation=1, instance="i-1") == "FencedInstanceIdError"
        )
        assert await outcome(member=mid, generation=1, instance="i-2") == "UnknownMemberIdError"
        # No member at all (TxnOffsetCommit v0–2): accepted even though the group is Stable,
        # unlike a plain commit.
        assert await outcome() is None

    asyncio.run(scenario())


def test_a_rebalance_does_not_refuse_a_transactional_commit() -> None:
    async def scenario() -> None:
        d = await driver()
        member = await d.new_member()
        join = await d.start_join(join_request(member))
        d.advance(0)
        await settle()
        assert d.group.state.value == "CompletingRebalance"
        result = await txn_commit(d, "g", offsets(("t", 0, 1)), member=member, generation=1)
        assert result == {("t", 0): None}
        join.cancel()

    asyncio.run(scenario())


def test_metadata_too_large_fails_only_that_partition() -> None:
    async def scenario() -> None:
        d = await driver(offset_metadata_max_bytes=4)
        values = {
            ("t", 0): OffsetAndMetadata(1, -1, "12345", -1),
            ("t", 1): OffsetAndMetadata(2, -1, "1234", -1),
        }
        result = await txn_commit(d, "s", values)
        assert isinstance(result[("t", 0)], errors.OffsetMetadataTooLargeError)
        assert result[("t", 1)] is None
        marker(d, "s", commit=True)
        assert (committed(d, "s"), committed(d, "s", partition=1)) == (None, 2)

    asyncio.run(scenario())


def test_ownership_errors_and_a_failed_write() -> None:
    async def scenario() -> None:
        d = await driver()
        [error] = (await txn_commit(d, "", offsets(("t", 0, 1)))).values()
        assert isinstance(error, errors.InvalidGroupIdError)
        [error] = (await txn_commit(d, "s", offsets(("t", 0, 1)), producer_id=-1)).values()
        assert isinstance(error, errors.InvalidProducerIdMappingError)
        d.coordinator.unload_partition(d.coordinator.partition_for("s"))
        [error] = (await txn_commit(d, "s", offsets(("t", 0, 1)))).values()
        assert isinstance(error, errors.NotCoordinatorError)

        d = await driver()
        d.topic.fail_with = errors.InvalidProducerEpochError("fenced")
        [error] = (await txn_commit(d, "s", offsets(("t", 0, 1)))).values()
        assert isinstance(error, errors.InvalidProducerEpochError)
        assert stable(d, "s") is None  # nothing left pending
        assert d.coordinator.groups["s"].offsets.open_transactions() == set()
        # A failed write does not undo what the transaction wrote before.
        d.topic.fail_with = None
        await txn_commit(d, "s", offsets(("t", 0, 5)))
        d.topic.fail_with = errors.InvalidProducerEpochError("fenced")
        failed = await txn_commit(d, "s", offsets(("t", 0, 6), ("t", 1, 6)))
        assert all(isinstance(e, errors.InvalidProducerEpochError) for e in failed.values())
        d.topic.fail_with = None
        marker(d, "s", commit=True)
        assert (committed(d, "s"), committed(d, "s", partition=1)) == (5, None)

    asyncio.run(scenario())


def test_loading_partition_answers_load_in_progress_and_defers_markers() -> None:
    async def scenario() -> None:
        d = await driver()
        await txn_commit(d, "s", offsets(("t", 0, 10)))
        for offset in range(100):  # long enough for the load to yield between batches
            await plain_commit(d, "s", offset, partition=1)
        partition = d.coordinator.partition_for("s")
        coordinator = GroupCoordinator(config(), d.topic, d.clock)
        load = coordinator.ownership.elect(partition)
        assert load is not None
        await asyncio.sleep(0)  # the load has read the log as it is now, and yielded
        assert partition in coordinator.ownership.loading
        again = offsets(("t", 0, 1))
        [error] = (
            await coordinator.txn_offset_commit("x", "s", PID, EPOCH, "", -1, None, again)
        ).values()
        assert isinstance(error, errors.CoordinatorLoadInProgressError)
        # The marker is committed while the partition loads, after the load read the log.
        d.topic.logs[partition].append(_marker_batch(d.topic, partition, True))
        coordinator.complete_transaction(partition, PID, True)
        await load
        assert partition in coordinator.ownership.owned
        _, [fetched] = coordinator.fetch_offsets("s", [("t", [0])], require_stable=True)
        assert fetched.error is None and fetched.value is not None and fetched.value.offset == 10
        # A partition this broker does not coordinate ignores markers.
        coordinator.complete_transaction(partition + 1, PID, True)

    asyncio.run(scenario())


# ---- reading back -------------------------------------------------------------------------------
def test_reload_commits_aborts_and_keeps_open_transactions_pending() -> None:
    async def scenario() -> None:
        d = await driver()
        await plain_commit(d, "s", 1, partition=0)
        await plain_commit(d, "s", 1, partition=1)
        await txn_commit(d, "s", offsets(("t", 0, 50), ("t", 1, 50)))
        await plain_commit(d, "s", 9, partition=1)
        marker(d, "s", commit=True)
        await txn_commit(d, "s", offsets(("t", 2, 70)))
        marker(d, "s", commit=False)
        await txn_commit(d, "s", offsets(("t", 3, 80)), producer_id=PID + 1)  # still open

        reloaded = await driver(topic=d.topic, clock=d.clock)
        assert committed(reloaded, "s", partition=0) == 50
        assert committed(reloaded, "s", partition=1) == 9  # later in the log than the txn batch
        assert committed(reloaded, "s", partition=2) is None  # aborted
        assert committed(reloaded, "s", partition=3) is None
        assert stable(reloaded, "s", partition=3) == "UnstableOffsetCommitError"
        marker(reloaded, "s", commit=True, producer_id=PID + 1)  # the coordinator's marker, later
        assert stable(reloaded, "s", partition=3) == 80

    asyncio.run(scenario())


def test_reload_of_a_group_with_only_pending_offsets() -> None:
    async def scenario() -> None:
        d = await driver()
        await txn_commit(d, "s", offsets(("t", 0, 10)))
        reloaded = await driver(topic=d.topic, clock=d.clock)
        assert "s" in reloaded.coordinator.groups
        assert stable(reloaded, "s") == "UnstableOffsetCommitError"
        marker(reloaded, "s", commit=False)
        assert stable(reloaded, "s") is None

    asyncio.run(scenario())


# ---- deletion and retention -----------------------------------------------------------------
def test_offset_delete_and_group_delete_drop_pending_offsets() -> None:
    async def scenario() -> None:
        d = await driver()
        await txn_commit(d, "s", offsets(("t", 0, 10)))
        error, results = await d.coordinator.delete_offsets("s", [("t", [0])])
        assert error is None and results == [("t", 0, None)]
        marker(d, "s", commit=True)
        assert committed(d, "s") is None

        await txn_commit(d, "s2", offsets(("t", 1, 10)))
        assert await delete_groups(d.coordinator, ["s2"]) == [("s2", None)]
        reloaded = await driver(topic=d.topic, clock=d.clock)
        marker(reloaded, "s2", commit=True)
        assert (
            "s2" not in reloaded.coordinator.groups
            or committed(reloaded, "s2", partition=1) is None
        )

    asyncio.run(scenario())


def test_open_transactions_keep_offsets_and_group_from_expiring() -> None:
    async def scenario() -> None:
        d = await driver()
        await plain_commit(d, "s", 1)
        await txn_commit(d, "s", offsets(("t", 0, 10)))
        await txn_commit(d, "p", offsets(("t", 0, 10)), producer_id=PID + 1)
        d.clock.advance(8 * DAY_MS)
        assert await d.coordinator.expire_offsets() == 0
        assert committed(d, "s") == 1 and "p" in d.coordinator.groups
        marker(d, "s", commit=False)
        marker(d, "p", commit=False, producer_id=PID + 1)
        assert await d.coordinator.expire_offsets() == 2
        assert "s" not in d.coordinator.groups and "p" not in d.coordinator.groups

    asyncio.run(scenario())
