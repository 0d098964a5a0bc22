"""Compaction of logs holding transactions (issue 14): aborted data goes, markers outlive their data
by delete.retention.ms, the `.txnindex` of cleaned segments follows, and no round passes the first
unstable offset (Kafka's LogCleaner with CleanedTransactionMetadata)."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.cleaner.log_cleaner import LogCleaner
from brokers.log.log import Log
from brokers.records.batch import DELETE_HORIZON_MASK
from tests.unit.log.cleaner_helpers import (
    append_records,
    compact_config,
    new_cleaner,
    open_compacted,
    read_records,
    segment_files,
    stored_batches,
)
from tests.unit.log.cleaner_txn_helpers import TxnProducer, marker_offsets, read_committed

pytestmark = pytest.mark.unit

RETENTION = 1000  # compact_config's delete.retention.ms


class Scenario:
    """Plain writes interleaved with two transactional producers (see `build`)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.clock = ManualClock()
        self.log = open_compacted(root, self.clock)
        self.cleaner = new_cleaner(root, self.clock)
        self.p1 = TxnProducer(self.log, self.clock, 1)
        self.p2 = TxnProducer(self.log, self.clock, 2)
        self.rounds = 0

    def build(self) -> None:
        log, clock, p1, p2 = self.log, self.clock, self.p1, self.p2
        append_records(log, clock, [(b"k1", b"plain-1"), (b"k2", b"plain-1")])
        p1.send([(b"k1", b"p1-committed"), (b"k3", b"p1-committed")])
        p2.send([(b"k1", b"p2-aborted"), (b"k4", b"p2-aborted")])  # k1's latest offset
        append_records(log, clock, [(b"k2", b"plain-2")])  # between open transactions
        self.p1_commit = p1.end(commit=True)
        self.p2_abort = p2.end(commit=False)
        p2.send([(b"k2", b"p2-committed")])
        self.p2_commit = p2.end(commit=True)
        p1.send([(b"k5", b"p1-second")])  # p1's first batch is no longer its last
        self.p1_second = p1.end(commit=True)

    def clean(self, advance_ms: int = 0) -> None:
        """New dirty data in a new segment, then one round (a round needs dirty data)."""
        self.clock.advance(advance_ms)
        self.rounds += 1
        append_records(self.log, self.clock, [(b"filler", b"%d" % self.rounds)])
        self.log.roll()
        assert self.cleaner.clean_log(self.log) is not None

    def horizon_of(self, offset: int) -> int | None:
        header = next(h for h, _ in stored_batches(self.log) if h.base_offset == offset)
        return header.base_timestamp if header.attributes & DELETE_HORIZON_MASK else None


EXPECTED = {
    b"k1": b"p1-committed", b"k2": b"p2-committed", b"k3": b"p1-committed",
    b"k5": b"p1-second", b"filler": b"1",
}  # fmt: skip


def test_aborted_records_go_and_committed_values_win_by_key(tmp_path: Path) -> None:
    world = Scenario(tmp_path)
    world.build()
    aborted = world.log.collect_aborted(0, world.log.log_end_offset)
    assert [(t.producer_id, t.last_offset) for t in aborted] == [(2, world.p2_abort)]
    markers = marker_offsets(world.log)

    world.clean()

    log = world.log
    assert read_committed(log) == EXPECTED
    values = [r.value for r in read_records(log) if r.value is not None]
    assert not [v for v in values if v.endswith(b"-aborted")]  # gone, not only hidden
    assert b"plain-1" not in values and b"plain-2" not in values  # superseded
    assert marker_offsets(log) == markers  # their transactions' data was walked this round
    assert log.collect_aborted(0, log.log_end_offset) == aborted
    assert "00000000000000000000.txnindex" in segment_files(log)
    assert not [name for name in segment_files(log) if name.endswith((".cleaned", ".swap"))]

    log.close()  # the cleaned segment's .txnindex was swapped in with it
    reopened = Log.open(
        log.directory, log.config, clock=world.clock, recovery_point=log.log_end_offset,
        had_clean_shutdown=True,
    )  # fmt: skip
    assert reopened.collect_aborted(0, reopened.log_end_offset) == aborted
    assert read_committed(reopened) == EXPECTED
    reopened.close()
    recovered = Log.open(log.directory, log.config, clock=world.clock)  # rebuilt from the log
    assert read_committed(recovered) == EXPECTED


def test_the_offset_map_ignores_aborted_records(tmp_path: Path) -> None:
    """An aborted write is the latest offset of k1: indexed, it would remove the committed value."""
    world = Scenario(tmp_path)
    world.build()
    world.clean()
    kept = {r.key: r.value for r in read_records(world.log)}
    assert kept[b"k1"] == b"p1-committed" and b"k4" not in kept


def test_an_abort_marker_outlives_its_data_by_delete_retention(tmp_path: Path) -> None:
    world = Scenario(tmp_path)
    world.build()
    world.clean()  # walks the aborted data: the marker and its index entry stay
    assert world.horizon_of(world.p2_abort) is None

    world.clean(advance_ms=100)  # no data left: the marker gets a horizon, the entry goes
    horizon = world.clock.time_ms() + RETENTION
    assert world.horizon_of(world.p2_abort) == horizon
    assert world.log.collect_aborted(0, world.log.log_end_offset) == []
    assert not [n for n in segment_files(world.log) if n.endswith(".txnindex")]

    world.clean(advance_ms=RETENTION - 1)
    assert world.p2_abort in marker_offsets(world.log)
    world.clean(advance_ms=1)
    assert world.p2_abort not in marker_offsets(world.log)
    assert world.p2_abort not in [h.base_offset for h, _ in stored_batches(world.log)]
    others = [world.p1_commit, world.p2_commit, world.p1_second]
    assert [o for o in others if o in marker_offsets(world.log)] == others  # data still there
    assert read_committed(world.log) == EXPECTED | {b"filler": b"%d" % world.rounds}


