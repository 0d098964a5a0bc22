"""The follower fetcher against a leader `Log` in process: catch-up and HW, the two KIP-101
scenarios, zombie answers across an epoch change, KIP-320 fencing, out-of-range, bad batches."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.records.errors import CorruptRecordError
from brokers.replication.fetcher import Phase, ReplicaFetcher, complete_batches
from tests.polling import wait_until_async
from tests.unit.log.partition_helpers import make_batch
from tests.unit.replication.replication_helpers import (
    TP,
    LogLeader,
    batches,
    open_replica,
    write_as_leader,
)

pytestmark = pytest.mark.unit


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


def fetcher_for(
    leader: LogLeader, clock: ManualClock, hws: list[int] | None = None
) -> ReplicaFetcher:
    sink = hws if hws is not None else []
    return ReplicaFetcher(leader, clock=clock, on_high_watermark=lambda tp, hw: sink.append(hw))


async def rounds(fetcher: ReplicaFetcher, count: int = 4) -> None:
    for _ in range(count):
        await fetcher.run_once()


def test_follower_catches_up_and_takes_the_leader_hw(tmp_path: Path, clock: ManualClock) -> None:
    a, b = open_replica(tmp_path, "a", clock), open_replica(tmp_path, "b", clock)
    write_as_leader(a, 0, count=3)
    leader, hws = LogLeader(a, 0, hw=2), list[int]()
    fetcher = fetcher_for(leader, clock, hws)
    fetcher.follow(TP, b, leader_epoch=0, high_watermark=0)
    asyncio.run(rounds(fetcher))
    assert batches(b) == batches(a)
    assert fetcher.high_watermark(TP) == 2 and hws[-1] == 2  # min(leader HW, own log end)
    assert b.leader_epoch_cache.entries() == a.leader_epoch_cache.entries()
    assert leader.epoch_queries == []  # an empty follower has no epoch to ask about


def test_kip101_truncating_to_the_hw_would_lose_a_committed_record(
    tmp_path: Path, clock: ManualClock
) -> None:
    """B has m1, m2 but its HW says 1 when it restarts; A had acknowledged m2 (HW 2). B must keep
    m2 (asking A where epoch 0 ended), lead epoch 1, and A must end with B's log."""
    a, b = open_replica(tmp_path, "a", clock), open_replica(tmp_path, "b", clock)
    write_as_leader(a, 0, count=2)
    first = fetcher_for(LogLeader(a, 0, hw=1), clock)
    first.follow(TP, b, leader_epoch=0, high_watermark=0)
    asyncio.run(rounds(first))
    assert first.high_watermark(TP) == 1 and b.log_end_offset == 2
    restarted = fetcher_for(LogLeader(a, 0, hw=2), clock)  # B restarts, follows A again
    restarted.follow(TP, b, leader_epoch=0, high_watermark=1)
    asyncio.run(restarted.run_once())
    assert b.log_end_offset == 2  # m2 kept: not truncated to the HW
    # A dies; B leads epoch 1 and writes m3; A comes back as B's follower.
    write_as_leader(b, 1, count=1)
    back = fetcher_for(LogLeader(b, 1), clock)
    back.follow(TP, a, leader_epoch=1, high_watermark=2)
    asyncio.run(rounds(back))
    assert batches(a) == batches(b)
    assert [offset for offset, _, _ in batches(a)] == [0, 1, 2]


def test_kip101_divergent_logs_after_a_leader_restart_converge(
    tmp_path: Path, clock: ManualClock
) -> None:
    """A (epoch 0) wrote m1, m2; only m1 reached B; both crash. B comes back first, leads epoch
    1 and writes m3 at offset 1. A returns with HW 2: it must drop its m2 and take B's m3."""
    a, b = open_replica(tmp_path, "a", clock), open_replica(tmp_path, "b", clock)
    write_as_leader(a, 0, count=1)
    catch_up = fetcher_for(LogLeader(a, 0), clock)
    catch_up.follow(TP, b, leader_epoch=0, high_watermark=0)
    asyncio.run(rounds(catch_up))
    write_as_leader(a, 0, count=1, value=b"a-only" * 4)
    write_as_leader(b, 1, count=1, value=b"b-new" * 4)
    assert batches(a)[1] != batches(b)[1]
    leader = LogLeader(b, 1)
    back = fetcher_for(leader, clock)
    back.follow(TP, a, leader_epoch=1, high_watermark=2)
    asyncio.run(rounds(back))
    assert leader.epoch_queries[0].leader_epoch == 0
    assert batches(a) == batches(b)
    assert [epoch for _, epoch, _ in batches(a)] == [0, 1]


