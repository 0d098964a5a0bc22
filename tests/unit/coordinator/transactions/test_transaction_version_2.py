"""KIP-890 part 2 (`transaction.version` 2) in the transaction coordinator, against Kafka 4's
behaviour: a partition leader adds partitions (no client AddPartitionsToTxn), every EndTxn bumps
the producer epoch and the markers carry the bumped epoch, the answer names the epoch to continue
with, a retried EndTxn of the previous epoch is answered as the first, an abort with nothing open
still bumps, the zombie of the previous epoch is fenced, exhausted epochs rotate the producer id,
the flexible TransactionLogValue (v1) keeps the client's version across a reload, and TV0/1
clients keep one epoch across transactions."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from brokers.coordinator.transactions.metadata import INT16_MAX, TV_2, TxnState
from brokers.records.builder import read_batch
from brokers.wire.errors import ErrorCode
from tests.unit.coordinator.transactions.harness import Txn, build, running

pytestmark = pytest.mark.unit
E = ErrorCode
TID = "tx2"
T0, T1 = ("t", 0), ("t", 1)
TIMEOUT_MS = 60_000


def run(scenario: Callable[[Txn], Awaitable[None]], **kwargs: object) -> None:
    async def main() -> None:
        async with running(**kwargs) as txn:
            await scenario(txn)

    asyncio.run(main())


def written(txn: Txn, tid: str = TID) -> list[tuple[str, int, int]]:
    """(state, producer id, epoch) of every value written for `tid`, in log order."""
    partition = txn.coordinator.partition_for(tid)
    return [
        (TxnState(v.status).label, v.producer_id, v.producer_epoch)
        for key, v in txn.topic.records(partition)
        if key == tid and v is not None
    ]


async def tv2_transaction(txn: Txn, pid: int, epoch: int, commit: bool) -> tuple[E, int, int]:
    """A leader adds T0 and T1 for the producer, then the producer's EndTxn v5."""
    c = txn.coordinator
    added = await c.add_partitions(TID, pid, epoch, [T0, T1], client_version=TV_2)
    assert added == {T0: E.none, T1: E.none}
    result = await c.end_transaction(TID, pid, epoch, commit, TV_2)
    await txn.settle()
    return result


@pytest.mark.parametrize("commit", [True, False])
def test_every_end_bumps_the_epoch_and_the_markers_carry_it(commit: bool) -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        _, pid, epoch = await c.init_producer_id(TID, TIMEOUT_MS)
        assert await tv2_transaction(txn, pid, epoch, commit) == (E.none, pid, epoch + 1)
        [marker] = txn.markers.sent
        assert (marker.producer_epoch, marker.commit, marker.partitions) == (
            epoch + 1,
            commit,
            (T0, T1),
        )
        done = "CompleteCommit" if commit else "CompleteAbort"
        prepared = "PrepareCommit" if commit else "PrepareAbort"
        assert written(txn)[-2:] == [(prepared, pid, epoch + 1), (done, pid, epoch + 1)]
        # The next transaction runs at the bumped epoch and ends one higher again.
        assert await tv2_transaction(txn, pid, epoch + 1, commit) == (E.none, pid, epoch + 2)
        assert txn.markers.sent[-1].producer_epoch == epoch + 2

    run(scenario)


def test_the_zombie_of_the_previous_epoch_is_fenced() -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        _, pid, epoch = await c.init_producer_id(TID, TIMEOUT_MS)
        await tv2_transaction(txn, pid, epoch, True)
        zombie = await c.add_partitions(TID, pid, epoch, [T0], client_version=TV_2)
        assert zombie == {T0: E.producer_fenced}
        # A retried EndTxn of the ended transaction is answered as the first was ...
        assert await c.end_transaction(TID, pid, epoch, True, TV_2) == (E.none, pid, epoch + 1)
        # ... but it cannot end it the other way, nor can an epoch before that end anything.
        assert (await c.end_transaction(TID, pid, epoch, False, TV_2))[0] == E.invalid_txn_state
        assert (await c.end_transaction(TID, pid, epoch - 1, True, TV_2))[0] == E.producer_fenced
        assert len(txn.markers.sent) == 1  # no retry wrote markers again

    run(scenario)


