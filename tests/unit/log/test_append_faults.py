"""A storage error at any step of an append, and a crash at any step (issue 13, finding 1).

The scenario: a log holding acknowledged batches (an idempotent producer's and plain ones), then
one "target" append of two idempotent batches in a new leader epoch, timestamped so the log rolls:
that one append writes the leader-epoch checkpoint, a producer snapshot, a new segment's three
files, the `.log` and both indexes. `FaultyFiles` (faulty_files.py) fails each of those file
calls in turn (ENOSPC, EIO, torn writes, a disk that stays full) or "crashes" the process there.

What must hold (docs/storage-errors.md): a failed append raises StorageError and leaves the log as
it was (files, offsets, indexes, epochs, producer state), so the retried append lands at the same
offset exactly once; when the undo itself fails, or an fsync does, the log goes offline and takes
nothing more; after a crash at any call, recovery keeps every acknowledged batch and each target
batch once or not at all, and a retry by the idempotent producers completes it exactly once.
"""

from __future__ import annotations

import errno
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.handlers.errors import error_code_for
from brokers.log.config import LogConfig
from brokers.log.errors import LogOfflineError, StorageError
from brokers.log.log import AppendResult, Log
from brokers.log.producer_state.entry import ProducerStateEntry
from brokers.log.segment import LogSegment
from brokers.wire.errors import ErrorCode
from tests.unit.log.faulty_files import ANY, Call, FaultyFiles, SimulatedCrash
from tests.unit.log.partition_helpers import StoredBatch, headers_of, make_batch, read_all

pytestmark = pytest.mark.unit

CONFIG = LogConfig(segment_ms=10_000, index_interval_bytes=1)
T0 = 1_700_000_000_000
PRODUCER_A, PRODUCER_B = 41, 42
TARGET_EPOCH = 1
SEGMENT_SUFFIXES = (".log", ".index", ".timeindex")


def acked_batches() -> list[bytes]:
    """Six batches in epoch 0: producer A's (sequences 0, 2, 4) between plain ones."""
    batches = []
    for i in range(6):
        value, timestamp = b"acked-%d" % i, T0 + i
        if i % 2 == 0:
            batches.append(
                make_batch(2, value=value, timestamp=timestamp, producer_id=PRODUCER_A,
                           producer_epoch=0, base_sequence=i)
            )  # fmt: skip
        else:
            batches.append(make_batch(1, value=value, timestamp=timestamp))
    return batches


def target_batch(producer_id: int) -> bytes:
    """Producer A's next batch (sequence 6) or producer B's first; late enough to roll."""
    first = producer_id == PRODUCER_B
    return make_batch(
        3, value=b"target-%d" % producer_id, timestamp=T0 + 20_000 + first,
        producer_id=producer_id, producer_epoch=0, base_sequence=0 if first else 6,
    )  # fmt: skip


TARGET = target_batch(PRODUCER_A) + target_batch(PRODUCER_B)


def put(log: Log, data: bytes, *, leader_epoch: int) -> AppendResult:
    return log.append_as_leader(data, headers_of(data), leader_epoch=leader_epoch)


def build(root: Path, files: FaultyFiles, config: LogConfig = CONFIG) -> Log:
    log = Log.open(
        root / "topic-0", config, clock=ManualClock(T0), had_clean_shutdown=True, files=files
    )
    for data in acked_batches():
        put(log, data, leader_epoch=0)
    return log


def reopen(root: Path, *, clean: bool, recovery_point: int = 0) -> Log:
    return Log.open(
        root / "topic-0", CONFIG, clock=ManualClock(T0), had_clean_shutdown=clean,
        recovery_point=recovery_point,
    )  # fmt: skip


@dataclass(frozen=True)
class LogState:
    """What an undone append must leave exactly as it was."""

    log_end_offset: int
    batches: list[StoredBatch]
    segment_files: dict[str, int]  # name -> size (.log), name -> 0 (indexes: entries below)
    indexes: list[tuple[int, int, tuple[int, int], int, tuple[int, int]]]
    epochs: list[tuple[int, int]]
    producer_a: ProducerStateEntry | None
    producer_b: ProducerStateEntry | None


