"""Helpers for the replication tests: real logs, and a `LeaderEndpoint` answered from a leader's
`Log` in process (the leader's side of Fetch and OffsetForLeaderEpoch, with KIP-320 fencing)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from brokers.client.consumer import FetchedPartition, FetchPosition
from brokers.client.metadata import TopicPartition
from brokers.common.clock import ManualClock
from brokers.log.config import LogConfig
from brokers.log.log import Log
from brokers.records.batch import iter_headers
from brokers.replication.fetcher import EpochAnswer, EpochQuery, LocalStartAnswer
from brokers.wire.errors import ErrorCode
from tests.unit.log.partition_helpers import append, make_batch

TP = TopicPartition("topic", 0)


def open_replica(root: Path, name: str, clock: ManualClock) -> Log:
    return Log.open(root / name / "topic-0", LogConfig(), clock=clock)


def write_as_leader(log: Log, epoch: int, count: int = 1, value: bytes = b"v" * 20) -> None:
    """Append `count` one-record batches as leader in `epoch` (Partition.become_leader first
    assigns the epoch at the log end, so it is known even before anything is written)."""
    log.leader_epoch_cache.assign(epoch, log.log_end_offset)
    for _ in range(count):
        append(log, make_batch(1, value=value), leader_epoch=epoch)


def batches(log: Log) -> list[tuple[int, int, int]]:
    """(base offset, partition leader epoch, crc) of every batch: equal lists = identical logs."""
    out: list[tuple[int, int, int]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        read = log.read(offset, 1 << 30)
        assert read.region is not None
        data = read.region.read()
        out += [(h.base_offset, h.partition_leader_epoch, h.crc) for _, h in iter_headers(data)]
        offset = read.next_offset
    return out


class LogLeader:
    """The leader of `TP`, answering from its `Log` in `epoch` with high watermark `hw`."""

    def __init__(self, log: Log, epoch: int, hw: int | None = None) -> None:
        self.log = log
        self.epoch = epoch
        self.hw = log.log_end_offset if hw is None else hw
        self.gate: asyncio.Event | None = None  # set: answers wait for it (delayed fetches)
        self.fetches = 0
        self.epoch_queries: list[EpochQuery] = []

    def _fence(self, current_epoch: int) -> ErrorCode:
        if 0 <= current_epoch < self.epoch:
            return ErrorCode.fenced_leader_epoch
        if current_epoch > self.epoch:
            return ErrorCode.unknown_leader_epoch
        return ErrorCode.none

    async def end_offsets(
        self, queries: Mapping[TopicPartition, EpochQuery]
    ) -> Mapping[TopicPartition, EpochAnswer]:
        query = queries[TP]
        self.epoch_queries.append(query)
        await self._maybe_wait()
        error = self._fence(query.current_leader_epoch)
        if error != ErrorCode.none:
            return {TP: EpochAnswer(error)}
        epoch, end = self.log.leader_epoch_cache.end_offset_for(
            query.leader_epoch, self.log.log_end_offset
        )
        return {TP: EpochAnswer(ErrorCode.none, epoch, end)}

    async def earliest_local(
        self, tp: TopicPartition, current_leader_epoch: int
    ) -> LocalStartAnswer:
        error = self._fence(current_leader_epoch)
        first = self.log.leader_epoch_cache.earliest_entry()
        return LocalStartAnswer(error, self.log.log_start_offset, first[0] if first else -1)

    async def fetch(
        self, positions: Mapping[TopicPartition, FetchPosition]
    ) -> Mapping[TopicPartition, FetchedPartition]:
        position = positions[TP]
        self.fetches += 1
        records = b""
        error = self._fence(position.current_leader_epoch)
        log = self.log
        if error == ErrorCode.none:
            if not log.log_start_offset <= position.offset <= log.log_end_offset:
                error = ErrorCode.offset_out_of_range
            else:
                read = log.read(position.offset, 1 << 20)
                records = read.region.read() if read.region is not None else b""
        await self._maybe_wait()
        return {TP: FetchedPartition(error, self.hw, self.hw, log.log_start_offset, records, ())}

    async def _maybe_wait(self) -> None:
        if self.gate is not None:
            await self.gate.wait()
