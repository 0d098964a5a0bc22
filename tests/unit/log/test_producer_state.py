"""Idempotent producer state: duplicates, sequences, epochs, snapshots, truncation, expiry."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.common.clock import ManualClock
from brokers.log.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    LogError,
    OutOfOrderSequenceError,
)
from brokers.log.file_ops import FileOps
from brokers.log.producer_state.entry import (
    INT32_MAX,
    BatchMetadata,
    DuplicateBatch,
    ProducerStateEntry,
)
from brokers.log.producer_state.manager import ProducerStateManager
from brokers.log.producer_state.snapshot import decode_snapshot, encode_snapshot
from brokers.records.batch import CONTROL_MASK, TRANSACTIONAL_MASK, BatchHeader
from brokers.records.control import EndTxnMarker
from brokers.records.crc import crc32c

pytestmark = pytest.mark.unit

T0 = 1_700_000_000_000
HOUR_MS = 3_600_000


def header(
    *,
    pid: int = 7,
    epoch: int = 0,
    seq: int = 0,
    count: int = 1,
    offset: int = 0,
    ts: int = T0,
    transactional: bool = False,
    control: bool = False,
) -> BatchHeader:
    attributes = (TRANSACTIONAL_MASK if transactional else 0) | (CONTROL_MASK if control else 0)
    return BatchHeader(
        base_offset=offset, batch_length=49 + 10 * count, partition_leader_epoch=0, magic=2,
        crc=0, attributes=attributes, last_offset_delta=count - 1, base_timestamp=ts,
        max_timestamp=ts, producer_id=pid, producer_epoch=epoch, base_sequence=seq,
        records_count=count,
    )  # fmt: skip


class Partition:
    """The log's side of the contract: check, assign offsets, write, update."""

    def __init__(self, state: ProducerStateManager) -> None:
        self.state = state
        self.next_offset = 0
        self.written: list[BatchHeader] = []

    def append(self, batch: BatchHeader) -> DuplicateBatch | BatchHeader:
        duplicate = self.state.check(batch)
        if duplicate is not None:
            return duplicate
        assigned = batch._replace(base_offset=self.next_offset)
        self.next_offset = assigned.next_offset
        self.state.update(assigned)
        self.written.append(assigned)
        return assigned


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(time_ms=T0)


@pytest.fixture
def state(tmp_path: Path, clock: ManualClock) -> ProducerStateManager:
    return ProducerStateManager(tmp_path, clock=clock, producer_id_expiration_ms=HOUR_MS)


@pytest.fixture
def log(state: ProducerStateManager) -> Partition:
    return Partition(state)


def batches_of_three(log: Partition, n: int, *, pid: int = 7, epoch: int = 0) -> list[BatchHeader]:
    written = []
    for i in range(n):
        result = log.append(header(pid=pid, epoch=epoch, seq=3 * i, count=3, ts=T0 + i))
        assert isinstance(result, BatchHeader)
        written.append(result)
    return written


# -- sequences and duplicates -----------------------------------------------------------------


@pytest.mark.parametrize("first_seq", [0, 42])
def test_unknown_producer_is_accepted_at_any_sequence(
    state: ProducerStateManager, first_seq: int
) -> None:
    # KIP-360: Kafka 2.5+ no longer answers UNKNOWN_PRODUCER_ID for a producer it has no state for.
    assert state.check(header(seq=first_seq)) is None


def test_in_order_batches_are_accepted(log: Partition, state: ProducerStateManager) -> None:
    written = batches_of_three(log, 3)
    entry = state.last_entry(7)
    assert entry is not None
    assert entry.producer_epoch == 0
    assert (entry.first_sequence, entry.last_sequence) == (0, 8)
    assert entry.last_data_offset == written[-1].last_offset == 8
    assert entry.last_timestamp == T0 + 2
    assert state.producer_ids() == [7]


def test_each_of_the_last_five_batches_is_a_duplicate_with_its_original_offsets(
    log: Partition, state: ProducerStateManager
) -> None:
    log.append(header(pid=99, seq=0))  # another producer shifts the offsets
    written = batches_of_three(log, 5)
    entry = state.last_entry(7)
    assert entry is not None
    before = entry.copy()
    for i, original in enumerate(written):
        retry = header(seq=3 * i, count=3, ts=T0 + 100)
        assert state.check(retry) == DuplicateBatch(
            original.base_offset, original.last_offset, T0 + i
        )
    assert state.last_entry(7) == before  # check never mutates
    assert log.next_offset == 16