def state_of(log: Log) -> LogState:
    """Index files are compared by their entries: a roll writes the entries an append staged
    (index_file), so an undone roll may leave more of them written, never other ones; and an
    empty one is as good as none (a first segment's are made by their first write, which an
    undone append may have begun): beside its `.log` an index file counts by its entries only,
    without one (left by an undone roll) by its name."""
    paths = sorted(p for p in log.directory.iterdir() if p.suffix in SEGMENT_SUFFIXES)
    logs = {p.stem for p in paths if p.suffix == ".log"}
    files = {
        p.name: p.stat().st_size if p.suffix == ".log" else 0
        for p in paths
        if p.suffix == ".log" or p.stem not in logs
    }
    for segment in log.segments:
        assert_index_files_hold_its_entries(segment)
    producers = log.producer_state
    a, b = producers.last_entry(PRODUCER_A), producers.last_entry(PRODUCER_B)
    indexes = [
        (s.base_offset, s.offset_index.entries, s.offset_index.last_entry(),
         s.time_index.entries, s.time_index.last_entry())
        for s in log.segments
    ]  # fmt: skip
    return LogState(
        log.log_end_offset, read_all(log), files, indexes, log.leader_epoch_cache.entries(),
        a.copy() if a else None, b.copy() if b else None,
    )  # fmt: skip


def on_disk_bytes(path: Path) -> bytes:
    """An index file's bytes; none when it is not made yet (a log's first segment's indexes
    are made once it holds data: index_file)."""
    return path.read_bytes() if path.exists() else b""


def assert_index_files_hold_its_entries(segment: LogSegment) -> None:
    """What the index files hold on disk is a prefix of the segment's entries."""
    offsets = segment.offset_index
    on_disk = struct.iter_unpack(">ii", on_disk_bytes(offsets.path))
    for number, (relative, position) in enumerate(on_disk):
        offset = segment.base_offset + relative
        assert number < offsets.entries and offsets.lookup(offset) == (offset, position), (
            f"{offsets.path.name} holds ({offset}, {position}), not an entry in memory"
        )
    times = segment.time_index
    for number, (timestamp, relative) in enumerate(
        struct.iter_unpack(">qi", on_disk_bytes(times.path))
    ):
        entry = (timestamp, segment.base_offset + relative)
        assert number < times.entries and times.lookup(timestamp) == entry, (
            f"{times.path.name} holds {entry}, not an entry in memory"
        )


def reference_calls(root: Path) -> list[Call]:
    """The file calls of the target append when nothing fails."""
    files = FaultyFiles()
    log = build(root, files)
    start = len(files.calls)
    put(log, TARGET, leader_epoch=TARGET_EPOCH)
    calls = files.calls[start:]
    log.close()
    return calls


def target_calls(tmp_path: Path) -> list[Call]:
    calls = reference_calls(tmp_path / "reference")
    # Guard against a scenario that no longer reaches every step it is meant to test.
    for step in (
        Call("write", "leader-epoch-checkpoint.tmp"), Call("rename", "leader-epoch-checkpoint"),
        Call("pwritev", "00000000000000000009.log"), Call("write", "00000000000000000000.index"),
        Call("write", "00000000000000000000.timeindex"),
        Call("write", "00000000000000000009.snapshot.tmp"),
        Call("open", "00000000000000000009.timeindex"),
    ):  # fmt: skip
        assert step in calls, f"the target append no longer makes {step}; it makes {calls}"
    return calls


def bodies(batches: list[StoredBatch]) -> list[bytes]:
    return [b.body for b in batches]


def target_bodies() -> list[bytes]:
    """What the two target batches hold after their 61-byte headers (never rewritten)."""
    return [batch[61:] for batch in (target_batch(PRODUCER_A), target_batch(PRODUCER_B))]


def assert_once_each(log: Log, acked: list[StoredBatch], what: str) -> None:
    """Acknowledged batches unchanged at their offsets, then each target batch exactly once."""
    stored = read_all(log)
    assert stored[: len(acked)] == acked, f"{what}: acknowledged batches changed or lost"
    rest = bodies(stored[len(acked) :])
    assert sorted(rest) == sorted(target_bodies()), (
        f"{what}: after the acknowledged batches expected each target batch once, "
        f"found {len(rest)} batches: {rest}"
    )
    offsets = [o for b in stored for o in range(b.base_offset, b.last_offset + 1)]
    assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), (
        f"{what}: offsets are not unique and contiguous: {offsets}"
    )


# -- a failure at every call of the append: undone, retried once -------------------------------


