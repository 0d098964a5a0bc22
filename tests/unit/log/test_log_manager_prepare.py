"""`LogManager.prepare`: a new topic's files are made on the file-maker thread, never on the
event loop (a file system that takes milliseconds per creation held every other request), the
logs over them on the loop; a creation cancelled meanwhile leaves nothing behind."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.config import LogConfig
from brokers.log.file_ops import FileOps
from brokers.log.log_manager import BACKGROUND_NICE, LogManager
from tests.polling import wait_until_async
from tests.unit.log.partition_helpers import append, make_batch, open_log, read_all

pytestmark = pytest.mark.unit
WAIT_S = 30.0
CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=128)


class HeldCreations(FileOps):
    """Creating a file waits until `release` is set; records the threads that created files."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.creating = threading.Event()
        self.threads: set[str] = set()

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        if flags & os.O_CREAT:
            self.threads.add(threading.current_thread().name)
            self.creating.set()
            if not self.release.wait(WAIT_S):
                raise TimeoutError("creation never released")
        return super().open(path, flags, mode)


def _is_set(event: threading.Event) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return event.is_set()

    return check


def _none_left(directory: Path) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return not any(directory.glob("gone-*"))

    return check


def started(tmp_path: Path, files: FileOps) -> LogManager:
    manager = LogManager(tmp_path, clock=ManualClock(), default_config=LogConfig(), files=files)
    manager.startup()
    return manager


def test_the_event_loop_runs_while_a_topics_files_are_made(tmp_path: Path) -> None:
    files = HeldCreations()
    manager = started(tmp_path, files)

    async def scenario() -> int:
        preparing = asyncio.ensure_future(manager.prepare("t", range(3), LogConfig()))
        await wait_until_async(_is_set(files.creating), what="a file being made", timeout=WAIT_S)
        turns = 0
        for _ in range(20):  # the loop keeps turning while the thread waits on the creation
            await asyncio.sleep(0)
            turns += 1
        assert not preparing.done()
        files.release.set()
        await preparing
        return turns

    try:
        assert asyncio.run(scenario()) >= 20
        assert threading.current_thread().name not in files.threads
        assert all(name.startswith("pier-log-files") for name in files.threads)
        logs = [manager.create("t", index) for index in range(3)]
        assert [lg.log_end_offset for lg in logs] == [0, 0, 0]
        assert [lg.descriptors_held for lg in logs] == [1, 1, 1]
        # one directory and one file: the indexes are made once the log holds data
        assert sorted(p.name for p in (tmp_path / "t-0").iterdir()) == ["00000000000000000000.log"]
    finally:
        files.release.set()
        manager.shutdown()


def test_prepared_logs_append_read_and_survive_a_restart_as_opened_ones(tmp_path: Path) -> None:
    clock = ManualClock()
    manager = LogManager(tmp_path, clock=clock, default_config=CONFIG)
    manager.startup()
    asyncio.run(manager.prepare("fresh", range(2), CONFIG))
    adopted = manager.create("fresh", 0)
    opened = manager.create("other", 0)  # made by Log.open, as before
    for log_ in (adopted, opened):
        for _ in range(40):  # past a roll (segment_bytes) and several index entries
            append(log_, make_batch(3))
    assert read_all(adopted) == read_all(opened)
    assert adopted.number_of_segments == opened.number_of_segments > 1
    stored = read_all(adopted)
    manager.shutdown()
    restarted = LogManager(tmp_path, clock=clock, default_config=CONFIG)
    restarted.startup()
    try:
        again = restarted.get("fresh", 0)
        assert again is not None and read_all(again) == stored
        assert again.log_end_offset == 120
        empty = restarted.get("fresh", 1)
        assert empty is not None and empty.log_end_offset == 0
    finally:
        restarted.shutdown()


def segment_files(directory: Path) -> set[str]:
    return {p.suffix for p in directory.iterdir() if p.suffix in (".log", ".index", ".timeindex")}


def test_a_prepared_log_never_written_restarts_without_making_files(tmp_path: Path) -> None:
    """A churned topic's partitions: their restart neither rebuilds nor makes index files."""
    clock = ManualClock()
    manager = LogManager(tmp_path, clock=clock, default_config=CONFIG)
    manager.startup()
    asyncio.run(manager.prepare("idle", range(2), CONFIG))
    logs = [manager.create("idle", index) for index in range(2)]
    append(logs[1], make_batch(1))  # under one index interval: no index entry yet
    manager.shutdown()
    assert segment_files(tmp_path / "idle-0") == {".log"}
    assert segment_files(tmp_path / "idle-1") == {".log", ".index", ".timeindex"}
    restarted = LogManager(tmp_path, clock=clock, default_config=CONFIG)
    restarted.startup()
    try:
        empty, written = (restarted.get("idle", index) for index in range(2))
        assert empty is not None and empty.log_end_offset == 0
        assert written is not None and written.log_end_offset == 1
        assert segment_files(tmp_path / "idle-0") == {".log"}
        append(empty, make_batch(3))
        assert [(b.base_offset, b.last_offset) for b in read_all(empty)] == [(0, 2)]
    finally:
        restarted.shutdown()


