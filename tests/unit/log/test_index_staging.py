"""Index entries are staged in memory and written 8 KiB at a time, at a flush, a roll or a close
(brokers/log/index_file.py), so appends open no index file and a partition holds 1 descriptor.

What must hold: appends below the stage limit make no index call at all; crossing it writes once;
a clean close writes every entry, so a clean restart loads them without rebuilding; after a crash
(entries never written) the restart rebuilds the unflushed segments' indexes from the log and
lookups find what they found before; a flush writes the segment's entries with its fsync; a
release (the log is being deleted, or went offline) writes nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.config import LogConfig
from brokers.log.index_file import STAGE_LIMIT
from brokers.log.log import Log
from brokers.log.offset_index import ENTRY_SIZE
from tests.unit.log.faulty_files import FaultyFiles
from tests.unit.log.partition_helpers import append, make_batch, read_all

pytestmark = pytest.mark.unit

T0 = 1_700_000_000_000
CONFIG = LogConfig(index_interval_bytes=1)  # an entry for every batch after the first


def _open(root: Path, files: FaultyFiles | None = None, **kwargs: object) -> Log:
    return Log.open(
        root / "topic-0", CONFIG, clock=ManualClock(T0), files=files or FaultyFiles(),
        **kwargs,  # type: ignore[arg-type]
    )  # fmt: skip


def _index_calls(files: FaultyFiles, start: int = 0) -> list[str]:
    return [
        f"{c.op} {c.name}" for c in files.calls[start:] if c.name.endswith((".index", ".timeindex"))
    ]


def _lookups(log: Log) -> list[tuple[int, int]]:
    index = log.active_segment.offset_index
    return [index.lookup(offset) for offset in range(log.log_end_offset)]


def test_appends_below_the_stage_limit_touch_no_index_file(tmp_path: Path) -> None:
    files = FaultyFiles()
    log = _open(tmp_path, files)
    try:
        start = len(files.calls)
        batches = STAGE_LIMIT // ENTRY_SIZE  # one entry each after the first
        for _ in range(batches):
            append(log, make_batch(1))
        assert log.active_segment.offset_index.entries == batches - 1
        assert _index_calls(files, start) == []
        append(log, make_batch(1))  # the offset index's staged entries reach the limit
        written = ["open 00000000000000000000.index", "write 00000000000000000000.index"]
        assert _index_calls(files, start) == written
        assert log.active_segment.offset_index.path.stat().st_size == STAGE_LIMIT
    finally:
        log.close()


def _filled(root: Path) -> tuple[Log, list[tuple[int, int]], int]:
    """A log of 50 batches, its lookups and its offset index's entry count."""
    log = _open(root)
    for _ in range(50):
        append(log, make_batch(2))
    return log, _lookups(log), log.active_segment.offset_index.entries


def test_a_clean_close_writes_every_entry_and_a_clean_restart_loads_them(tmp_path: Path) -> None:
    log, before, entries = _filled(tmp_path)
    log.close()
    assert (tmp_path / "topic-0" / f"{0:020d}.index").stat().st_size == entries * ENTRY_SIZE
    files = FaultyFiles()
    log = _open(tmp_path, files, had_clean_shutdown=True, recovery_point=10**6)
    try:
        assert log.active_segment.offset_index.entries == entries
        assert _lookups(log) == before
        assert not [c for c in files.calls if c.op == "truncate"]  # nothing rebuilt or cut
    finally:
        log.close()


def test_after_a_crash_the_restart_rebuilds_the_entries_never_written(tmp_path: Path) -> None:
    log, before, entries = _filled(tmp_path)
    log.release()  # the process dies: staged entries are lost, nothing more is written
    index = tmp_path / "topic-0" / f"{0:020d}.index"
    assert not index.exists() or index.stat().st_size == 0  # no entry reached the disk
    log = _open(tmp_path, had_clean_shutdown=False, recovery_point=0)
    try:
        assert log.active_segment.offset_index.entries == entries
        assert _lookups(log) == before
        assert len(read_all(log)) == 50
    finally:
        log.close()


def test_a_flush_writes_the_entries_so_a_crash_after_it_keeps_them(tmp_path: Path) -> None:
    log = _open(tmp_path)
    for _ in range(20):
        append(log, make_batch(2))
    log.roll()  # the old segment's entries are written at the roll
    for _ in range(20):
        append(log, make_batch(2))
    log.flush()
    flushed = log.log_end_offset
    for _ in range(5):
        append(log, make_batch(2))
    first = log.segments[0]
    old_entries, active_entries = (
        first.offset_index.entries,
        log.active_segment.offset_index.entries,
    )
    before = _lookups(log)
    log.release()
    index_sizes = [p.stat().st_size for p in sorted((tmp_path / "topic-0").glob("*.index"))]
    assert index_sizes == [old_entries * ENTRY_SIZE, (active_entries - 5) * ENTRY_SIZE]
    log = _open(tmp_path, had_clean_shutdown=False, recovery_point=flushed)
    try:
        assert log.segments[0].offset_index.entries == old_entries
        assert log.active_segment.offset_index.entries == active_entries  # rebuilt past flushed
        assert _lookups(log) == before
    finally:
        log.close()
