"""The transaction coordinator's operations against Kafka's behaviour: InitProducerId (new ids,
epoch bumps, fencing an open transaction, KIP-360, epoch exhaustion), AddPartitionsToTxn /
AddOffsetsToTxn, EndTxn with markers and completion, the timeout abort and the KAFKA-17754
hazard, ownership errors, and what is written to `__transaction_state` at each step."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from brokers.coordinator.transactions.errors import StateNotAvailableError
from brokers.coordinator.transactions.metadata import TxnState
from brokers.wire.errors import ErrorCode
from tests.unit.coordinator.transactions.harness import (
    FakeMarkers,
    MemoryStateTopic,
    Txn,
    build,
    running,
)

pytestmark = pytest.mark.unit
E = ErrorCode
TID = "tx"
T0, T1, U0 = ("t", 0), ("t", 1), ("u", 0)
TIMEOUT_MS = 60_000


def run(scenario: Callable[[Txn], Awaitable[None]], **kwargs: object) -> None:
    async def main() -> None:
        async with running(**kwargs) as txn:
            await scenario(txn)

    asyncio.run(main())


async def init(txn: Txn, tid: str = TID, **kwargs: int) -> tuple[ErrorCode, int, int]:
    return await txn.coordinator.init_producer_id(tid, TIMEOUT_MS, **kwargs)


def statuses(txn: Txn, tid: str = TID) -> list[str]:
    """The states written for `tid`, in log order."""
    partition = txn.coordinator.partition_for(tid)
    return [
        "tombstone" if value is None else TxnState(value.status).label
        for key, value in txn.topic.records(partition)
        if key == tid
    ]


def test_a_new_id_starts_empty_at_epoch_0_and_each_init_bumps_the_epoch() -> None:
    async def scenario(txn: Txn) -> None:
        assert await init(txn) == (E.none, 1000, 0)
        assert await init(txn) == (E.none, 1000, 1)
        assert statuses(txn) == ["Empty", "Empty"]
        described = txn.coordinator.describe(TID)
        assert (described.state, described.producer_id, described.producer_epoch) == (
            "Empty",
            1000,
            1,
        )
        assert described.start_ms == -1 and described.timeout_ms == TIMEOUT_MS

    run(scenario)


@pytest.mark.parametrize("commit", [True, False])
def test_a_transaction_commits_or_aborts_through_markers(commit: bool) -> None:
    async def scenario(txn: Txn) -> None:
        _, pid, epoch = await init(txn)
        added = await txn.coordinator.add_partitions(TID, pid, epoch, [T0, T1])
        assert added == {T0: E.none, T1: E.none}
        assert txn.state_of(TID) == "Ongoing"
        assert txn.coordinator.describe(TID).partitions == (T0, T1)
        assert txn.coordinator.describe(TID).start_ms == txn.clock.time_ms()
        assert await txn.coordinator.end_txn(TID, pid, epoch, commit) == E.none
        await txn.settle()
        [marker] = txn.markers.sent
        assert (marker.producer_id, marker.producer_epoch, marker.commit) == (pid, epoch, commit)
        assert marker.partitions == (T0, T1) and marker.coordinator_epoch == 0
        done = "CompleteCommit" if commit else "CompleteAbort"
        prepared = "PrepareCommit" if commit else "PrepareAbort"
        assert statuses(txn) == ["Empty", "Ongoing", prepared, done]
        assert txn.state_of(TID) == done
        assert txn.coordinator.describe(TID).partitions == ()
        stats = txn.coordinator.stats
        assert (stats.committed, stats.aborted) == ((1, 0) if commit else (0, 1))
        # The next transaction of the same producer starts from Complete*.
        assert await txn.coordinator.add_partitions(TID, pid, epoch, [U0]) == {U0: E.none}
        assert txn.state_of(TID) == "Ongoing"

    run(scenario)


def test_adding_partitions_already_in_the_transaction_writes_nothing() -> None:
    async def scenario(txn: Txn) -> None:
        _, pid, epoch = await init(txn)
        await txn.coordinator.add_partitions(TID, pid, epoch, [T0, T1])
        written = len(statuses(txn))
        assert await txn.coordinator.add_partitions(TID, pid, epoch, [T1]) == {T1: E.none}
        assert len(statuses(txn)) == written

    run(scenario)


def test_add_offsets_adds_the_groups_offsets_partition() -> None:
    async def scenario(txn: Txn) -> None:
        _, pid, epoch = await init(txn)
        assert await txn.coordinator.add_offsets(TID, pid, epoch, "group-a") == E.none
        assert txn.coordinator.describe(TID).partitions == (("__consumer_offsets", 1),)

    run(scenario)


def test_a_second_producer_fences_the_first_and_aborts_its_transaction() -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        _, pid, zombie = await init(txn)
        await c.add_partitions(TID, pid, zombie, [T0])
        # The new producer's first attempt aborts the open transaction under a bumped epoch.
        assert await init(txn) == (E.concurrent_transactions, -1, -1)
        await txn.settle()
        [marker] = txn.markers.sent
        assert (marker.commit, marker.producer_epoch, marker.partitions) == (False, 1, (T0,))
        assert txn.state_of(TID) == "CompleteAbort"
        # Its retry bumps again; the epoch handed out is 2, the fence's 1 never was.
        assert await init(txn) == (E.none, pid, 2)
        assert statuses(txn) == ["Empty", "Ongoing", "PrepareAbort", "CompleteAbort", "Empty"]
        # The zombie is fenced everywhere.
        assert await c.add_partitions(TID, pid, zombie, [T1]) == {T1: E.producer_fenced}
        assert await c.add_offsets(TID, pid, zombie, "g") == E.producer_fenced
        assert await c.end_txn(TID, pid, zombie, True) == E.producer_fenced

    run(scenario)


def test_init_while_markers_are_written_is_concurrent_transactions() -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        txn.markers.gate = asyncio.Event()
        _, pid, epoch = await init(txn)
        await c.add_partitions(TID, pid, epoch, [T0])
        assert await c.end_txn(TID, pid, epoch, True) == E.none
        await asyncio.sleep(0)
        assert txn.state_of(TID) == "PrepareCommit"
        assert await init(txn) == (E.concurrent_transactions, -1, -1)
        assert await c.add_partitions(TID, pid, epoch, [T1]) == {T1: E.concurrent_transactions}
        assert await c.end_txn(TID, pid, epoch, True) == E.concurrent_transactions
        txn.markers.gate.set()
        await txn.settle()
        assert txn.state_of(TID) == "CompleteCommit"
        assert await init(txn) == (E.none, pid, epoch + 1)

    run(scenario)


def test_end_txn_answers_by_state() -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        _, pid, epoch = await init(txn)
        assert await c.end_txn(TID, pid, epoch, True) == E.invalid_txn_state  # Empty
        await c.add_partitions(TID, pid, epoch, [T0])
        assert await c.end_txn(TID, pid, epoch, True) == E.none
        await txn.settle()
        assert await c.end_txn(TID, pid, epoch, True) == E.none  # a retry
        assert await c.end_txn(TID, pid, epoch, False) == E.invalid_txn_state
        assert await c.end_txn(TID, pid + 1, epoch, True) == E.invalid_producer_id_mapping
        assert await c.end_txn("unknown", pid, epoch, True) == E.invalid_producer_id_mapping
        assert await c.end_txn("", pid, epoch, True) == E.invalid_request
        assert await c.end_txn(TID, pid, epoch + 1, True) == E.producer_fenced

    run(scenario)


def test_add_partitions_errors() -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        _, pid, epoch = await init(txn)
        assert await c.add_partitions("nobody", pid, epoch, [T0]) == {
            T0: E.invalid_producer_id_mapping
        }
        assert await c.add_partitions(TID, pid + 7, epoch, [T0]) == {
            T0: E.invalid_producer_id_mapping
        }
        assert await c.add_partitions(TID, pid, epoch, [T0, ("gone", 3)]) == {
            T0: E.operation_not_attempted,
            ("gone", 3): E.unknown_topic_or_partition,
        }
        assert await c.add_partitions("", pid, epoch, [T0]) == {T0: E.invalid_request}
        assert statuses(txn) == ["Empty"]  # nothing was added

    run(scenario)


def test_transaction_timeouts_are_validated() -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        assert await c.init_producer_id(TID, 900_001) == (E.invalid_transaction_timeout, -1, -1)
        assert await c.init_producer_id(TID, 0) == (E.invalid_transaction_timeout, -1, -1)
        assert await c.init_producer_id(TID, 900_000) == (E.none, 1000, 0)
        assert await c.init_producer_id("", 1000) == (E.invalid_request, -1, -1)

    run(scenario)


def test_kip_360_epoch_bumps_with_the_callers_producer_id_and_epoch() -> None:
    async def scenario(txn: Txn) -> None:
        _, pid, epoch = await init(txn)
        assert await init(txn, producer_id=pid, producer_epoch=epoch) == (E.none, pid, 1)
        # A retry of that bump (its answer was lost) gets the same epoch again.
        assert await init(txn, producer_id=pid, producer_epoch=epoch) == (E.none, pid, 1)
        assert await init(txn, producer_id=pid, producer_epoch=5) == (E.producer_fenced, -1, -1)
        assert await init(txn, producer_id=pid + 1, producer_epoch=1) == (
            E.producer_fenced,
            -1,
            -1,
        )
        assert await init(txn, producer_id=-1, producer_epoch=1) == (E.invalid_request, -1, -1)
        # A new producer (no id given) resets the last epoch: the old retry is fenced now.
        assert await init(txn) == (E.none, pid, 2)
        assert await init(txn, producer_id=pid, producer_epoch=epoch) == (
            E.producer_fenced,
            -1,
            -1,
        )

    run(scenario)


def test_exhausted_epochs_rotate_the_producer_id() -> None:
    async def scenario(txn: Txn) -> None:
        _, pid, _ = await init(txn)
        entry = txn.coordinator.state.partitions[txn.coordinator.partition_for(TID)]
        entry.transactions[TID].producer_epoch = 32_766  # Short.MaxValue - 1
        error, new_pid, epoch = await init(txn)
        assert error == E.none and new_pid != pid and epoch == 0
        assert txn.coordinator.describe(TID).producer_id == new_pid

    run(scenario)


def test_timed_out_transactions_are_aborted_and_their_producer_fenced() -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        _, pid, epoch = await init(txn)
        await c.add_partitions(TID, pid, epoch, [T0])
        txn.clock.advance(TIMEOUT_MS)
        assert await c.abort_timed_out() == 0  # not past the timeout yet
        txn.clock.advance(1)
        assert await c.abort_timed_out() == 1
        await txn.settle()
        [marker] = txn.markers.sent
        assert (marker.commit, marker.producer_epoch) == (False, epoch + 1)
        assert txn.state_of(TID) == "CompleteAbort"
        assert c.stats.timed_out == 1
        # KAFKA-17754: the stale producer's delayed commit must not end anything.
        assert await c.end_txn(TID, pid, epoch, True) == E.producer_fenced
        assert await c.add_partitions(TID, pid, epoch, [T0]) == {T0: E.producer_fenced}

    run(scenario)


def test_a_delayed_end_txn_of_an_old_epoch_never_ends_a_newer_transaction() -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        _, pid, old = await init(txn)
        await c.add_partitions(TID, pid, old, [T0])
        assert (await init(txn))[0] == E.concurrent_transactions  # the old one is aborted
        await txn.settle()
        _, _, new = await init(txn)
        await c.add_partitions(TID, pid, new, [T1])
        assert await c.end_txn(TID, pid, old, True) == E.producer_fenced
        assert await c.end_txn(TID, pid, old, False) == E.producer_fenced
        assert txn.state_of(TID) == "Ongoing"
        assert c.describe(TID).partitions == (T1,)

    run(scenario)


def test_not_coordinator_and_load_in_progress() -> None:
    async def scenario() -> None:
        txn = build()
        partition = txn.coordinator.partition_for(TID)
        assert await init(txn) == (E.not_coordinator, -1, -1)
        txn.coordinator.on_election(partition, 3)
        assert await init(txn) == (E.coordinator_load_in_progress, -1, -1)
        assert txn.coordinator.describe(TID).error == E.coordinator_load_in_progress
        assert txn.coordinator.list_transactions().error == E.coordinator_load_in_progress
        await txn.coordinator.ownership.wait_loaded()
        assert await init(txn) == (E.none, 1000, 0)
        txn.coordinator.on_resignation(partition, 3)
        assert await txn.coordinator.end_txn(TID, 1000, 0, True) == E.not_coordinator
        await txn.coordinator.shutdown()

    asyncio.run(scenario())


def test_a_failed_write_is_answered_and_leaves_no_pending_state() -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        _, pid, epoch = await init(txn)
        txn.topic.fail_with = StateNotAvailableError("ISR too small")
        assert await c.add_partitions(TID, pid, epoch, [T0]) == {T0: E.coordinator_not_available}
        txn.topic.fail_with = None
        assert await c.add_partitions(TID, pid, epoch, [T0]) == {T0: E.none}

    run(scenario)


def test_leadership_lost_during_a_write_answers_not_coordinator() -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        _, pid, epoch = await init(txn)
        txn.topic.gate = asyncio.Event()
        adding = asyncio.ensure_future(c.add_partitions(TID, pid, epoch, [T0]))
        await asyncio.sleep(0)
        c.on_resignation(c.partition_for(TID))
        txn.topic.gate.set()
        assert await adding == {T0: E.not_coordinator}

    run(scenario)


def test_a_takeover_reads_the_state_back_and_finishes_prepared_transactions() -> None:
    async def scenario() -> None:
        topic = MemoryStateTopic()
        first = build(topic=topic, markers=FakeMarkers(gate=asyncio.Event()))
        partition = first.coordinator.partition_for(TID)
        await first.coordinator.load_partitions(range(topic.partitions))
        _, pid, epoch = await init(first)
        await first.coordinator.add_partitions(TID, pid, epoch, [T0, U0])
        assert await first.coordinator.end_txn(TID, pid, epoch, True) == E.none
        _, other_pid, _ = await init(first, "other")
        await first.coordinator.shutdown()  # died before the markers were written
        assert statuses(first)[-1] == "PrepareCommit"

        second = build(topic=topic)
        second.coordinator.on_election(partition, 7)
        second.coordinator.on_election(second.coordinator.partition_for("other"), 7)
        await second.coordinator.ownership.wait_loaded()
        await second.settle()
        [marker] = second.markers.sent
        assert (marker.commit, marker.coordinator_epoch, marker.partitions) == (True, 7, (T0, U0))
        assert second.state_of(TID) == "CompleteCommit"
        assert second.state_of("other") == "Empty"
        assert second.coordinator.describe("other").producer_id == other_pid
        # The producer carries on with the new coordinator: its epoch is known.
        assert await second.coordinator.add_partitions(TID, pid, epoch, [T1]) == {T1: E.none}
        await second.coordinator.shutdown()

    asyncio.run(scenario())


def test_fenced_markers_leave_the_transaction_unfinished() -> None:
    async def scenario(txn: Txn) -> None:
        txn.markers.answers[T0] = E.transaction_coordinator_fenced
        _, pid, epoch = await init(txn)
        await txn.coordinator.add_partitions(TID, pid, epoch, [T0])
        assert await txn.coordinator.end_txn(TID, pid, epoch, True) == E.none
        await txn.settle()
        assert txn.state_of(TID) == "PrepareCommit"
        assert statuses(txn)[-1] == "PrepareCommit"

    run(scenario)


def test_markers_to_deleted_topics_are_dropped_and_the_transaction_completes() -> None:
    async def scenario(txn: Txn) -> None:
        txn.markers.answers[U0] = E.unknown_topic_or_partition
        _, pid, epoch = await init(txn)
        await txn.coordinator.add_partitions(TID, pid, epoch, [T0, U0])
        assert await txn.coordinator.end_txn(TID, pid, epoch, False) == E.none
        await txn.settle()
        assert txn.state_of(TID) == "CompleteAbort"

    run(scenario)


def test_verify_only_says_which_partitions_are_in_the_transaction() -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        _, pid, epoch = await init(txn)
        await c.add_partitions(TID, pid, epoch, [T0])
        written = len(statuses(txn))
        verified = await c.add_partitions(TID, pid, epoch, [T0, T1], verify_only=True)
        assert verified == {T0: E.none, T1: E.transaction_abortable}
        assert len(statuses(txn)) == written
        fenced = await c.add_partitions(TID, pid, epoch - 1, [T0], verify_only=True)
        assert fenced == {T0: E.producer_fenced}

    run(scenario)


def test_idle_ids_expire_with_a_tombstone() -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        await init(txn, "idle")
        _, pid, epoch = await init(txn, "busy")
        await c.add_partitions("busy", pid, epoch, [T0])
        txn.clock.advance(c.config.id_expiration_ms - 1)
        assert await c.expire_ids() == 0
        txn.clock.advance(1)
        assert await c.expire_ids() == 1
        assert statuses(txn, "idle") == ["Empty", "tombstone"]
        assert c.describe("idle").error == E.transactional_id_not_found
        assert c.describe("busy").state == "Ongoing"  # an open transaction never expires
        # A new producer with the expired id starts afresh.
        assert (await init(txn, "idle"))[2] == 0

    run(scenario)


def test_list_transactions_filters() -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        _, a, _ = await init(txn, "a")
        _, b, epoch = await init(txn, "b")
        await c.add_partitions("b", b, epoch, [T0])
        txn.clock.advance(5_000)

        def listed(**kwargs: object) -> list[tuple[str, int, str]]:
            listing = c.list_transactions(**kwargs)  # type: ignore[arg-type]
            assert listing.error == E.none
            rows = listing.transactions
            return sorted((t.transactional_id, t.producer_id, t.state) for t in rows)

        assert listed() == [("a", a, "Empty"), ("b", b, "Ongoing")]
        assert listed(states=["Ongoing"]) == [("b", b, "Ongoing")]
        assert listed(producer_ids=[a]) == [("a", a, "Empty")]
        assert listed(duration_filter_ms=4_000) == [("a", a, "Empty"), ("b", b, "Ongoing")]
        assert listed(duration_filter_ms=5_000) == [("a", a, "Empty")]  # Empty: start -1
        unknown = c.list_transactions(states=["Ongoing", "Bogus"])
        assert unknown.unknown_state_filters == ("Bogus",)

    run(scenario)


def test_describe_errors() -> None:
    async def scenario(txn: Txn) -> None:
        assert txn.coordinator.describe("").error == E.invalid_request
        assert txn.coordinator.describe("nobody").error == E.transactional_id_not_found

    run(scenario)


def test_a_failed_fence_does_not_bump_the_epoch_twice() -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        _, pid, epoch = await init(txn)
        await c.add_partitions(TID, pid, epoch, [T0])
        txn.topic.fail_with = StateNotAvailableError("down")
        assert (await init(txn))[0] == E.coordinator_not_available
        txn.topic.fail_with = None
        assert (await init(txn))[0] == E.concurrent_transactions
        await txn.settle()
        assert txn.markers.sent[-1].producer_epoch == epoch + 1
        assert await init(txn) == (E.none, pid, epoch + 2)

    run(scenario)