def test_a_creation_cancelled_while_files_are_made_leaves_nothing(tmp_path: Path) -> None:
    files = HeldCreations()
    manager = started(tmp_path, files)
    descriptors_before = len(os.listdir("/proc/self/fd"))

    async def scenario() -> None:
        preparing = asyncio.ensure_future(manager.prepare("gone", range(4), LogConfig()))
        await wait_until_async(_is_set(files.creating), what="a file being made", timeout=WAIT_S)
        preparing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await preparing
        files.release.set()  # the thread finishes its files; then they are removed
        await wait_until_async(_none_left(tmp_path), what="the files removed", timeout=WAIT_S)

    try:
        asyncio.run(scenario())
        assert not list(tmp_path.glob("gone-*"))
        assert manager.get("gone", 0) is None
        assert len(os.listdir("/proc/self/fd")) <= descriptors_before  # every .log closed
    finally:
        files.release.set()
        manager.shutdown()


class NiceRecorder(FileOps):
    """Records the nice value of each thread that creates a file."""

    def __init__(self) -> None:
        self.nice: dict[str, int] = {}

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        if flags & os.O_CREAT:
            me = threading.current_thread().name
            self.nice[me] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        return super().open(path, flags, mode)


def test_files_are_made_at_background_priority_and_the_loop_keeps_its_own(
    tmp_path: Path,
) -> None:
    """On a busy machine the scheduler gives the loop's thread the core before the file maker's
    (a topic churn's creations took ~1 core of kernel time here)."""
    files = NiceRecorder()
    manager = LogManager(tmp_path, clock=ManualClock(0), default_config=CONFIG, files=files)
    manager.startup()
    loop_nice = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    try:
        asyncio.run(manager.prepare("t", range(2), CONFIG))
    finally:
        manager.shutdown()
    (maker,) = [name for name in files.nice if name.startswith("pier-log-files")]
    assert files.nice[maker] == min(19, loop_nice + BACKGROUND_NICE) > loop_nice
    assert all(nice == loop_nice for name, nice in files.nice.items() if name != maker)
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == loop_nice


def test_shutdowns_write_no_snapshot_that_would_hold_nothing_new(tmp_path: Path) -> None:
    """An empty log with no producer writes no snapshot at close, and a log closed again with
    nothing appended keeps the one it has (each is a file, a write and two fsyncs)."""
    clock = ManualClock()

    def run(write: bool) -> None:
        manager = LogManager(tmp_path, clock=clock, default_config=CONFIG)
        manager.startup()
        if write:
            asyncio.run(manager.prepare("t", range(2), CONFIG))
            append(manager.create("t", 1), make_batch(2))
            manager.create("t", 0)
        manager.shutdown()

    run(write=True)
    assert not list((tmp_path / "t-0").glob("*.snapshot"))
    (written,) = (tmp_path / "t-1").glob("*.snapshot")
    assert written.name == "00000000000000000002.snapshot"
    taken = written.stat()
    run(write=False)
    again = written.stat()
    assert (again.st_ino, again.st_mtime_ns) == (taken.st_ino, taken.st_mtime_ns)
    assert not list((tmp_path / "t-0").glob("*.snapshot"))


def test_a_log_opened_over_a_new_directory_makes_one_file_until_written(tmp_path: Path) -> None:
    """The logs a restart (or a follower) makes for partitions it has no directory for yet."""
    manager = LogManager(tmp_path, clock=ManualClock(), default_config=CONFIG)
    manager.startup()
    try:
        opened = manager.create("opened", 0)
        assert segment_files(tmp_path / "opened-0") == {".log"}
        for _ in range(40):  # past a roll and several index entries
            append(opened, make_batch(3))
        assert opened.number_of_segments > 1
        for segment in opened.segments[:-1]:  # rolled: each with both indexes on disk
            assert segment.offset_index.path.exists() and segment.time_index.path.exists()
    finally:
        manager.shutdown()


def test_a_first_segment_truncated_before_its_indexes_were_made_restarts_whole(
    tmp_path: Path,
) -> None:
    """A follower's truncations of a log whose first segment never made its indexes."""
    clock = ManualClock()
    emptied = open_log(tmp_path, clock)
    append(emptied, make_batch(3))
    emptied.truncate_fully_and_start_at(0)
    append(emptied, make_batch(2))
    emptied.close()
    again = open_log(tmp_path, clock, had_clean_shutdown=True, recovery_point=2)
    assert [(b.base_offset, b.last_offset) for b in read_all(again)] == [(0, 1)]
    again.flush()
    again.truncate_to(0)
    again.close()
    last = open_log(tmp_path, clock, had_clean_shutdown=True, recovery_point=0)
    try:
        assert last.log_end_offset == 0
        append(last, make_batch(1))
        assert [(b.base_offset, b.last_offset) for b in read_all(last)] == [(0, 0)]
    finally:
        last.close()