def test_a_zombie_fetch_across_an_epoch_change_is_discarded(
    tmp_path: Path, clock: ManualClock
) -> None:
    a, b = open_replica(tmp_path, "a", clock), open_replica(tmp_path, "b", clock)
    write_as_leader(a, 0, count=2)
    leader = LogLeader(a, 0)
    fetcher = fetcher_for(leader, clock)
    fetcher.follow(TP, b, leader_epoch=0, high_watermark=0)

    async def scenario() -> None:
        await fetcher.run_once()  # truncation round (nothing to cut) then a fetch
        write_as_leader(a, 0, count=2)
        leader.gate = asyncio.Event()
        in_flight = asyncio.create_task(fetcher.run_once())
        while leader.fetches < 2:
            await asyncio.sleep(0)
        fetcher.follow(TP, b, leader_epoch=1, high_watermark=2)  # new epoch mid-flight
        leader.gate.set()
        await in_flight

    asyncio.run(scenario())
    assert b.log_end_offset == 2  # the epoch-0 answer carrying offsets 2..3 was dropped
    assert fetcher.phase(TP) is Phase.TRUNCATING


def test_a_zombie_epoch_answer_is_discarded(tmp_path: Path, clock: ManualClock) -> None:
    a, b = open_replica(tmp_path, "a", clock), open_replica(tmp_path, "b", clock)
    write_as_leader(b, 0, count=3)  # b's own data; a leader answer would cut it to 0
    leader = LogLeader(a, 0)
    a.leader_epoch_cache.assign(0, 0)
    fetcher = fetcher_for(leader, clock)
    fetcher.follow(TP, b, leader_epoch=0, high_watermark=0)

    async def scenario() -> None:
        leader.gate = asyncio.Event()
        in_flight = asyncio.create_task(fetcher.run_once())
        while not leader.epoch_queries:
            await asyncio.sleep(0)
        fetcher.unfollow(TP)
        leader.gate.set()
        await in_flight

    asyncio.run(scenario())
    assert b.log_end_offset == 3


def test_fenced_leader_epoch_stops_the_partition(tmp_path: Path, clock: ManualClock) -> None:
    a, b = open_replica(tmp_path, "a", clock), open_replica(tmp_path, "b", clock)
    write_as_leader(a, 0, count=1)
    write_as_leader(a, 2, count=1)
    leader = LogLeader(a, 2)
    fetcher = fetcher_for(leader, clock)
    fetcher.follow(TP, b, leader_epoch=1, high_watermark=0)  # a follower without epochs
    asyncio.run(rounds(fetcher))
    assert fetcher.phase(TP) is Phase.FENCED
    assert b.log_end_offset == 0
    fetcher.follow(TP, b, leader_epoch=0, high_watermark=0)  # an older instruction: ignored
    assert fetcher.phase(TP) is Phase.FENCED
    fetcher.follow(TP, b, leader_epoch=2, high_watermark=0)
    asyncio.run(rounds(fetcher))
    assert batches(b) == batches(a)