@pytest.mark.parametrize("error", [errno.ENOSPC, errno.EIO])
def test_a_failure_at_any_call_of_an_append_leaves_the_log_as_it_was(
    tmp_path: Path, error: int
) -> None:
    calls = target_calls(tmp_path)
    for k, call in enumerate(calls, start=1):
        root = tmp_path / f"fail-{k}"
        files = FaultyFiles()
        log = build(root, files)
        before = state_of(log)
        files.fail(ANY, nth=k, error=error, torn=True)
        with pytest.raises(StorageError) as raised:
            put(log, TARGET, leader_epoch=TARGET_EPOCH)
        what = f"error {errno.errorcode[error]} at call {k}/{len(calls)} {call}"
        assert files.failed == [call], f"{what}: the fault hit {files.failed}"
        assert not isinstance(raised.value, LogOfflineError), f"{what}: {raised.value}"
        message = str(raised.value)  # what the client reads: the error, not the server's files
        assert os.strerror(error) in message, f"{what}: client message {message!r}"
        assert call.name == log.directory.name or call.name not in message, (
            f"{what}: client message {message!r} names a file"
        )
        assert state_of(log) == before, f"{what}: the log changed"
        assert not [p.name for p in log.directory.glob("*.tmp")], f"{what}: .tmp files left"
        # The producer's retry lands where the failed append would have, once.
        retried = put(log, TARGET, leader_epoch=TARGET_EPOCH)
        assert (retried.first_offset, retried.duplicate) == (before.log_end_offset, False), what
        assert_once_each(log, before.batches, f"{what}, after the retry")
        log.close()
        assert_once_each(reopen(root, clean=True), before.batches, f"{what}, after a restart")


def test_a_disk_that_stays_full_refuses_every_append_until_space_is_back(tmp_path: Path) -> None:
    """The issue's case: later produces to a full disk must not append behind a failed one.
    Index writes fail from now on (the roll's write of the old segment's staged entries)."""
    files = FaultyFiles()
    log = build(tmp_path, files)
    before = state_of(log)
    files.fail("write", name_suffix=".index", sticky=True)
    for attempt in range(1, 6):
        with pytest.raises(StorageError):
            put(log, TARGET, leader_epoch=TARGET_EPOCH)
        assert state_of(log) == before, f"attempt {attempt} on a full disk changed the log"
    assert len(files.failed) == 5, f"{len(files.failed)} index writes failed, expected 5"
    files.heal()  # space is back: the partition takes writes again, no restart needed
    assert put(log, TARGET, leader_epoch=TARGET_EPOCH).first_offset == before.log_end_offset
    log.close()
    reopened = reopen(tmp_path, clean=True)
    assert_once_each(reopened, before.batches, "after space came back and a restart")
    assert reopened.producer_state.last_entry(PRODUCER_A) is not None


def test_a_follower_append_failure_is_undone_too(tmp_path: Path) -> None:
    files = FaultyFiles()
    leader_dir, follower = tmp_path / "leader", build(tmp_path / "follower", files)
    leader = build(leader_dir, FaultyFiles())
    put(leader, TARGET, leader_epoch=TARGET_EPOCH)
    fetched = leader.read(follower.log_end_offset, 1 << 20)
    assert fetched.region is not None
    data = fetched.region.read()
    before = state_of(follower)
    files.fail("pwritev", name_suffix=".log", torn=True)
    with pytest.raises(StorageError):
        follower.append_as_follower(data, headers_of(data))
    assert state_of(follower) == before, "a failed follower append changed the log"
    follower.append_as_follower(data, headers_of(data))
    assert read_all(follower) == read_all(leader)
    assert follower.leader_epoch_cache.entries() == leader.leader_epoch_cache.entries()


# -- the undo itself fails, or an fsync fails: offline until restart ---------------------------


