"""The log dir's side of storage failures (docs/storage-errors.md): an offline log is left alone
by the periodic duties, the other logs keep working, and a shutdown with an offline log writes no
clean-shutdown marker, so the restart recovers it (a torn tail is cut, nothing duplicated)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.config import LogConfig
from brokers.log.errors import LogOfflineError
from brokers.log.log_manager import CLEAN_SHUTDOWN_MARKER, LogManager
from tests.unit.log.faulty_files import FaultyFiles
from tests.unit.log.partition_helpers import append, make_batch, read_all

pytestmark = pytest.mark.unit

CONFIG = LogConfig(index_interval_bytes=128, flush_ms=0)


def manager(log_dir: Path, files: FaultyFiles | None = None) -> LogManager:
    started = LogManager(
        log_dir, clock=ManualClock(), default_config=CONFIG, files=files or FaultyFiles()
    )
    started.startup()
    return started


def test_an_offline_log_is_skipped_and_the_restart_recovers_it(tmp_path: Path) -> None:
    files = FaultyFiles()
    first = manager(tmp_path, files)
    broken, healthy = first.create("broken", 0), first.create("healthy", 0)
    for log in (broken, healthy):
        for i in range(5):
            append(log, make_batch(2, value=b"acked-%d" % i))
    acked = read_all(broken)
    first.run_flush()  # flush.ms=0: every run fsyncs both logs
    # A torn write that cannot be cut back: `broken` goes offline with half a batch on disk.
    files.fail("pwritev", name_suffix=".log", torn=True)
    files.fail("truncate", name_suffix=".log", error=errno.EIO, sticky=True)
    with pytest.raises(LogOfflineError):
        append(broken, make_batch(3, value=b"torn"))
    files.heal()
    assert broken.offline and not healthy.offline
    assert first.online_logs() == [healthy]
    append(healthy, make_batch(1, value=b"after"))
    fsyncs = len([c for c in files.calls if c.op == "fsync"])
    first.run_flush()
    first.run_retention()
    assert len([c for c in files.calls if c.op == "fsync"]) > fsyncs, "healthy was not flushed"
    assert healthy.recovery_point == healthy.log_end_offset == 11
    first.shutdown()
    assert not (tmp_path / CLEAN_SHUTDOWN_MARKER).exists(), "an offline log was marked clean"

    second = manager(tmp_path)
    recovered, other = second.get("broken", 0), second.get("healthy", 0)
    assert recovered is not None and other is not None
    assert read_all(recovered) == acked, "recovery kept part of the torn batch"
    assert append(recovered, make_batch(1)).first_offset == 10
    assert other.log_end_offset == 11
    second.shutdown()
    assert (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()


def test_a_failed_checkpoint_at_shutdown_leaves_the_shutdown_unclean(tmp_path: Path) -> None:
    files = FaultyFiles()
    first = manager(tmp_path, files)
    append(first.create("t", 0), make_batch(2))
    files.fail("write", name_suffix="recovery-point-offset-checkpoint.tmp")
    first.shutdown()
    assert files.failed, "the checkpoint write was not reached"
    assert not (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()
    second = manager(tmp_path)
    reopened = second.get("t", 0)
    assert reopened is not None and reopened.log_end_offset == 2
    second.shutdown()
