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
        with pytest.raises(LogError):
            log.truncate_to(2)  # into the first segment: it must be opened to find batch 2
        files.heal()
        if not log.offline:  # refused as a StorageError: nothing may have changed
            assert log.log_end_offset == log.active_segment.next_offset, (
                log.log_end_offset,
                [s.base_offset for s in log.segments],
            )
            assert [b.base_offset for b in read_all(log)] == [0, 2, 4]
    finally:
        with contextlib.suppress(LogOfflineError):  # an offline log's close says so
            log.close()
