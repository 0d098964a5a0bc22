from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import errno
import fcntl
import gc
import os
import shutil
import threading
import weakref
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from brokers.common.clock import ManualClock
from brokers.log.checkpoints import read_offsets
from brokers.log.config import LogConfig
from brokers.log.errors import LogDirError
from brokers.log.file_ops import FileOps
from brokers.log.log_manager import CLEAN_SHUTDOWN_MARKER, LogManager
from tests.polling import wait_until
from tests.unit.log.partition_helpers import append, make_batch, read_all

pytestmark = pytest.mark.unit

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=128, file_delete_delay_ms=1000)


def manager(log_dir: Path, clock: ManualClock, config: LogConfig = CONFIG) -> LogManager:
    started = LogManager(log_dir, clock=clock, default_config=config)
    started.startup()
    return started


def test_create_append_shutdown_and_restart_cleanly(tmp_path: Path) -> None:
    clock = ManualClock()
    first = manager(tmp_path, clock)
    orders = first.create("orders", 0)
    assert first.create("orders", 0) is orders
    first.create("orders", 1)
    for _ in range(30):
        append(orders, make_batch(2))
    orders.delete_records_before(5)
    stored = read_all(orders)
    first.shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()
    assert read_offsets(tmp_path / "recovery-point-offset-checkpoint") == {
        ("orders", 0): 60,
        ("orders", 1): 0,
    }
    assert read_offsets(tmp_path / "log-start-offset-checkpoint")[("orders", 0)] == 5

    second = manager(tmp_path, clock)
    assert not (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()  # a crash from now on is unclean
    reopened = second.get("orders", 0)
    assert reopened is not None and read_all(reopened) == stored
    assert reopened.log_start_offset == 5 and reopened.recovery_point == 60
    assert {(lg.topic, lg.partition) for lg in second.logs()} == {("orders", 0), ("orders", 1)}
    assert second.get("orders", 2) is None
    second.shutdown()


def test_restart_after_a_crash_recovers(tmp_path: Path) -> None:
    clock = ManualClock()
    first = manager(tmp_path, clock)
    log = first.create("t", 0)
    for _ in range(10):
        append(log, make_batch(1))
    path = log.active_segment.records.path
    first.checkpoint()
    # crash: no shutdown; a torn write leaves half a batch at the end
    with path.open("ab") as f:
        f.write(make_batch(1)[:40])
    log.release()
    assert first._lock_fd is not None  # the crashed process's lock dies with it
    fcntl.flock(first._lock_fd, fcntl.LOCK_UN)
    second = manager(tmp_path, clock)
    recovered = second.get("t", 0)
    assert recovered is not None and recovered.log_end_offset == 10
    assert recovered.active_segment.size == path.stat().st_size
    second.shutdown()


def test_log_dir_is_locked_against_a_second_manager(tmp_path: Path) -> None:
    clock = ManualClock()
    first = manager(tmp_path, clock)
    with pytest.raises(LogDirError, match="locked"):
        manager(tmp_path, clock)
    first.shutdown()
    manager(tmp_path, clock).shutdown()  # the lock is released on shutdown


def test_a_file_is_not_a_log_dir(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    with pytest.raises(LogDirError, match="not a directory"):
        manager(not_a_dir, ManualClock())


def test_delete_renames_then_removes_after_the_delay(tmp_path: Path) -> None:
    clock = ManualClock()
    logs = manager(tmp_path, clock)
    doomed = logs.create("gone", 3)
    append(doomed, make_batch(1))
    region = doomed.read(0, 100).region
    assert region is not None
    assert logs.delete("gone", 3)
    assert logs.get("gone", 3) is None
    renamed = [p.name for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert len(renamed) == 1 and renamed[0].startswith("gone-3.")
    assert region.read()  # in-flight fetches can still send it
    fresh = logs.create("gone", 3)  # the name is free again
    assert fresh.log_end_offset == 0
    clock.advance(999)
    logs.run_delayed_deletes()
    assert (tmp_path / renamed[0]).exists()
    clock.advance(1)
    removed_by: list[str] = []
    remove = shutil.rmtree

    def recorded(path: Path, ignore_errors: bool = False) -> None:
        removed_by.append(threading.current_thread().name)
        remove(path, ignore_errors=ignore_errors)

    with mock.patch("brokers.log.log_manager.shutil.rmtree", recorded):
        assert logs.run_delayed_deletes() == 1
        wait_until(lambda: not (tmp_path / renamed[0]).exists(), what="the directory removed")
    assert removed_by and all(name.startswith("pier-log-files") for name in removed_by)
    logs.shutdown()


def _descriptors_under(directory: Path) -> list[str]:
    """This process's open descriptors naming a file under `directory`."""
    names = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            names.append(os.readlink(f"/proc/self/fd/{fd}"))
    return [name for name in names if name.startswith(str(directory))]


def test_a_deleted_log_is_dropped_at_once_a_region_in_flight_keeps_its_file(
    tmp_path: Path,
) -> None:
    """Nothing of a deleted log stays alive for file.delete.delay.ms (a topic churn kept ~40
    objects a partition for the collector to scan): freed by reference counting alone, its
    descriptors closed, except the one an in-flight region holds until it is dropped."""
    logs = manager(tmp_path, ManualClock())
    doomed = logs.create("gone", 0)
    for _ in range(30):
        append(doomed, make_batch(2))
    assert doomed.number_of_segments > 2
    region = doomed.read(0, 100).region
    assert region is not None
    expected = region.read()
    freed = weakref.ref(doomed)
    collecting = gc.isenabled()
    gc.disable()  # no cycle may be needed to free it
    try:
        assert logs.delete("gone", 0)
        del doomed
        assert freed() is None
    finally:
        if collecting:
            gc.enable()
    (renamed,) = [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert region.read() == expected  # the fetch in flight still sends it
    assert len(_descriptors_under(renamed)) == 1
    del region
    assert _descriptors_under(renamed) == []
    logs.shutdown()
    assert not renamed.exists()  # a clean stop removes what was waiting for its delay


def test_deleted_directories_go_in_the_order_their_delays_end(tmp_path: Path) -> None:
    clock = ManualClock()
    logs = manager(tmp_path, clock)
    logs.create("slow", 0, dataclasses.replace(CONFIG, file_delete_delay_ms=5000))
    logs.create("fast", 0, dataclasses.replace(CONFIG, file_delete_delay_ms=1000))
    assert logs.delete("slow", 0) and logs.delete("fast", 0)

    def waiting() -> set[str]:
        return {p.name.split(".")[0] for p in tmp_path.iterdir() if p.name.endswith("-delete")}

    assert waiting() == {"slow-0", "fast-0"}
    clock.advance(1000)
    assert logs.run_delayed_deletes() == 1
    wait_until(lambda: waiting() == {"slow-0"}, what="the fast topic's directory removed")
    clock.advance(3999)
    assert logs.run_delayed_deletes() == 0
    clock.advance(1)
    assert logs.run_delayed_deletes() == 1
    wait_until(lambda: waiting() == set(), what="the slow topic's directory removed")
    logs.shutdown()


def test_startup_removes_leftover_delete_dirs_and_ignores_strangers(tmp_path: Path) -> None:
    (tmp_path / "old-0.abc-delete").mkdir()
    (tmp_path / "lost+found").mkdir()
    logs = manager(tmp_path, ManualClock())
    assert not (tmp_path / "old-0.abc-delete").exists()
    assert list(logs.logs()) == []
    logs.shutdown()


def test_corrupt_checkpoint_is_ignored(tmp_path: Path) -> None:
    (tmp_path / "recovery-point-offset-checkpoint").write_text("garbage")
    logs = manager(tmp_path, ManualClock())
    logs.create("t", 0)
    logs.checkpoint()
    assert read_offsets(tmp_path / "recovery-point-offset-checkpoint") == {("t", 0): 0}
    logs.shutdown()


def test_run_retention_and_flush(tmp_path: Path) -> None:
    clock = ManualClock()
    config = LogConfig(segment_bytes=1500, retention_ms=1000, flush_ms=5000)
    logs = manager(tmp_path, clock, config)
    log = logs.create("t", 0)
    for _ in range(40):
        append(log, make_batch(2, timestamp=clock.time_ms()))
    segments = log.number_of_segments
    assert segments > 2
    logs.run_flush()  # rolled segments get flushed (Kafka flushes on roll)
    assert log.recovery_point == log.active_segment.base_offset
    clock.advance(5000)
    logs.run_flush()  # flush.ms elapsed: everything
    assert log.recovery_point == log.log_end_offset
    assert logs.run_retention() == segments  # the expired active segment too, after a roll
    assert log.number_of_segments == 1 and log.log_start_offset == log.log_end_offset
    assert logs.run_delayed_deletes() == 0  # file.delete.delay.ms not over yet
    deleted = sorted(p.name for p in (tmp_path / "t-0").glob("*.deleted"))
    assert len(deleted) >= 3 * segments  # .log, .index, .timeindex of each
    clock.advance(config.file_delete_delay_ms)
    unlinked_by: list[str] = []
    unlink = os.unlink

    def recorded(path: Any) -> None:
        unlinked_by.append(threading.current_thread().name)
        unlink(path)

    with mock.patch("brokers.log.file_ops.os.unlink", recorded):
        assert logs.run_delayed_deletes() == segments
        wait_until(
            lambda: not list((tmp_path / "t-0").glob("*.deleted")), what="the segments unlinked"
        )
    assert len(unlinked_by) >= 3 * segments
    assert all(name.startswith("pier-log-files") for name in unlinked_by)
    logs.shutdown()


class RecordedFsyncs(FileOps):
    """Records the thread of every fsync; `fail` makes them raise EIO."""

    def __init__(self) -> None:
        self.threads: list[str] = []
        self.fail = False

    def fsync(self, fd: int) -> None:
        self.threads.append(threading.current_thread().name)
        if self.fail:
            raise OSError(errno.EIO, "simulated fsync failure")
        super().fsync(fd)


def _rolled(tmp_path: Path, files: FileOps) -> tuple[LogManager, Any]:
    logs = LogManager(tmp_path, clock=ManualClock(), default_config=CONFIG, files=files)
    logs.startup()
    log = logs.create("t", 0)
    for _ in range(40):
        append(log, make_batch(2))
    assert log.number_of_segments > 2 and log.recovery_point < log.active_segment.base_offset
    return logs, log


def test_rolled_segments_are_fsynced_off_the_loop_then_the_recovery_point_moves(
    tmp_path: Path,
) -> None:
    files = RecordedFsyncs()
    logs, log = _rolled(tmp_path, files)
    files.threads.clear()  # a roll's own writes (checkpoints) are not this test's
    try:
        asyncio.run(logs.run_flush_async())
        assert log.recovery_point == log.active_segment.base_offset
        rolled = log.number_of_segments - 1
        assert len(files.threads) >= 3 * rolled  # .log, .index, .timeindex of each
        assert all(name.startswith("pier-log-flush") for name in files.threads)
        stored = read_all(log)
    finally:
        logs.shutdown()
    again = manager(tmp_path, ManualClock())
    try:
        reopened = again.get("t", 0)
        assert reopened is not None and read_all(reopened) == stored
    finally:
        again.shutdown()


def test_a_failed_fsync_of_rolled_segments_takes_the_log_offline(tmp_path: Path) -> None:
    files = RecordedFsyncs()
    logs, log = _rolled(tmp_path, files)
    before = log.recovery_point
    files.fail = True
    try:
        asyncio.run(logs.run_flush_async())  # the failure is the log's, not the job's
        assert log.offline and log.recovery_point == before
        assert log not in logs.online_logs()
    finally:
        files.fail = False
        logs.shutdown()
