"""Leader-epoch checkpoints written as one batch (`batched_writes`, `write_all`): deferred to the
end of the block, each file once, every file and directory fsynced, failures per file."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from brokers.log.checkpoints import LEADER_EPOCH_FORMAT, CheckpointFile
from brokers.log.leader_epoch_cache import CHECKPOINT_NAME, LeaderEpochCache, batched_writes
from tests.unit.log.faulty_files import Call, FaultyFiles

pytestmark = pytest.mark.unit


def _caches(root: Path, files: FaultyFiles, count: int) -> list[LeaderEpochCache]:
    caches = []
    for partition in range(count):
        directory = root / f"t-{partition}"
        directory.mkdir()
        caches.append(LeaderEpochCache(directory / CHECKPOINT_NAME, files))
    return caches


def _on_disk(cache: LeaderEpochCache) -> list[tuple[int, int]]:
    return CheckpointFile(cache.checkpoint_path, LEADER_EPOCH_FORMAT).read()


def test_writes_wait_for_the_end_of_the_block_and_each_file_is_written_once(
    tmp_path: Path,
) -> None:
    files = FaultyFiles()
    caches = _caches(tmp_path, files, 20)
    with batched_writes() as failures:
        for cache in caches:
            cache.assign(3, 0)
        caches[0].assign(4, 7)  # a second change to one cache: still one write
        with batched_writes():  # a nested block joins the outer one
            caches[1].assign(5, 2)
        assert not any(cache.checkpoint_path.exists() for cache in caches)
        assert files.calls == []
    assert failures == {}
    assert _on_disk(caches[0]) == [(3, 0), (4, 7)]
    assert _on_disk(caches[1]) == [(3, 0), (5, 2)]
    assert all(_on_disk(cache) == [(3, 0)] for cache in caches[2:])
    # Durable as a lone write: each temp file and each directory fsynced, once.
    fsyncs = sorted(call.name for call in files.calls if call.op == "fsync")
    expected = [f"t-{p}" for p in range(20)] + [f"{CHECKPOINT_NAME}.tmp"] * 20
    assert fsyncs == sorted(expected)
    assert not list(tmp_path.glob("*/*.tmp"))


def test_outside_a_block_a_change_is_written_at_once(tmp_path: Path) -> None:
    (cache,) = _caches(tmp_path, FaultyFiles(), 1)
    cache.assign(2, 0)
    assert _on_disk(cache) == [(2, 0)]


def test_a_failed_directory_fsync_fails_only_that_file(tmp_path: Path) -> None:
    files = FaultyFiles()
    caches = _caches(tmp_path, files, 3)
    files.fail("fsync", name_suffix="t-1", error=errno.EIO)
    with batched_writes() as failures:
        for cache in caches:
            cache.assign(1, 0)
    assert list(failures) == [caches[1].checkpoint_path]
    assert failures[caches[1].checkpoint_path].errno == errno.EIO
    assert _on_disk(caches[0]) == _on_disk(caches[2]) == [(1, 0)]
    assert caches[1].entries() == [(1, 0)]  # in memory it stays, as after a failed lone write


def test_a_failed_temp_file_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    files = FaultyFiles()
    caches = _caches(tmp_path, files, 3)
    for cache in caches:
        cache.assign(1, 0)
    files.fail("write", nth=2, error=errno.ENOSPC)  # the second temp file's write
    with batched_writes() as failures:
        for cache in caches:
            cache.assign(2, 5)
    assert list(failures) == [caches[1].checkpoint_path]
    assert _on_disk(caches[1]) == [(1, 0)]
    assert _on_disk(caches[0]) == _on_disk(caches[2]) == [(1, 0), (2, 5)]
    assert not list(tmp_path.glob("*/*.tmp"))
    assert Call("unlink", f"{CHECKPOINT_NAME}.tmp") in files.calls