def test_a_commit_marker_goes_only_after_its_data_and_its_horizon(tmp_path: Path) -> None:
    world = Scenario(tmp_path)
    world.build()
    append_records(world.log, world.clock, [(b"k1", b"plain-3"), (b"k3", b"plain-3")])
    world.clean()  # p1's first transaction's data is superseded: removed, but walked
    assert world.p1_commit in marker_offsets(world.log)
    assert world.horizon_of(world.p1_commit) is None
    world.clean(advance_ms=10)
    assert world.horizon_of(world.p1_commit) == world.clock.time_ms() + RETENTION
    world.clean(advance_ms=RETENTION)
    assert world.p1_commit not in marker_offsets(world.log)
    assert world.p2_commit in marker_offsets(world.log)  # k2's value is its data
    table = read_committed(world.log)
    assert (table[b"k1"], table[b"k3"], table[b"k2"]) == (b"plain-3", b"plain-3", b"p2-committed")


def test_an_aborted_batch_holding_producer_state_stays_empty_with_marker_and_entry(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    producer = TxnProducer(log, clock, 7)
    append_records(log, clock, [(b"k", b"plain")])
    producer.send([(b"k", b"aborted"), (b"j", b"aborted")])
    abort = producer.end(commit=False)
    cleaner = new_cleaner(tmp_path, clock)
    for n in range(3):
        clock.advance(RETENTION)
        append_records(log, clock, [(b"filler", b"%d" % n)])
        log.roll()
        assert cleaner.clean_log(log) is not None

    batches = {h.base_offset: h for h, _ in stored_batches(log)}
    emptied = batches[1]  # the producer's last data batch: its sequence is its state
    assert (emptied.records_count, emptied.last_offset, emptied.producer_id) == (0, 2, 7)
    assert (emptied.base_sequence, emptied.is_transactional) == (0, True)
    assert abort in marker_offsets(log)  # the emptied batch is still walked every round
    assert [t.last_offset for t in log.collect_aborted(0, log.log_end_offset)] == [abort]
    assert read_committed(log) == {b"k": b"plain", b"filler": b"2"}
    entry = log.producer_state.last_entry(7)
    assert entry is not None and entry.last_sequence == 1


def test_a_marker_holding_a_new_producer_epoch_stays_as_an_empty_batch(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    producer = TxnProducer(log, clock, 9)
    producer.send([(b"k", b"aborted")])
    abort = producer.end(commit=False, epoch=1)  # the coordinator bumped the epoch (KIP-890)
    cleaner = new_cleaner(tmp_path, clock)
    for n in range(3):
        clock.advance(RETENTION)
        append_records(log, clock, [(b"filler", b"%d" % n)])
        log.roll()
        assert cleaner.clean_log(log) is not None

    batches = {h.base_offset: h for h, _ in stored_batches(log)}
    assert 0 not in batches  # the aborted data is gone: the producer's state is the marker's
    marker = batches[abort]
    assert (marker.is_control, marker.records_count, marker.producer_epoch) == (True, 0, 1)
    assert log.collect_aborted(0, log.log_end_offset) == []


def test_a_round_stops_at_the_first_unstable_offset(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock, compact_config(segment_bytes=600))
    cleaner = new_cleaner(tmp_path, clock)
    producer = TxnProducer(log, clock, 3)
    append_records(log, clock, [(b"k", b"old")])
    open_at = producer.send([(b"k", b"in-txn")]).first_offset
    for n in range(12):
        append_records(log, clock, [(b"k", b"plain-%d" % n), (b"x%d" % n, b"v")])
    log.roll()
    log.high_watermark = log.log_end_offset
    assert log.segments[0].next_offset > open_at + 5  # the open transaction is mid-segment
    before = stored_batches(log)

    assert cleaner.clean_log(log) is not None
    assert_untouched_from(log, before, open_at)
    assert cleaner.manager.first_dirty_checkpoint(("compacted", 0)) == open_at

    marker = producer.end(commit=True)
    log.roll()
    log.high_watermark = marker  # the marker is written, not yet replicated: still unstable
    before = stored_batches(log)
    assert cleaner.clean_log(log) is None
    assert stored_batches(log) == before

    log.high_watermark = log.log_end_offset
    assert cleaner.clean_log(log) is not None
    assert read_committed(log)[b"k"] == b"plain-11"
    assert [r.value for r in read_records(log) if r.key == b"k"] == [b"plain-11"]


def assert_untouched_from(log: Log, before: list, offset: int) -> None:  # type: ignore[type-arg]
    after = stored_batches(log)
    assert [b for b in after if b[0].last_offset >= offset] == [
        b for b in before if b[0].last_offset >= offset
    ]


def test_the_log_cleaner_driver_never_passes_an_open_transaction(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    producer = TxnProducer(log, clock, 4)
    producer.send([(b"k", b"open")])
    for n in range(30):
        append_records(log, clock, [(b"k", b"plain-%d" % n)])
    log.roll()
    log.high_watermark = log.log_end_offset
    cleaner = LogCleaner(tmp_path, clock=clock)
    cleaner.startup()
    assert cleaner.run([log]) == 0  # everything dirty sits after the open transaction
    assert len([r for r in read_records(log) if r.key == b"k"]) == 31