def test_sixth_oldest_batch_is_no_longer_a_duplicate_but_out_of_order(log: Partition) -> None:
    batches_of_three(log, 6)
    with pytest.raises(OutOfOrderSequenceError):
        log.state.check(header(seq=0, count=3))
    assert log.state.check(header(seq=3, count=3)) == DuplicateBatch(3, 5, T0 + 1)


def test_a_gap_in_sequences_is_out_of_order(log: Partition) -> None:
    batches_of_three(log, 2)
    with pytest.raises(OutOfOrderSequenceError) as info:
        log.state.check(header(seq=7))
    assert isinstance(info.value, LogError)
    with pytest.raises(OutOfOrderSequenceError):  # overlapping but not an exact retry
        log.state.check(header(seq=4, count=2))
    assert log.state.check(header(seq=6)) is None


def test_newer_epoch_must_start_at_zero_and_resets_state(log: Partition) -> None:
    batches_of_three(log, 2)
    with pytest.raises(OutOfOrderSequenceError):
        log.state.check(header(epoch=1, seq=6))
    bumped = log.append(header(epoch=1, seq=0, count=2))
    assert isinstance(bumped, BatchHeader)
    entry = log.state.last_entry(7)
    assert entry is not None and entry.producer_epoch == 1
    assert list(entry.batches) == [BatchMetadata(1, bumped.last_offset, 1, T0)]
    # an old-epoch retry is fenced, not deduplicated
    with pytest.raises(InvalidProducerEpochError):
        log.state.check(header(epoch=0, seq=0, count=3))
    assert log.state.check(header(epoch=1, seq=0, count=2)) == DuplicateBatch(6, 7, T0)


def test_older_epoch_is_fenced(log: Partition) -> None:
    log.append(header(epoch=5, seq=0))
    with pytest.raises(InvalidProducerEpochError):
        log.state.check(header(epoch=4, seq=1))


def test_sequence_wraps_around_at_int32_max(log: Partition) -> None:
    log.append(header(seq=INT32_MAX - 1, count=1))  # unknown producer: any first sequence
    log.append(header(seq=INT32_MAX, count=1))
    spanning = log.append(header(seq=0, count=3))  # 0..2 after the wrap
    assert isinstance(spanning, BatchHeader)
    assert log.state.check(header(seq=3)) is None
    with pytest.raises(OutOfOrderSequenceError):
        log.state.check(header(seq=1))
    # a batch that itself crosses the wrap: INT32_MAX-1, INT32_MAX, 0
    other = Partition(log.state)
    other.next_offset = 100
    crossing = other.append(header(pid=8, seq=INT32_MAX - 1, count=3))
    assert isinstance(crossing, BatchHeader) and crossing.last_sequence == 0
    assert log.state.check(header(pid=8, seq=1)) is None
    assert log.state.check(header(pid=8, seq=INT32_MAX - 1, count=3)) == DuplicateBatch(
        100, 102, T0
    )


def test_non_idempotent_batches_are_ignored(state: ProducerStateManager) -> None:
    assert state.check(header(pid=-1, epoch=-1, seq=-1)) is None
    state.update(header(pid=-1, epoch=-1, seq=-1, offset=5))
    assert state.producer_ids() == []
    assert state.map_end_offset == 0


def test_check_all_lets_later_batches_follow_earlier_ones(log: Partition) -> None:
    batches_of_three(log, 1)
    results = log.state.check_all(
        [header(seq=0, count=3), header(seq=3), header(seq=4), header(pid=-1, seq=-1)]
    )
    assert results == [DuplicateBatch(0, 2, T0), None, None, None]
    with pytest.raises(OutOfOrderSequenceError):
        log.state.check_all([header(seq=3), header(seq=5)])
    assert log.state.last_entry(7).last_sequence == 2  # type: ignore[union-attr]


# -- transactions -----------------------------------------------------------------------------


def test_transaction_first_offset_is_tracked_until_the_marker(log: Partition) -> None:
    log.append(header(pid=1, seq=0))
    first = log.append(header(seq=0, transactional=True))
    log.append(header(seq=1, transactional=True))
    entry = log.state.last_entry(7)
    assert isinstance(first, BatchHeader) and entry is not None
    assert entry.current_txn_first_offset == first.base_offset == 1
    with pytest.raises(InvalidTxnStateError):
        log.state.check(header(seq=2))
    marker = header(seq=-1, transactional=True, control=True, offset=3, ts=T0 + 5)
    assert log.state.check(marker) is None
    log.state.update(marker, marker=EndTxnMarker(True, 4))
    assert entry.current_txn_first_offset is None
    assert entry.coordinator_epoch == 4
    assert entry.last_sequence == 1  # markers carry no sequence
    assert log.state.check(header(seq=2)) is None


