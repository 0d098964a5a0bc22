"""A roll's producer snapshot is written on the event loop without an fsync and fsynced off it,
with the rolled segment, before the recovery point passes it (Kafka's `takeSnapshot(false)`, then
`flushProducerStateSnapshot` on its scheduler); a flush or a clean close on the loop fsyncs it
there; a truncation while the fsync runs voids it; a crash that tears one costs nothing but
replay, and an unclean open takes those past the recovery point again."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.config import LogConfig
from brokers.log.file_ops import FileOps
from brokers.log.log import Log, RolledFiles
from brokers.log.log_manager import LogManager
from brokers.log.producer_state.snapshot import decode_snapshot
from tests.unit.log.partition_helpers import append, make_batch, open_log

pytestmark = pytest.mark.unit

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=128)
PRODUCER = 4242


class FsyncLedger(FileOps):
    """Records every fsync as (the path its descriptor was opened for, the calling thread)."""

    def __init__(self) -> None:
        self.opened: dict[int, Path] = {}
        self.fsyncs: list[tuple[Path, str]] = []

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        fd = super().open(path, flags, mode)
        self.opened[fd] = Path(path)
        return fd

    def fsync(self, fd: int) -> None:
        self.fsyncs.append((self.opened[fd], threading.current_thread().name))
        super().fsync(fd)

    def snapshots(self) -> list[tuple[str, str]]:
        return [(p.name, t) for p, t in self.fsyncs if p.name.endswith(".snapshot")]


def _idempotent(sequence: int) -> bytes:
    return make_batch(2, producer_id=PRODUCER, producer_epoch=0, base_sequence=sequence)


def _filled(log: Log) -> Log:
    """30 batches of one idempotent producer: several rolls, each with its snapshot."""
    for i in range(30):
        append(log, _idempotent(2 * i))
    assert log.number_of_segments > 2
    return log


def _rolled_log(files: FileOps, tmp_path: Path) -> tuple[LogManager, Log]:
    logs = LogManager(tmp_path, clock=ManualClock(), default_config=CONFIG, files=files)
    logs.startup()
    return logs, _filled(logs.create("t", 0))


def test_a_roll_fsyncs_no_snapshot_on_the_loop_the_flush_thread_does_before_the_point_moves(
    tmp_path: Path,
) -> None:
    files = FsyncLedger()
    logs, log = _rolled_log(files, tmp_path)
    try:
        rolled = [s.base_offset for s in log.segments[1:]]
        assert files.snapshots() == []  # every roll wrote one, none fsynced
        assert [p.name for p in log.producer_state.unsynced] == [
            f"{base:020d}.snapshot" for base in rolled
        ]
        assert log.recovery_point < log.active_segment.base_offset
        asyncio.run(logs.run_flush_async())
        synced = files.snapshots()
        assert [name for name, _ in synced] == [f"{base:020d}.snapshot" for base in rolled]
        assert all(thread.startswith("pier-log-flush") for _, thread in synced)
        last_snapshot = max(i for i, (p, _) in enumerate(files.fsyncs) if p.suffix == ".snapshot")
        directory = [i for i, (p, _) in enumerate(files.fsyncs) if p == log.directory]
        assert directory and directory[-1] > last_snapshot  # their names made durable after
        assert log.producer_state.unsynced == []
        assert log.recovery_point == log.active_segment.base_offset
    finally:
        logs.shutdown()


def test_a_flush_on_the_loop_fsyncs_the_rolls_snapshots(tmp_path: Path) -> None:
    files = FsyncLedger()
    logs, log = _rolled_log(files, tmp_path)
    try:
        log.flush()  # flush.messages / flush.ms: fsyncs on this thread anyway
        assert len(files.snapshots()) == log.number_of_segments - 1
        assert {thread for _, thread in files.snapshots()} == {threading.current_thread().name}
        assert log.producer_state.unsynced == []
    finally:
        logs.shutdown()


def test_a_clean_close_fsyncs_a_snapshot_the_flush_had_no_segment_for(tmp_path: Path) -> None:
    files = FsyncLedger()
    logs, log = _rolled_log(files, tmp_path)
    log.flush()
    files.fsyncs.clear()
    log.roll()  # at the log end, which the recovery point already reached
    end = log.log_end_offset
    assert [p.name for p in log.producer_state.unsynced] == [f"{end:020d}.snapshot"]
    assert log.rolled_files() == RolledFiles(end, log.producer_state.unsynced, True, 0)
    log.close()  # the flush inside has nothing to do; the snapshot is synced all the same
    assert files.snapshots() == [(f"{end:020d}.snapshot", threading.current_thread().name)]
    logs.shutdown()


def test_a_torn_roll_snapshot_is_ignored_and_the_producer_state_replayed(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    log = _filled(open_log(tmp_path, clock, CONFIG))
    newest = log.producer_state.unsynced[-1]
    end = log.log_end_offset
    log.release()  # a crash: nothing more written
    os.truncate(newest, 5)  # what an unsynced file may hold after one
    # the newest snapshot at or below the recovery point is the first one read
    again = open_log(tmp_path, clock, CONFIG, recovery_point=end)
    try:
        assert again.log_end_offset == end
        assert not newest.exists()  # unreadable: dropped, an older one read and replayed on
        retried = append(again, _idempotent(58))  # the last batch's retry is still known
        assert retried.duplicate and retried.first_offset == end - 2
        assert append(again, _idempotent(60)).first_offset == end
    finally:
        again.close()


def test_a_flush_ms_flush_syncs_a_snapshot_taken_at_the_recovery_point(tmp_path: Path) -> None:
    files = FsyncLedger()
    config = LogConfig(segment_bytes=1500, index_interval_bytes=128, flush_ms=0)
    logs = LogManager(tmp_path, clock=ManualClock(), default_config=config, files=files)
    logs.startup()
    try:
        log = logs.create("t", 0)
        append(log, _idempotent(0))
        log.flush()
        files.fsyncs.clear()
        log.roll()  # at the recovery point: no segment for the flush to sync
        asyncio.run(logs.run_flush_async())  # flush.ms elapsed: the log's own flush runs
        end = log.log_end_offset
        assert files.snapshots() == [(f"{end:020d}.snapshot", threading.current_thread().name)]
        assert log.producer_state.unsynced == []
    finally:
        logs.shutdown()


def test_a_truncation_while_the_fsync_runs_voids_it(tmp_path: Path) -> None:
    files = FsyncLedger()
    logs, log = _rolled_log(files, tmp_path)
    try:
        plan = log.rolled_files()
        assert plan is not None and plan.target == log.active_segment.base_offset
        before = log.recovery_point
        log.truncate_to(plan.target - 2)  # a follower's, while the flush thread fsyncs the plan
        append(log, make_batch(2))  # the same offsets again, then past them, unsynced
        log.roll()
        rewritten = log.producer_state.unsynced
        log.rolled_synced(plan, None)  # the plan's fsyncs cover none of that
        assert log.recovery_point == before
        assert log.producer_state.unsynced == rewritten and rewritten
        asyncio.run(logs.run_flush_async())  # the next plan does
        assert log.recovery_point == log.active_segment.base_offset
        assert log.producer_state.unsynced == []
    finally:
        logs.shutdown()


def test_an_unclean_open_takes_the_snapshots_past_the_recovery_point_again(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    log = _filled(open_log(tmp_path, clock, CONFIG))
    bases = [s.base_offset for s in log.segments]
    torn = log.producer_state.unsynced[-2]  # a roll's, past the recovery point below
    recovery_point = bases[-3]
    log.release()  # a crash
    os.truncate(torn, 0)  # what an unsynced file may hold after one
    files = FsyncLedger()
    again = Log.open(
        tmp_path / "topic-0", CONFIG, clock=clock, recovery_point=recovery_point,
        log_start_offset=0, had_clean_shutdown=False, files=files,
    )  # fmt: skip
    try:
        taken = [base for base in bases if base > recovery_point]
        assert again.producer_state.snapshot_offsets()[-len(taken) :] == taken
        assert decode_snapshot(torn.read_bytes())  # written again, whole: the producer in it
        assert sorted(name for name, _ in files.snapshots()) == [
            f"{base:020d}.snapshot" for base in taken
        ]  # and fsynced before the log is served
        retried = append(again, _idempotent(58))
        assert retried.duplicate
    finally:
        again.close()