def test_when_the_undo_fails_the_log_goes_offline_and_takes_nothing_more(tmp_path: Path) -> None:
    """A torn `.log` write in the active segment that cannot be cut back (ftruncate fails too):
    nothing may ever be appended after the half batch; the restart's recovery cuts it."""
    files = FaultyFiles()
    log = build(tmp_path, files)
    before = state_of(log)
    files.fail("pwritev", name_suffix=".log", torn=True)
    files.fail("truncate", name_suffix=".log", error=errno.EIO, sticky=True)
    with pytest.raises(LogOfflineError):
        put(log, make_batch(3, value=b"half", timestamp=T0 + 10), leader_epoch=0)  # no roll
    torn_size = sum(p.stat().st_size for p in tmp_path.glob("topic-0/*.log"))
    assert torn_size > sum(v for k, v in before.segment_files.items() if k.endswith(".log")), (
        f"the scenario needs half a batch left on disk ({torn_size} bytes of .log)"
    )
    files.heal()  # even once the device works again: offline until restart
    assert log.offline
    for attempt in (lambda: put(log, make_batch(1), leader_epoch=1), lambda: log.read(0, 1000)):
        with pytest.raises(LogOfflineError):
            attempt()
    with pytest.raises(LogOfflineError):
        log.close()  # releases without writing a snapshot or final index entries
    assert not (log.directory / f"{before.log_end_offset:020d}.snapshot").exists()
    assert sum(p.stat().st_size for p in tmp_path.glob("topic-0/*.log")) == torn_size
    reopened = reopen(tmp_path, clean=False)
    assert read_all(reopened) == before.batches, "recovery kept part of the torn batch"
    assert put(reopened, TARGET, leader_epoch=TARGET_EPOCH).first_offset == before.log_end_offset


def test_a_failed_fsync_takes_the_log_offline(tmp_path: Path) -> None:
    """After a failed fsync the kernel may have dropped the dirty pages: nothing written since
    the last good one can be trusted, so (like Kafka's log dir) the log stops until restart."""
    files = FaultyFiles()
    log = build(tmp_path, files, LogConfig(segment_ms=10_000, index_interval_bytes=1,
                                           flush_messages=1))  # fmt: skip
    before = state_of(log)
    files.fail("fsync", name_suffix=".log", error=errno.EIO)
    with pytest.raises(LogOfflineError):
        put(log, TARGET, leader_epoch=TARGET_EPOCH)
    with pytest.raises(LogOfflineError):
        put(log, make_batch(1), leader_epoch=TARGET_EPOCH)
    with pytest.raises(LogOfflineError):
        log.close()
    reopened = reopen(tmp_path, clean=False, recovery_point=before.log_end_offset)
    assert_once_each(reopened, before.batches, "after a failed fsync and a restart")


def test_storage_errors_answer_kafka_storage_error() -> None:
    for error in (StorageError("disk full"), LogOfflineError("offline")):
        code = error_code_for(error)
        assert code is ErrorCode.kafka_storage_error, f"{type(error).__name__} answers {code!r}"


# -- a crash at every call of the append: recovery keeps each batch once or not at all ---------


@pytest.mark.parametrize("torn", [False, True], ids=["clean-cut", "torn-write"])
def test_recovery_after_a_crash_at_any_call_keeps_each_batch_once_or_not_at_all(
    tmp_path: Path, torn: bool
) -> None:
    calls = target_calls(tmp_path)
    for k, call in enumerate(calls, start=1):
        root = tmp_path / f"crash-{k}"
        files = FaultyFiles()
        log = build(root, files)
        before = state_of(log)
        files.crash_at(k, torn=torn)
        with pytest.raises(SimulatedCrash):
            put(log, TARGET, leader_epoch=TARGET_EPOCH)
        log.release()  # the dead process writes nothing more (FaultyFiles drops every call)
        what = f"crash at call {k}/{len(calls)} {call}{' (torn)' if torn else ''}"
        reopened = reopen(root, clean=False, recovery_point=before.log_end_offset)
        stored = read_all(reopened)
        assert stored[: len(before.batches)] == before.batches, f"{what}: acknowledged data lost"
        kept = bodies(stored[len(before.batches) :])
        assert kept == target_bodies()[: len(kept)], f"{what}: recovery kept {kept}"
        epochs = reopened.leader_epoch_cache.entries()
        assert all(start <= reopened.log_end_offset for _, start in epochs), (
            f"{what}: epochs {epochs} past the log end {reopened.log_end_offset}"
        )
        # Each idempotent producer retries its batch: a duplicate if it survived, else appended.
        for producer_id in (PRODUCER_A, PRODUCER_B):
            put(reopened, target_batch(producer_id), leader_epoch=TARGET_EPOCH)
        assert_once_each(reopened, before.batches, f"{what}, after the producers' retries")
        latest = reopened.leader_epoch_cache.latest_entry()
        assert latest == (TARGET_EPOCH, before.log_end_offset), (
            f"{what}: epoch {TARGET_EPOCH} should start at {before.log_end_offset}, cache {latest}"
        )