# -- snapshots --------------------------------------------------------------------------------


def populate(log: Partition) -> None:
    batches_of_three(log, 7)
    log.append(header(pid=8, epoch=3, seq=10, count=2))
    log.append(header(pid=9, seq=0, transactional=True))


def test_snapshot_round_trip_keeps_every_cached_batch(
    log: Partition, tmp_path: Path, clock: ManualClock
) -> None:
    populate(log)
    log.state.take_snapshot(log.next_offset)
    path = tmp_path / f"{log.next_offset:020d}.snapshot"
    assert path.is_file()
    assert not list(tmp_path.glob("*.tmp"))
    reloaded = ProducerStateManager(tmp_path, clock=clock, producer_id_expiration_ms=HOUR_MS)
    assert reloaded.load(0, log.next_offset) == log.next_offset
    assert reloaded.map_end_offset == log.next_offset
    assert reloaded.producer_ids() == [7, 8, 9]
    for pid in (7, 8, 9):
        assert reloaded.last_entry(pid) == log.state.last_entry(pid)
    assert reloaded.last_entry(9).current_txn_first_offset is not None  # type: ignore[union-attr]
    # all five cached batches still deduplicate after the restart
    for i in range(2, 7):
        assert reloaded.check(header(seq=3 * i, count=3)) is not None


def test_load_without_snapshots_starts_from_log_start(state: ProducerStateManager) -> None:
    assert state.load(40, 100) == 40
    assert state.map_end_offset == 40
    assert state.producer_ids() == []


def test_load_takes_the_newest_snapshot_in_range(
    log: Partition, tmp_path: Path, clock: ManualClock
) -> None:
    log.append(header(seq=0))
    log.state.take_snapshot(1)
    log.append(header(seq=1))
    log.state.take_snapshot(2)
    log.append(header(seq=2))
    log.state.take_snapshot(3)
    reloaded = ProducerStateManager(tmp_path, clock=clock)
    assert reloaded.load(0, 2) == 2  # the snapshot at 3 is beyond up_to
    assert reloaded.last_entry(7).last_sequence == 1  # type: ignore[union-attr]
    assert reloaded.load(3, 3) == 3
    assert reloaded.load(4, 10) == 4  # all below the log start: replay from the log start
    assert reloaded.snapshot_offsets() == [1, 2, 3]


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[:-1],  # truncated
        lambda b: b[:10] + bytes([b[10] ^ 0x01]) + b[11:],  # flipped bit -> CRC mismatch
        lambda b: struct.pack(">h", 9) + b[2:],  # unknown version
        lambda b: b"",  # empty
        lambda b: b[:2],  # not even a header
    ],
)
def test_corrupt_snapshot_is_ignored_and_an_older_one_used(
    log: Partition, tmp_path: Path, clock: ManualClock, damage: object
) -> None:
    log.append(header(seq=0))
    log.state.take_snapshot(1)
    log.append(header(seq=1))
    log.state.take_snapshot(2)
    newest = tmp_path / f"{2:020d}.snapshot"
    newest.write_bytes(damage(newest.read_bytes()))  # type: ignore[operator]
    reloaded = ProducerStateManager(tmp_path, clock=clock)
    assert reloaded.load(0, 10) == 1
    assert reloaded.last_entry(7).last_sequence == 0  # type: ignore[union-attr]
    assert not newest.exists()


def test_trailing_bytes_with_valid_crc_are_corrupt() -> None:
    body = encode_snapshot([ProducerStateEntry(1, 0)])[6:] + b"\x00"
    data = struct.pack(">hI", 2, crc32c(body)) + body
    with pytest.raises(LogError):
        decode_snapshot(data)


def test_kafka_version_1_snapshot_is_readable() -> None:
    # Kafka's ProducerSnapshot v1: one entry per producer holding only its last batch.
    entry = struct.pack(">qhiqiqiq", 42, 3, 19, 500, 4, T0, 2, -1)
    body = struct.pack(">i", 1) + entry
    data = struct.pack(">hI", 1, crc32c(body)) + body
    [decoded] = decode_snapshot(data)
    assert (decoded.producer_id, decoded.producer_epoch, decoded.coordinator_epoch) == (42, 3, 2)
    assert list(decoded.batches) == [BatchMetadata(19, 500, 4, T0)]
    assert decoded.first_sequence == 15
    assert decoded.current_txn_first_offset is None


