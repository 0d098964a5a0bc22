"""Helpers for the transaction tests of the partition log: producers, markers, replication."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from brokers.common.clock import ManualClock
from brokers.log.config import LogConfig
from brokers.log.file_ops import OS_FILES, FileOps
from brokers.log.log import AppendResult, Log
from brokers.records.batch import iter_headers
from brokers.records.builder import build_batch
from brokers.records.control import EndTxnMarker

T0 = 1_700_000_000_000
CONFIG = LogConfig(segment_bytes=1200, index_interval_bytes=100)


@dataclass
class Producer:
    """A transactional producer's batches: its id, epoch and next sequence."""

    pid: int
    epoch: int = 0
    sequence: int = 0
    coordinator_epoch: int = 0
    sent: list[int] = field(default_factory=list)

    def batch(self, records: int = 2, *, transactional: bool = True) -> bytes:
        data = build_batch(
            [(b"k%d" % i, b"p%d-%d" % (self.pid, self.sequence + i)) for i in range(records)],
            producer_id=self.pid, producer_epoch=self.epoch, base_sequence=self.sequence,
            is_transactional=transactional, base_timestamp=T0,
        )  # fmt: skip
        self.sequence += records
        return data


def put(log: Log, data: bytes, *, leader_epoch: int = 0) -> AppendResult:
    return log.append_as_leader(data, list(iter_headers(data)), leader_epoch=leader_epoch)


def send(log: Log, producer: Producer, records: int = 2) -> AppendResult:
    return put(log, producer.batch(records))


def end(log: Log, producer: Producer, *, commit: bool) -> AppendResult:
    marker = EndTxnMarker(commit, producer.coordinator_epoch)
    return log.append_marker(producer.pid, producer.epoch, marker, leader_epoch=0)


def plain(log: Log, records: int = 1) -> AppendResult:
    return put(log, build_batch([(b"k", b"plain")] * records, base_timestamp=T0))


def open_log(
    directory: Path, *, config: LogConfig = CONFIG, clean: bool = True, recovery_point: int = 0,
    files: FileOps = OS_FILES, clock: ManualClock | None = None, log_start_offset: int = 0,
) -> Log:  # fmt: skip
    return Log.open(
        directory / "topic-0", config, clock=clock or ManualClock(T0), had_clean_shutdown=clean,
        recovery_point=recovery_point, files=files, log_start_offset=log_start_offset,
    )  # fmt: skip


def replicate(leader: Log, follower: Log) -> None:
    """Copy what the follower lacks, as a replica fetcher does (whole batches as read)."""
    while follower.log_end_offset < leader.log_end_offset:
        read = leader.read(follower.log_end_offset, 700)
        assert read.region is not None
        data = read.region.read()
        follower.append_as_follower(data, list(iter_headers(data)))


def txn_index_files(log: Log) -> dict[str, int]:
    return {p.name: p.stat().st_size for p in sorted(log.directory.glob("*.txnindex*"))}
