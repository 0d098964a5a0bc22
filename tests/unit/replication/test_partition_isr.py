"""The leader side of a replicated `Partition`: follower fetch state, high watermark over the
ISR, ISR shrink/expand through an `isr_change` writer, min.insync.replicas and acks=all, the
follower role — and the standalone partition unchanged."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.config import LogConfig
from brokers.log.log import Log
from brokers.replication.errors import NotEnoughReplicasError, NotLeaderOrFollowerError
from brokers.replication.isr import ACKS_ALL, AckOutcome
from brokers.replication.partition import LeadershipState, Partition
from tests.unit.log.partition_helpers import make_batch

pytestmark = pytest.mark.unit

LEADER, FOLLOWER = 0, 1
LAG_MS = 10_000


class Writes:
    """A fake ISR writer: records each write and answers with `answer` (None: conflict)."""

    def __init__(self) -> None:
        self.isrs: list[list[int]] = []
        self.answer: int | None = 7

    async def __call__(self, partition: Partition, isr: list[int]) -> int | None:
        self.isrs.append(isr)
        return self.answer


def make_partition(
    tmp_path: Path, clock: ManualClock, *, min_isr: int = 1, writes: Writes | None = None
) -> tuple[Partition, list[int]]:
    config = dataclasses.replace(LogConfig(), min_insync_replicas=min_isr)
    log = Log.open(tmp_path / "topic-0", config, clock=clock)
    woken: list[int] = []
    partition = Partition(
        log,
        node_id=LEADER,
        clock=clock,
        high_watermark=0,
        on_high_watermark=lambda p: woken.append(p.high_watermark),
        replica_lag_time_max_ms=LAG_MS,
        isr_change=writes,
    )
    return partition, woken


def lead(partition: Partition, isr: list[int], epoch: int = 1) -> None:
    partition.become_leader(LeadershipState(LEADER, epoch, [LEADER, FOLLOWER], list(isr)))


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def test_high_watermark_waits_for_the_isr_follower(tmp_path: Path) -> None:
    clock = ManualClock()
    partition, woken = make_partition(tmp_path, clock)
    lead(partition, [LEADER, FOLLOWER])
    partition.append_as_leader(make_batch(3))
    assert partition.high_watermark == 0  # the follower's offset is unknown
    consumer_read = partition.read(0, 1 << 20).read  # consumers never see past the HW
    assert consumer_read is None or consumer_read.region is None
    assert partition.update_follower_fetch_state(FOLLOWER, 2, 0, clock.time_ms())
    assert partition.high_watermark == 2
    assert partition.log.high_watermark == 2
    assert partition.update_follower_fetch_state(FOLLOWER, 3, 0, clock.time_ms())
    assert partition.high_watermark == 3 and woken[-1] == 3
    assert partition.acks_all_outcome(3) is AckOutcome.DONE
    partition.append_as_leader(make_batch(1))
    assert partition.acks_all_outcome(4) is AckOutcome.PENDING


def test_unknown_replicas_and_stale_broker_epochs_are_ignored(tmp_path: Path) -> None:
    clock = ManualClock()
    partition, _ = make_partition(tmp_path, clock)
    lead(partition, [LEADER, FOLLOWER])
    partition.append_as_leader(make_batch(2))
    assert not partition.update_follower_fetch_state(9, 2, 0, clock.time_ms())
    assert partition.update_follower_fetch_state(FOLLOWER, 1, 0, clock.time_ms(), broker_epoch=5)
    assert not partition.update_follower_fetch_state(FOLLOWER, 2, 0, clock.time_ms(), 4)
    assert partition.high_watermark == 1


def test_min_insync_replicas_refuses_acks_all_before_writing(tmp_path: Path) -> None:
    clock = ManualClock()
    partition, _ = make_partition(tmp_path, clock, min_isr=2)
    lead(partition, [LEADER])
    with pytest.raises(NotEnoughReplicasError):
        partition.append_as_leader(make_batch(1), ACKS_ALL)
    assert partition.log.log_end_offset == 0
    partition.append_as_leader(make_batch(1), 1)  # acks=1 is not affected
    assert partition.log.log_end_offset == 1


def test_lagging_follower_is_shrunk_out_and_the_hw_moves_on(tmp_path: Path) -> None:
    async def scenario() -> None:
        clock, writes = ManualClock(), Writes()
        partition, _ = make_partition(tmp_path, clock, min_isr=2, writes=writes)
        lead(partition, [LEADER, FOLLOWER])
        partition.append_as_leader(make_batch(2), ACKS_ALL)
        assert not partition.maybe_shrink_isr(clock.time_ms())  # fresh ISR members get time
        clock.advance(LAG_MS + 1)
        assert partition.maybe_shrink_isr(clock.time_ms())
        assert partition.maximal_isr == [LEADER, FOLLOWER]  # until the write is durable
        assert partition.high_watermark == 0
        await settle()
        assert writes.isrs == [[LEADER]]
        assert partition.state.isr == [LEADER] and partition.state.zk_version == 7
        assert partition.high_watermark == 2
        assert partition.acks_all_outcome(2) is AckOutcome.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        with pytest.raises(NotEnoughReplicasError):
            partition.append_as_leader(make_batch(1), ACKS_ALL)

    asyncio.run(scenario())


def test_caught_up_follower_rejoins_the_isr(tmp_path: Path) -> None:
    async def scenario() -> None:
        clock, writes = ManualClock(), Writes()
        partition, _ = make_partition(tmp_path, clock, writes=writes)
        lead(partition, [LEADER])
        partition.append_as_leader(make_batch(2))
        assert partition.high_watermark == 2
        partition.update_follower_fetch_state(FOLLOWER, 1, 0, clock.time_ms())
        await settle()
        assert writes.isrs == []  # below the high watermark: not in sync
        partition.update_follower_fetch_state(FOLLOWER, 2, 0, clock.time_ms())
        assert partition.maximal_isr == [LEADER, FOLLOWER]
        partition.append_as_leader(make_batch(1))
        assert partition.high_watermark == 2  # the joining follower holds it already
        await settle()
        assert partition.state.isr == [LEADER, FOLLOWER]

    asyncio.run(scenario())


def test_a_conflicting_isr_write_leaves_the_isr_alone(tmp_path: Path) -> None:
    async def scenario() -> None:
        clock, writes = ManualClock(), Writes()
        writes.answer = None
        partition, _ = make_partition(tmp_path, clock, writes=writes)
        lead(partition, [LEADER, FOLLOWER])
        clock.advance(LAG_MS + 1)
        assert partition.maybe_shrink_isr(clock.time_ms())
        await settle()
        assert partition.state.isr == [LEADER, FOLLOWER]
        assert partition.maximal_isr == [LEADER, FOLLOWER]
        assert partition.maybe_shrink_isr(clock.time_ms())  # retried: nothing pending now

    asyncio.run(scenario())


def test_a_follower_refuses_appends_and_takes_the_fetched_high_watermark(tmp_path: Path) -> None:
    clock = ManualClock()
    partition, woken = make_partition(tmp_path, clock)
    partition.append_as_leader(make_batch(3))
    partition.become_follower(LeadershipState(FOLLOWER, 1, [LEADER, FOLLOWER], [FOLLOWER]))
    assert woken  # parked produces learn about the lost leadership
    with pytest.raises(NotLeaderOrFollowerError):
        partition.append_as_leader(make_batch(1))
    partition.set_follower_high_watermark(2)
    assert partition.high_watermark == 2 and partition.log.high_watermark == 2
    assert not partition.update_follower_fetch_state(LEADER, 3, 0, clock.time_ms())


def test_standalone_partition_is_unchanged(tmp_path: Path) -> None:
    """No LeaderAndIsr: HW = LEO, Log.high_watermark None, the ISR never changes."""
    clock = ManualClock()
    partition, _ = make_partition(tmp_path, clock, min_isr=1)
    result = partition.append_as_leader(make_batch(2), ACKS_ALL)
    assert partition.high_watermark == result.last_offset + 1 == 2
    assert partition.acks_all_outcome(2) is AckOutcome.DONE
    assert partition.log.high_watermark is None
    assert not partition.maybe_shrink_isr(clock.time_ms() + 10 * LAG_MS)


def test_standalone_partition_enforces_min_insync_replicas(tmp_path: Path) -> None:
    """As Kafka: one replica and min.insync.replicas=2 refuse acks=all before writing; acks=1
    still works."""
    partition, _ = make_partition(tmp_path, ManualClock(), min_isr=2)
    with pytest.raises(NotEnoughReplicasError):
        partition.append_as_leader(make_batch(2), ACKS_ALL)
    assert partition.log.log_end_offset == 0
    assert partition.append_as_leader(make_batch(2), 1).last_offset == 1
    assert partition.acks_all_outcome(2) is AckOutcome.NOT_ENOUGH_REPLICAS_AFTER_APPEND


def test_an_append_wakes_parked_follower_fetches_even_when_the_hw_stays(tmp_path: Path) -> None:
    """Followers park their fetches at the log end; an append that leaves the high watermark where
    it is must still wake them, or acks=all waits out replica.fetch.wait.max.ms per write."""
    clock = ManualClock()
    partition, woken = make_partition(tmp_path, clock)
    lead(partition, [LEADER, FOLLOWER])
    before = len(woken)
    partition.append_as_leader(make_batch(2))
    assert partition.high_watermark == 0
    assert len(woken) == before + 1