def test_leftover_temp_snapshot_is_removed(tmp_path: Path, clock: ManualClock) -> None:
    leftover = tmp_path / f"{5:020d}.snapshot.tmp"
    leftover.write_bytes(b"partial")
    ProducerStateManager(tmp_path, clock=clock)
    assert not leftover.exists()


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2**63 - 1),
            st.integers(-1, 2**15 - 1),
            st.integers(-1, 2**31 - 1),
            st.integers(-(2**63), 2**63 - 1),
            st.none() | st.integers(0, 2**63 - 1),
            st.lists(
                st.builds(
                    BatchMetadata,
                    st.integers(-1, INT32_MAX),
                    st.integers(0, 2**62),
                    st.integers(0, 2**31 - 1),
                    st.integers(-(2**63), 2**63 - 1),
                ),
                max_size=5,
            ),
        ),
        max_size=20,
        unique_by=lambda t: t[0],
    )
)
def test_snapshot_encoding_round_trips(rows: list[tuple]) -> None:  # type: ignore[type-arg]
    entries = []
    for pid, epoch, coordinator, ts, txn, batches in rows:
        entry = ProducerStateEntry(pid, epoch, coordinator_epoch=coordinator, last_timestamp=ts)
        entry.current_txn_first_offset = txn
        entry.batches.extend(batches)
        entries.append(entry)
    assert decode_snapshot(encode_snapshot(entries)) == entries


# -- truncation -------------------------------------------------------------------------------


def test_truncate_drops_out_of_range_snapshots_and_forgets_state_beyond(log: Partition) -> None:
    state = log.state
    for seq in range(6):
        log.append(header(seq=seq))
        state.take_snapshot(log.next_offset)
    assert state.snapshot_offsets() == [1, 2, 3, 4, 5, 6]
    replay_from = state.truncate(2, 4)
    assert state.snapshot_offsets() == [2, 3, 4]
    assert replay_from == 4
    assert state.last_entry(7).last_sequence == 3  # type: ignore[union-attr]
    assert state.check(header(seq=4)) is None
    with pytest.raises(OutOfOrderSequenceError):  # seq 4 and 5 were forgotten
        state.check(header(seq=5))


def test_truncate_between_snapshots_needs_a_replay(log: Partition) -> None:
    state = log.state
    for seq in range(3):
        log.append(header(seq=seq))
    state.take_snapshot(3)
    log.append(header(seq=3))
    log.append(header(seq=4))
    replay_from = state.truncate(0, 4)
    assert replay_from == 3
    for batch in log.written:  # the log replays [3, 4)
        if replay_from <= batch.base_offset < 4:
            state.update(batch)
    assert state.last_entry(7).last_sequence == 3  # type: ignore[union-attr]
    assert state.map_end_offset == 4


def test_truncate_with_nothing_beyond_keeps_state(log: Partition) -> None:
    for seq in range(3):
        log.append(header(seq=seq))
    log.append(header(pid=-1, epoch=-1, seq=-1))  # not an idempotent batch
    before = log.state.last_entry(7)
    assert log.state.truncate(1, 10) == 10
    assert log.state.last_entry(7) is before
    assert log.state.truncate(0, 3) == 3


def test_truncate_fully_forgets_everything(log: Partition) -> None:
    batches_of_three(log, 2)
    log.state.take_snapshot(6)
    log.state.truncate_fully_and_start_at(50)
    assert log.state.producer_ids() == []
    assert log.state.snapshot_offsets() == []
    assert log.state.map_end_offset == 50


def test_delete_snapshots_below(log: Partition) -> None:
    for offset in (3, 8, 12):
        log.state.take_snapshot(offset)
    log.state.delete_snapshots_below(8)
    assert log.state.snapshot_offsets() == [8, 12]
    assert log.state.latest_snapshot_offset() == 12


# -- expiry -----------------------------------------------------------------------------------


