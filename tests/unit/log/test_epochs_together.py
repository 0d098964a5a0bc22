"""`assign_epochs_together`: the first appends to many partitions in a new leader epoch write
their epoch checkpoints in one batch before any data, and a checkpoint that fails leaves its
partition's append to fail alone, as it did before.

Real logs on disk (tmp_path); `FaultyFiles` (faulty_files.py) records and fails file calls.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.config import LogConfig
from brokers.log.errors import StorageError
from brokers.log.leader_epoch_cache import CHECKPOINT_NAME, LeaderEpochCache
from brokers.log.log import Log, assign_epochs_together
from tests.unit.log.faulty_files import FaultyFiles
from tests.unit.log.partition_helpers import headers_of, make_batch

pytestmark = pytest.mark.unit
T0 = 1_700_000_000_000


def _open(root: Path, index: int, files: FaultyFiles) -> Log:
    return Log.open(
        root / f"topic-{index}", LogConfig(), clock=ManualClock(T0), had_clean_shutdown=True,
        files=files,
    )  # fmt: skip


def _append(log: Log, epoch: int) -> int:
    data = make_batch(2, value=b"v", timestamp=T0)
    return log.append_as_leader(data, headers_of(data), leader_epoch=epoch).first_offset


def _on_disk(log: Log) -> list[tuple[int, int]]:
    return LeaderEpochCache(log.directory / CHECKPOINT_NAME).entries()


def test_new_epochs_are_written_before_the_appends_which_then_write_none(tmp_path: Path) -> None:
    files = [FaultyFiles() for _ in range(3)]
    logs = [_open(tmp_path, i, f) for i, f in enumerate(files)]
    _append(logs[2], 0)  # already in epoch 0: nothing to assign for it
    assign_epochs_together([(log, 0) for log in logs])
    assert [log.leader_epoch_cache.entries() for log in logs] == [[(0, 0)], [(0, 0)], [(0, 0)]]
    assert [_on_disk(log) for log in logs] == [[(0, 0)], [(0, 0)], [(0, 0)]]
    before = [len(f.calls) for f in files]
    assert [_append(log, 0) for log in logs] == [0, 0, 2]
    written = [c for f, n in zip(files, before, strict=True) for c in f.calls[n:]]
    assert not [c for c in written if CHECKPOINT_NAME in c.name], written
    for log in logs:
        log.close()


def test_a_failed_checkpoint_is_left_to_its_append_which_fails_alone(tmp_path: Path) -> None:
    good_files, bad_files = FaultyFiles(), FaultyFiles()
    good, bad = _open(tmp_path, 0, good_files), _open(tmp_path, 1, bad_files)
    bad_files.fail("fsync", name_suffix=CHECKPOINT_NAME + ".tmp", error=errno.EIO, sticky=True)
    assign_epochs_together([(good, 0), (bad, 0)])
    assert good.leader_epoch_cache.entries() == [(0, 0)]
    assert bad.leader_epoch_cache.entries() == []  # back as it was: the append will try again
    assert _append(good, 0) == 0
    with pytest.raises(StorageError):
        _append(bad, 0)
    assert bad.log_end_offset == 0
    bad_files.heal()
    assert _append(bad, 0) == 0
    assert _on_disk(bad) == [(0, 0)]
    good.close()
    bad.close()