def test_an_abort_with_nothing_added_still_bumps_the_epoch() -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        _, pid, epoch = await c.init_producer_id(TID, TIMEOUT_MS)
        assert await c.end_transaction(TID, pid, epoch, False, TV_2) == (E.none, pid, epoch + 1)
        await txn.settle()
        assert txn.markers.sent == []  # no partition: no marker
        assert written(txn)[-1] == ("CompleteAbort", pid, epoch + 1)
        # Committing nothing is still refused, as Kafka does.
        result = await c.end_transaction(TID, pid, epoch + 1, True, TV_2)
        assert result[0] == E.invalid_txn_state

    run(scenario)


def test_tv1_clients_keep_one_epoch_across_transactions() -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        _, pid, epoch = await c.init_producer_id(TID, TIMEOUT_MS)
        await c.add_partitions(TID, pid, epoch, [T0])
        assert await c.end_transaction(TID, pid, epoch, True) == (E.none, pid, epoch)
        await txn.settle()
        assert txn.markers.sent[-1].producer_epoch == epoch
        assert (await c.end_transaction(TID, pid, epoch, False))[0] == E.invalid_txn_state
        partition = c.partition_for(TID)
        values = [v for k, v in txn.topic.records(partition) if k == TID]
        assert {v.client_transaction_version for v in values} == {0}

    run(scenario)


def test_exhausted_epochs_rotate_the_producer_id_at_the_end() -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        _, pid, _ = await c.init_producer_id(TID, TIMEOUT_MS)
        meta = c.state.lookup(TID)
        assert not isinstance(meta, E)
        last = INT16_MAX - 1
        meta.transactions[TID].producer_epoch = last  # as after 32766 transactions
        error, new_pid, new_epoch = await tv2_transaction(txn, pid, last, True)
        assert (error, new_epoch) == (E.none, 0) and new_pid != pid
        assert txn.markers.sent[-1].producer_epoch == INT16_MAX  # fences every older epoch
        assert written(txn)[-1] == ("CompleteCommit", new_pid, 0)
        # The lost answer's retry gets the new id too.
        assert await c.end_transaction(TID, pid, last, True, TV_2) == (E.none, new_pid, 0)
        assert await tv2_transaction(txn, new_pid, 0, False) == (E.none, new_pid, 1)

    run(scenario)


def test_the_client_version_survives_a_reload_and_is_written_as_value_v1() -> None:
    async def main() -> None:
        async with running() as first:
            c = first.coordinator
            _, pid, epoch = await c.init_producer_id(TID, TIMEOUT_MS)
            await tv2_transaction(first, pid, epoch, True)
            partition = c.partition_for(TID)
            last = [v for k, v in first.topic.records(partition) if k == TID][-1]
            assert last.client_transaction_version == TV_2
            values = [r.value for b in first.topic.logs[partition] for r in read_batch(b)[1]]
            assert values[-1] is not None and values[-1][:2] == b"\x00\x01"  # value v1
            assert values[0] is not None and values[0][:2] == b"\x00\x00"  # InitProducerId
            topic = first.topic
        second = build(topic=topic)
        await second.coordinator.load_partitions(range(topic.partitions))
        try:
            c = second.coordinator
            # The reloaded coordinator still knows the transaction is TV2: a retried EndTxn of
            # the previous epoch is a retry, and the next one bumps again.
            assert await c.end_transaction(TID, pid, epoch, True, TV_2) == (E.none, pid, epoch + 1)
            assert await tv2_transaction(second, pid, epoch + 1, False) == (E.none, pid, epoch + 2)
        finally:
            await second.coordinator.shutdown()

    asyncio.run(main())


def test_a_timed_out_tv2_transaction_is_aborted_under_a_fenced_epoch() -> None:
    async def scenario(txn: Txn) -> None:
        c = txn.coordinator
        _, pid, epoch = await c.init_producer_id(TID, TIMEOUT_MS)
        await c.add_partitions(TID, pid, epoch, [T0], client_version=TV_2)
        txn.clock.advance(TIMEOUT_MS + 1)
        assert await c.abort_timed_out() == 1
        await txn.settle()
        [marker] = txn.markers.sent
        assert (marker.producer_epoch, marker.commit) == (epoch + 1, False)
        assert txn.state_of(TID) == "CompleteAbort"
        # The producer of the timed-out transaction is fenced, even as a "retry".
        assert (await c.end_transaction(TID, pid, epoch, True, TV_2))[0] == E.producer_fenced
        assert (await c.end_transaction(TID, pid, epoch, False, TV_2))[0] == E.producer_fenced
        # A new instance starts afresh above the fenced epoch.
        assert await c.init_producer_id(TID, TIMEOUT_MS) == (E.none, pid, epoch + 2)

    run(scenario)