def test_idle_producers_expire(log: Partition, clock: ManualClock) -> None:
    log.append(header(pid=1, seq=0, ts=clock.time_ms()))
    clock.advance(HOUR_MS // 2)
    log.append(header(pid=2, seq=0, ts=clock.time_ms()))
    log.append(header(pid=3, seq=0, ts=clock.time_ms(), transactional=True))
    clock.advance(HOUR_MS // 2 - 1)
    log.state.remove_expired(clock.time_ms())
    assert log.state.producer_ids() == [1, 2, 3]
    clock.advance(1)
    log.state.remove_expired(clock.time_ms())
    assert log.state.producer_ids() == [2, 3]
    clock.advance(10 * HOUR_MS)
    log.state.remove_expired(clock.time_ms())
    assert log.state.producer_ids() == [3]  # an open transaction never expires


def test_expired_producers_are_not_loaded(
    log: Partition, tmp_path: Path, clock: ManualClock
) -> None:
    log.append(header(pid=1, seq=0, ts=clock.time_ms()))
    clock.advance(HOUR_MS // 2)
    log.append(header(pid=2, seq=0, ts=clock.time_ms()))
    log.state.take_snapshot(2)
    clock.advance(HOUR_MS // 2)
    reloaded = ProducerStateManager(tmp_path, clock=clock, producer_id_expiration_ms=HOUR_MS)
    reloaded.load(0, 2)
    assert reloaded.producer_ids() == [2]


class CountedWrites(FileOps):
    """Counts the files opened for writing (a snapshot's `.tmp`)."""

    def __init__(self) -> None:
        self.writes = 0

    def open(self, path: Path, flags: int, mode: int = 0o644) -> int:
        if flags & os.O_WRONLY:
            self.writes += 1
        return super().open(path, flags, mode)


def test_a_snapshot_is_taken_only_at_a_new_offset(tmp_path: Path, clock: ManualClock) -> None:
    """Kafka's rule: closing or rolling again with nothing appended writes no file (2 fsyncs
    per partition at every shutdown of a broker with many idle partitions)."""
    files = CountedWrites()
    log = Partition(ProducerStateManager(tmp_path, clock=clock, files=files))
    log.append(header(seq=0))
    log.state.take_snapshot(log.next_offset)
    log.state.take_snapshot(log.next_offset)
    assert files.writes == 1
    log.append(header(seq=1))
    log.state.take_snapshot(log.next_offset)
    assert files.writes == 2 and log.state.snapshot_offsets() == [1, 2]
    reloaded = ProducerStateManager(tmp_path, clock=clock, files=files)
    assert reloaded.load(0, 2) == 2  # nothing to replay after it: the file holds the table
    reloaded.take_snapshot(2)
    assert files.writes == 2
    assert reloaded.load(0, 1) == 1  # loaded below the end: the replay moves on from there
    reloaded.update(header(seq=1, offset=1))
    reloaded.take_snapshot(2)
    assert files.writes == 3


def test_a_snapshot_deleted_is_written_again(tmp_path: Path, clock: ManualClock) -> None:
    files = CountedWrites()
    log = Partition(ProducerStateManager(tmp_path, clock=clock, files=files))
    log.append(header(seq=0))
    log.state.take_snapshot(1)
    log.state.delete_snapshots_below(2)  # retention took the segment below it
    log.state.take_snapshot(1)
    assert files.writes == 2 and log.state.snapshot_offsets() == [1]
    log.state.truncate_fully_and_start_at(1)
    log.state.take_snapshot(1)
    assert files.writes == 3 and log.state.snapshot_offsets() == [1]


def test_producers_expired_at_the_same_offset_are_snapshot_again(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Expiry changes the table without moving the offset: the next snapshot there is written
    (else a restart with a longer `producer.id.expiration.ms` brought them back)."""
    files = CountedWrites()
    state = ProducerStateManager(tmp_path, clock=clock, producer_id_expiration_ms=HOUR_MS,
                                 files=files)  # fmt: skip
    log = Partition(state)
    log.append(header(seq=0))
    state.take_snapshot(1)
    clock.advance(2 * HOUR_MS)
    state.remove_expired(clock.time_ms())
    state.take_snapshot(1)
    assert files.writes == 2
    assert decode_snapshot((tmp_path / f"{1:020d}.snapshot").read_bytes()) == []
    log.append(header(pid=8, seq=0, offset=1, ts=clock.time_ms()))
    state.take_snapshot(2)
    clock.advance(2 * HOUR_MS)
    reloaded = ProducerStateManager(tmp_path, clock=clock, producer_id_expiration_ms=HOUR_MS,
                                    files=files)  # fmt: skip
    assert reloaded.load(0, 2) == 2 and reloaded.producer_ids() == []  # 8 dropped as expired
    reloaded.take_snapshot(2)  # so the file no longer holds the table: written again
    assert files.writes == 4
    assert decode_snapshot((tmp_path / f"{2:020d}.snapshot").read_bytes()) == []
