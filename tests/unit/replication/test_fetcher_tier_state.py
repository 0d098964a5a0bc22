"""A follower below the leader's local log start (KIP-405): the leader answers
OFFSET_MOVED_TO_TIERED_STORAGE, the follower asks its local log start and rebuilds there with the
remote tier's epochs and producer snapshot (`tier_state`), then catches up. The remote tier is a
stand-in answering from the leader's own files: what the store returns is tested with the real
stores in tests/integration/cluster/test_tiered_follower_rebuild.py."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

import pytest

from brokers.client.consumer import FetchedPartition, FetchPosition
from brokers.client.metadata import TopicPartition
from brokers.common.clock import ManualClock
from brokers.log.log import Log
from brokers.replication.fetcher import Phase, ReplicaFetcher
from brokers.replication.tier_state import RemoteAuxState
from brokers.wire.errors import ErrorCode
from tests.unit.log.partition_helpers import append, make_batch
from tests.unit.replication.replication_helpers import TP, LogLeader, batches, open_replica

pytestmark = pytest.mark.unit
PRODUCER_ID = 7


class TieredLeader(LogLeader):
    """Below its local log start the leader says the offsets moved to the remote tier."""

    async def fetch(
        self, positions: Mapping[TopicPartition, FetchPosition]
    ) -> Mapping[TopicPartition, FetchedPartition]:
        if positions[TP].offset < self.log.log_start_offset:
            moved = ErrorCode.offset_moved_to_tiered_storage
            return {TP: FetchedPartition(moved, self.hw, self.hw, 0, b"", ())}
        return await super().fetch(positions)


class RemoteTier:
    def __init__(self, aux: RemoteAuxState | None) -> None:
        self.aux = aux
        self.asked: list[int] = []

    async def aux_state(self, log: Log, next_offset: int) -> RemoteAuxState | None:
        self.asked.append(next_offset)
        return self.aux


def tiered_leader(tmp_path: Path, clock: ManualClock) -> tuple[TieredLeader, RemoteAuxState]:
    """Epoch 0: offsets 0-1 by producer 7 (sequences 0-1); epoch 1: 2-3 by nobody; the local
    log then starts at 4 (the earlier offsets are only in the remote tier)."""
    a = open_replica(tmp_path, "a", clock)
    a.leader_epoch_cache.assign(0, 0)
    for seq in range(2):
        batch = make_batch(1, producer_id=PRODUCER_ID, producer_epoch=0, base_sequence=seq)
        append(a, batch, leader_epoch=0)
    a.leader_epoch_cache.assign(1, 2)
    for _ in range(2):
        append(a, make_batch(1), leader_epoch=1)
    a.producer_state.take_snapshot(4)
    snapshot = a.producer_state.snapshot_path(4).read_bytes()
    a.leader_epoch_cache.assign(2, 4)
    append(a, make_batch(1), leader_epoch=2)
    a.roll()
    a.delete_records_before(4)
    aux = RemoteAuxState(((0, 0), (1, 2)), snapshot)
    return TieredLeader(a, 2), aux


def test_a_follower_below_the_local_log_start_rebuilds_from_the_remote_tier(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    leader, aux = tiered_leader(tmp_path, clock)
    b = open_replica(tmp_path, "b", clock)
    remote = RemoteTier(aux)
    fetcher = ReplicaFetcher(leader, clock=clock, remote_tier=remote)
    fetcher.follow(TP, b, leader_epoch=2, high_watermark=0)

    async def rounds() -> None:
        for _ in range(4):
            await fetcher.run_once()

    asyncio.run(rounds())
    assert remote.asked == [4]
    assert b.log_start_offset == 4 and batches(b) == batches(leader.log)
    assert b.leader_epoch_cache.entries() == [(0, 0), (1, 2), (2, 4)]
    entry = b.producer_state.last_entry(PRODUCER_ID)
    assert entry is not None and entry.last_sequence == 1  # the producer's state came along


def test_while_the_remote_metadata_lags_the_follower_backs_off_and_keeps_its_log(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    leader, _ = tiered_leader(tmp_path, clock)
    b = open_replica(tmp_path, "b", clock)
    remote = RemoteTier(None)
    fetcher = ReplicaFetcher(leader, clock=clock, remote_tier=remote)
    fetcher.follow(TP, b, leader_epoch=2, high_watermark=0)
    asyncio.run(fetcher.run_once())
    assert remote.asked == [4]
    assert b.log_end_offset == 0 and fetcher.phase(TP) is Phase.FETCHING
    asyncio.run(fetcher.run_once())
    assert remote.asked == [4]  # backed off: not asked again before the back-off ends
