"""Review s36 (H4) of "only the active segment holds descriptors" (brokers/log/file_records.py):
an inactive segment opens its `.log` on demand, so a full descriptor table (EMFILE) can now refuse
a step in the middle of a multi-step log operation. A StorageError promises the log is as it was
(brokers/log/errors.py, docs/storage-errors.md); anything else must take the log offline.
"""

from __future__ import annotations

import contextlib
import errno
from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.config import LogConfig
from brokers.log.errors import LogError, LogOfflineError
from brokers.log.log import Log
from tests.unit.log.faulty_files import FaultyFiles
from tests.unit.log.partition_helpers import append, make_batch, read_all

pytestmark = pytest.mark.unit

T0 = 1_700_000_000_000


def _truncated(log: Log, offset: int) -> bool:
    """Whether the follower truncation to `offset` was done (False: refused with a LogError)."""
    try:
        log.truncate_to(offset)
    except LogError:
        return False
    return True


def test_a_truncation_refused_for_want_of_a_descriptor_leaves_the_log_as_it_was(
    tmp_path: Path,
) -> None:
    """A follower truncates into an older (inactive, descriptor-less) segment while the table is
    full: the later segment must not be gone while the log end still counts its offsets."""
    files = FaultyFiles()
    log = Log.open(
        tmp_path / "topic-0", LogConfig(), clock=ManualClock(T0), recovery_point=0, files=files
    )
    try:
        append(log, make_batch(2))
        append(log, make_batch(2))
        log.roll()
        append(log, make_batch(2))
        assert log.log_end_offset == 6 and len(log.segments) == 2
        files.fail("open", name_suffix=".log", error=errno.EMFILE, sticky=True)
        truncated = _truncated(log, 2)  # into the first segment: opened to find batch 2
        files.heal()
        if not log.offline:  # done, or refused as a StorageError with nothing changed
            assert log.log_end_offset == log.active_segment.next_offset, (
                log.log_end_offset,
                [s.base_offset for s in log.segments],
            )
            assert [b.base_offset for b in read_all(log)] == ([0] if truncated else [0, 2, 4])
    finally:
        with contextlib.suppress(LogOfflineError):  # an offline log's close says so
            log.close()


def test_a_truncation_whose_replay_is_refused_midway_takes_the_log_offline(
    tmp_path: Path,
) -> None:
    """The producer-state replay after a truncation reads from the latest snapshot, which may lie
    in an older, descriptor-less segment: refused there, the segments are already cut and the
    producer state half rebuilt, so the log must go offline (docs/storage-errors.md: a follower
    truncation failing midway), not stay online forgetting an idempotent producer."""
    files = FaultyFiles()
    log = Log.open(
        tmp_path / "topic-0", LogConfig(), clock=ManualClock(T0), recovery_point=0, files=files
    )
    try:
        for sequence in range(3):  # producer 9 writes one batch per segment: 0, 1, 2
            append(log, make_batch(1, producer_id=9, producer_epoch=0, base_sequence=sequence))
            append(log, make_batch(1))
            log.roll()
        append(log, make_batch(1))
        assert [s.base_offset for s in log.segments] == [0, 2, 4, 6]
        for snapshot in tmp_path.glob("topic-0/*.snapshot"):  # replay from the log start
            snapshot.unlink()
        files.fail("open", name_suffix="00000000000000000000.log", error=errno.EMFILE, sticky=True)
        truncated = _truncated(log, 3)  # into segment 2: opened; the replay reads segment 0
        files.heal()
        if not log.offline:  # online: producer 9's state must be what the log holds
            entry = log.producer_state.last_entry(9)
            assert entry is not None and entry.last_sequence == (1 if truncated else 2), entry
    finally:
        with contextlib.suppress(LogOfflineError):
            log.close()