def test_unknown_leader_epoch_backs_off_until_the_leader_catches_up(
    tmp_path: Path, clock: ManualClock
) -> None:
    a, b = open_replica(tmp_path, "a", clock), open_replica(tmp_path, "b", clock)
    write_as_leader(a, 0, count=2)
    write_as_leader(b, 0, count=1)
    leader = LogLeader(a, 0)
    fetcher = fetcher_for(leader, clock)
    fetcher.follow(TP, b, leader_epoch=1, high_watermark=0)
    asyncio.run(rounds(fetcher))
    assert len(leader.epoch_queries) == 1  # backed off: no retry before the back-off ends
    assert fetcher.phase(TP) is Phase.TRUNCATING
    leader.epoch = 1
    a.leader_epoch_cache.assign(1, a.log_end_offset)
    clock.advance(1_000)
    asyncio.run(rounds(fetcher))
    assert batches(b) == batches(a)


def test_behind_the_leader_log_start_restarts_there(tmp_path: Path, clock: ManualClock) -> None:
    a, b = open_replica(tmp_path, "a", clock), open_replica(tmp_path, "b", clock)
    write_as_leader(a, 0, count=5)
    a.high_watermark = 5
    a.delete_records_before(3)
    fetcher = fetcher_for(LogLeader(a, 0), clock)
    fetcher.follow(TP, b, leader_epoch=0, high_watermark=0)
    asyncio.run(rounds(fetcher))
    assert b.log_start_offset == 3
    assert b.log_end_offset == 5
    assert [offset for offset, _, _ in batches(b)] == [3, 4]


def test_a_corrupt_batch_is_not_appended(tmp_path: Path, clock: ManualClock) -> None:
    a, b = open_replica(tmp_path, "a", clock), open_replica(tmp_path, "b", clock)
    write_as_leader(a, 0, count=1)
    leader = LogLeader(a, 0)
    fetcher = fetcher_for(leader, clock)
    fetcher.follow(TP, b, leader_epoch=0, high_watermark=0)
    original = leader.fetch

    async def corrupting(positions):  # type: ignore[no-untyped-def]
        answer = dict(await original(positions))
        part = answer[TP]
        flipped = bytearray(part.records)
        flipped[-1] ^= 0xFF
        answer[TP] = type(part)(part.error, part.high_watermark, part.last_stable_offset,
                                part.log_start_offset, bytes(flipped), ())  # fmt: skip
        return answer

    leader.fetch = corrupting  # type: ignore[method-assign]
    asyncio.run(rounds(fetcher))
    assert b.log_end_offset == 0


def test_complete_batches_ignores_a_partial_tail_and_rejects_corruption() -> None:
    one, two = make_batch(1), make_batch(2)
    assert [pos for pos, _ in complete_batches(one + two[:40])] == [0]
    assert [pos for pos, _ in complete_batches(one + two[:70])] == [0]
    assert len(complete_batches(one + two)) == 2
    assert complete_batches(b"") == []
    bad = bytearray(one)
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        complete_batches(bytes(bad))


class FailingOnceLeader(LogLeader):
    """A leader whose first fetch fails with an error no client code expects (a disk error)."""

    failed = False

    async def fetch(self, positions):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0)  # a real leader's answer takes I/O: let the test run meanwhile
        if not self.failed:
            self.failed = True
            raise OSError(28, "No space left on device")
        return await super().fetch(positions)


def test_an_unexpected_error_backs_off_instead_of_ending_the_fetcher(
    tmp_path: Path, clock: ManualClock
) -> None:
    a, b = open_replica(tmp_path, "a", clock), open_replica(tmp_path, "b", clock)
    write_as_leader(a, 0, count=2)
    leader = FailingOnceLeader(a, 0, hw=2)
    fetcher = fetcher_for(leader, clock)
    fetcher.follow(TP, b, leader_epoch=0, high_watermark=0)

    async def caught_up() -> bool:
        if leader.failed:
            clock.advance(2_000)  # past the back-off
            fetcher._wake.set()
        return b.log_end_offset == 2

    async def scenario() -> None:
        task = asyncio.ensure_future(fetcher.run())
        await wait_until_async(caught_up, what="b caught up after the failure", timeout=5)
        assert not task.done(), "the fetcher task ended"
        fetcher.stop()
        await asyncio.wait_for(task, 5)

    asyncio.run(scenario())
    assert leader.failed and batches(b) == batches(a)
