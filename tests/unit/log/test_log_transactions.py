"""Transactions in the partition log: markers, LSO, aborted-transaction index, recovery."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.config import LogConfig
from brokers.log.errors import (
    InvalidProducerEpochError,
    StorageError,
    TransactionCoordinatorFencedError,
)
from brokers.log.log import Log
from brokers.log.txn_index import AbortedTxn, TransactionIndex
from brokers.records.batch import iter_headers
from brokers.records.builder import build_batch
from brokers.records.control import EndTxnMarker, read_marker
from brokers.records.errors import InvalidRecordError
from tests.unit.log.faulty_files import FaultyFiles, SimulatedCrash
from tests.unit.log.partition_helpers import read_all
from tests.unit.log.txn_helpers import (
    T0,
    Producer,
    end,
    open_log,
    plain,
    put,
    replicate,
    send,
    txn_index_files,
)

pytestmark = pytest.mark.unit


@pytest.fixture
def log(tmp_path: Path) -> Log:
    return open_log(tmp_path)


# -- markers and the last stable offset ---------------------------------------------------------


def test_a_commit_marker_is_a_control_batch_at_the_log_end(log: Log) -> None:
    a = Producer(7, epoch=2, coordinator_epoch=5)
    plain(log)
    first = send(log, a, 3).first_offset
    assert log.ongoing_transactions() == {7: first}
    written = end(log, a, commit=True)
    assert written.first_offset == written.last_offset == 4 == log.log_end_offset - 1
    read = log.read(written.first_offset, 1000)
    assert read.region is not None
    data = read.region.read()
    ((_, header),) = iter_headers(data)
    assert header.is_control and header.is_transactional and header.base_offset == 4
    assert (header.producer_id, header.producer_epoch, header.partition_leader_epoch) == (7, 2, 0)
    assert read_marker(data) == EndTxnMarker(True, 5)
    entry = log.producer_state.last_entry(7)
    assert entry is not None and entry.coordinator_epoch == 5
    assert entry.current_txn_first_offset is None and entry.last_sequence == 2
    assert log.ongoing_transactions() == {}
    assert txn_index_files(log) == {}  # commits are not indexed


def test_lso_stays_at_an_open_transaction_and_waits_for_the_marker_to_replicate(log: Log) -> None:
    a, b = Producer(1), Producer(2)
    plain(log, 2)  # 0-1
    a_first = send(log, a).first_offset  # 2-3
    plain(log)  # 4
    b_first = send(log, b).first_offset  # 5-6
    assert log.last_stable_offset(7) == a_first == log.first_unstable_offset()
    assert log.last_stable_offset(1) == 1  # never past the high watermark
    marker = end(log, a, commit=True).first_offset  # 7
    assert log.last_stable_offset(7) == a_first  # the marker is not replicated yet
    assert log.last_stable_offset(marker) == a_first
    assert log.last_stable_offset(marker + 1) == b_first  # a is stable; b is still open
    assert log.first_unstable_offset() == b_first
    end(log, b, commit=False)  # 8
    assert log.last_stable_offset(marker + 1) == b_first
    assert log.last_stable_offset(9) == 9 and log.first_unstable_offset() is None
    assert log.producer_state.unreplicated_transactions() == ()


def test_an_abort_is_indexed_with_its_first_offset_and_lso(log: Log) -> None:
    a, b = Producer(1), Producer(2)
    a_first = send(log, a).first_offset  # 0-1
    b_first = send(log, b).first_offset  # 2-3
    send(log, a)  # 4-5
    abort_a = end(log, a, commit=False).first_offset  # 6
    abort_b = end(log, b, commit=False).first_offset  # 7
    expected = [
        AbortedTxn(1, a_first, abort_a, b_first),  # b was still open: the LSO was its start
        AbortedTxn(2, b_first, abort_b, abort_b + 1),  # nothing open: the marker's offset + 1
    ]
    assert log.collect_aborted(0, log.log_end_offset) == expected
    assert log.collect_aborted(abort_a + 1, log.log_end_offset) == expected[1:]
    assert log.collect_aborted(0, b_first) == expected[:1]  # b starts at the upper bound
    on_disk = TransactionIndex.load(log.active_segment.txn_index.path, 0)
    assert on_disk.entries == tuple(expected)


def test_a_marker_without_an_open_transaction_is_written_but_not_indexed(log: Log) -> None:
    unknown = Producer(9, epoch=3)
    assert end(log, unknown, commit=False).first_offset == 0
    a = Producer(1)
    send(log, a)
    end(log, a, commit=True)
    again = end(log, a, commit=False)  # a retried marker after the transaction ended
    assert again.first_offset == 4 == log.log_end_offset - 1
    assert log.collect_aborted(0, 10) == [] and txn_index_files(log) == {}
    assert log.producer_state.last_entry(9) is not None
    assert log.last_stable_offset(4) == 4


def test_markers_of_a_fenced_producer_or_coordinator_are_refused(log: Log) -> None:
    a = Producer(1, epoch=4, coordinator_epoch=6)
    send(log, a)
    end(log, a, commit=True)  # the first marker makes coordinator epoch 6 known here
    assert log.producer_state.last_entry(1).coordinator_epoch == 6  # type: ignore[union-attr]
    first = send(log, a).first_offset
    end_before = log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        log.append_marker(1, 3, EndTxnMarker(False, 6), leader_epoch=0)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_marker(1, 4, EndTxnMarker(True, 5), leader_epoch=0)
    assert log.log_end_offset == end_before and log.ongoing_transactions() == {1: first}
    a.epoch, a.coordinator_epoch = 5, 7  # a newer producer epoch from a newer coordinator
    assert end(log, a, commit=False).first_offset == end_before
    with pytest.raises(TransactionCoordinatorFencedError):  # epoch 7 is now the one to beat
        log.append_marker(1, 5, EndTxnMarker(True, 6), leader_epoch=0)


def test_the_marker_of_a_bumped_epoch_fences_the_old_one(log: Log) -> None:
    a = Producer(1, epoch=0)
    send(log, a)
    log.append_marker(1, 1, EndTxnMarker(False, 0), leader_epoch=0)  # epoch bumped on abort
    assert log.collect_aborted(0, 10) == [AbortedTxn(1, 0, 2, 3)]
    with pytest.raises(InvalidProducerEpochError):
        put(log, a.batch())


def test_marker_timestamps_follow_log_append_time(tmp_path: Path) -> None:
    clock = ManualClock(T0 + 500)
    log = open_log(tmp_path, config=LogConfig(message_timestamp_type="LogAppendTime"), clock=clock)
    result = end(log, Producer(1), commit=True)
    assert result.log_append_time_ms == T0 + 500
    read = log.read(0, 1000)
    assert read.region is not None
    ((_, header),) = iter_headers(read.region.read())
    assert header.is_log_append_time and header.max_timestamp == T0 + 500


# -- followers --------------------------------------------------------------------------------


def scenario(log: Log) -> None:
    """Interleaved transactions over several segments (the config rolls every ~1200 bytes)."""
    a, b, c = Producer(1), Producer(2), Producer(3)
    for round_ in range(6):
        send(log, a, 3)
        send(log, b)
        plain(log)
        end(log, a, commit=round_ % 2 == 0)
        send(log, c, 1)
        if round_ % 3 == 2:
            end(log, b, commit=False)
            end(log, c, commit=round_ == 5)
    send(log, a)  # left open


def test_a_follower_learns_the_same_transactions(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    follower = open_log(tmp_path / "follower")
    scenario(leader)
    replicate(leader, follower)
    end_offset = leader.log_end_offset
    assert len(leader.segments) >= 3
    assert follower.collect_aborted(0, end_offset) == leader.collect_aborted(0, end_offset)
    assert len(leader.collect_aborted(0, end_offset)) == 6
    assert follower.ongoing_transactions() == leader.ongoing_transactions()
    for hw in range(0, end_offset + 1, 7):
        assert follower.last_stable_offset(hw) == leader.last_stable_offset(hw)
    assert txn_index_files(follower) == txn_index_files(leader)


def test_a_follower_refuses_a_control_batch_that_is_not_a_marker(log: Log) -> None:
    a = Producer(1)
    send(log, a)
    bogus = build_batch(
        [(b"\x00\x00\x00\x02", b"")], base_offset=2, producer_id=1, producer_epoch=0,
        is_transactional=True, is_control=True,
    )  # fmt: skip
    with pytest.raises(InvalidRecordError):
        log.append_as_follower(bogus, list(iter_headers(bogus)))
    assert log.log_end_offset == 2 and log.ongoing_transactions() == {1: 0}


# -- restarts, recovery ----------------------------------------------------------------------


def test_a_restart_keeps_an_open_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a, b = Producer(1), Producer(2)
    plain(log)
    first = send(log, a).first_offset
    send(log, b)
    end(log, b, commit=True)
    log.close()
    reopened = open_log(tmp_path)
    assert reopened.ongoing_transactions() == {1: first}
    assert reopened.last_stable_offset(reopened.log_end_offset) == first
    abort = end(reopened, a, commit=False).first_offset
    assert reopened.collect_aborted(0, abort + 1) == [AbortedTxn(1, first, abort, abort + 1)]


def crash_and_reopen(log: Log, tmp_path: Path, *, recovery_point: int = 0) -> Log:
    log.release()  # no clean close: no final snapshot, no fsync
    return open_log(tmp_path, clean=False, recovery_point=recovery_point)


def test_recovery_rebuilds_deleted_txn_indexes(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    scenario(log)
    aborted = log.collect_aborted(0, log.log_end_offset)
    ongoing = dict(log.ongoing_transactions())
    before = txn_index_files(log)
    assert len(before) >= 2
    for path in log.directory.glob("*.txnindex"):
        path.unlink()
    reopened = crash_and_reopen(log, tmp_path)
    assert reopened.collect_aborted(0, reopened.log_end_offset) == aborted
    assert txn_index_files(reopened) == before
    assert reopened.ongoing_transactions() == ongoing


def test_recovery_from_a_recovery_point_rebuilds_only_later_segments(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    scenario(log)
    aborted = log.collect_aborted(0, log.log_end_offset)
    segments = log.segments
    point = segments[2].base_offset
    log.flush(point)
    kept = segments[0].txn_index.path  # below the recovery point: not recovered, not rebuilt
    kept_before = kept.read_bytes() if kept.exists() else None
    for segment in segments[2:]:
        segment.txn_index.path.unlink(missing_ok=True)
    reopened = crash_and_reopen(log, tmp_path, recovery_point=point)
    assert reopened.collect_aborted(0, reopened.log_end_offset) == aborted
    assert (kept.read_bytes() if kept.exists() else None) == kept_before


def test_a_torn_abort_marker_is_cut_and_its_transaction_is_open_again(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    a = Producer(1)
    plain(log)
    first = send(log, a).first_offset
    abort = end(log, a, commit=False).first_offset
    assert log.collect_aborted(0, 10) == [AbortedTxn(1, first, abort, abort + 1)]
    path = log.active_segment.records.path
    log.release()
    path.write_bytes(path.read_bytes()[:-5])  # the marker's last bytes never reached the disk
    reopened = open_log(tmp_path, clean=False)
    assert reopened.log_end_offset == abort
    assert reopened.collect_aborted(0, 10) == [] and txn_index_files(reopened) == {}
    assert reopened.ongoing_transactions() == {1: first}
    assert reopened.last_stable_offset(abort) == first


def test_a_corrupt_txn_index_is_rebuilt_even_after_a_clean_shutdown(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    scenario(log)
    aborted = log.collect_aborted(0, log.log_end_offset)
    path = next(log.directory.glob("*.txnindex"))
    log.close()
    path.write_bytes(path.read_bytes()[:-3])
    reopened = open_log(tmp_path)
    assert reopened.collect_aborted(0, reopened.log_end_offset) == aborted


# -- truncation and deletion --------------------------------------------------------------------


def test_truncation_forgets_markers_and_transactions_past_the_new_end(log: Log) -> None:
    a, b = Producer(1), Producer(2)
    a_first = send(log, a).first_offset  # 0-1
    abort_a = end(log, a, commit=False).first_offset  # 2
    b_first = send(log, b).first_offset  # 3-4
    abort_b = end(log, b, commit=False).first_offset  # 5
    log.truncate_to(abort_b)
    assert log.collect_aborted(0, 10) == [AbortedTxn(1, a_first, abort_a, abort_a + 1)]
    assert log.ongoing_transactions() == {2: b_first}
    log.truncate_to(b_first)
    assert log.ongoing_transactions() == {}
    assert log.last_stable_offset(b_first) == b_first
    log.truncate_to(abort_a)
    assert log.collect_aborted(0, 10) == [] and txn_index_files(log) == {}
    assert log.ongoing_transactions() == {1: a_first}
    log.truncate_fully_and_start_at(50)
    assert log.ongoing_transactions() == {} and log.first_unstable_offset() is None


def test_truncation_across_segments_removes_their_txn_indexes(log: Log) -> None:
    scenario(log)
    middle = log.segments[2].base_offset
    log.truncate_to(middle)
    assert all(t.last_offset < middle for t in log.collect_aborted(0, middle))
    assert not [n for n in txn_index_files(log) if n.endswith(".txnindex")
                and int(n[:20]) >= middle]  # fmt: skip


def test_retention_and_delete_records_take_txn_indexes_with_their_segments(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    config = LogConfig(segment_bytes=600, index_interval_bytes=100, file_delete_delay_ms=1000)
    log = open_log(tmp_path, config=config, clock=clock)
    scenario(log)
    indexed = sorted(n for n in txn_index_files(log))
    cut = log.segments[3].base_offset
    log.delete_records_before(cut)
    gone = [n for n in indexed if int(n[:20]) < cut]
    assert gone, "the scenario no longer puts an abort before the cut"
    files = txn_index_files(log)
    assert all(n + ".deleted" in files and n not in files for n in gone)
    clock.advance(1000)
    log.delete_expired_segment_files()
    assert sorted(txn_index_files(log)) == [n for n in indexed if int(n[:20]) >= cut]
    assert all(t.last_offset >= cut for t in log.collect_aborted(cut, log.log_end_offset))
    first = log.first_unstable_offset()  # the open transaction started before the cut?
    assert first is None or first >= log.log_start_offset


def test_lso_is_never_below_the_log_start(log: Log) -> None:
    a = Producer(1)
    plain(log)
    send(log, a)  # open at 1
    plain(log, 3)
    log.delete_records_before(4)
    assert log.last_stable_offset(6) == 4 == log.first_unstable_offset()


# -- a failed append leaves no index entry --------------------------------------------------


def test_a_failed_marker_append_is_undone_and_retried(tmp_path: Path) -> None:
    files = FaultyFiles()
    log = open_log(tmp_path, files=files)
    a = Producer(1)
    first = send(log, a).first_offset
    end_before = log.log_end_offset
    files.fail("write", name_suffix=".txnindex", error=errno.ENOSPC, torn=True)
    with pytest.raises(StorageError):
        end(log, a, commit=False)
    assert log.log_end_offset == end_before and read_all(log)[-1].last_offset == end_before - 1
    assert log.collect_aborted(0, 10) == [] and log.ongoing_transactions() == {1: first}
    assert txn_index_files(log) == {}
    abort = end(log, a, commit=False).first_offset
    assert abort == end_before
    assert log.collect_aborted(0, 10) == [AbortedTxn(1, first, abort, abort + 1)]
    log.close()
    assert open_log(tmp_path).collect_aborted(0, 10) == [AbortedTxn(1, first, abort, abort + 1)]


@pytest.mark.parametrize(("op", "suffix"), [("pwritev", ".log"), ("write", ".txnindex")])
def test_a_failed_abort_leaves_the_index_as_it_was(tmp_path: Path, op: str, suffix: str) -> None:
    files = FaultyFiles()
    log = open_log(tmp_path, files=files)
    a = Producer(1)
    send(log, a)
    end(log, a, commit=False)
    send(log, a)
    entries = log.active_segment.txn_index.entries
    files.fail(op, name_suffix=suffix, torn=True)
    with pytest.raises(StorageError):
        end(log, a, commit=False)
    assert log.active_segment.txn_index.entries == entries
    assert TransactionIndex.load(log.active_segment.txn_index.path, 0).entries == entries


def abort_scenario(root: Path, files: FaultyFiles) -> tuple[Log, Producer]:
    """An open transaction; the abort about to be written rolls a new segment (segment.ms)."""
    clock = ManualClock(T0)
    log = open_log(root, files=files, clock=clock, config=LogConfig(segment_ms=1000))
    a, b = Producer(1), Producer(2)
    send(log, a)
    end(log, a, commit=False)
    send(log, b)
    send(log, a)
    clock.advance(2000)
    return log, a


def txn_state(log: Log) -> tuple[object, ...]:
    return (
        log.log_end_offset, [s.base_offset for s in log.segments], txn_index_files(log),
        log.collect_aborted(0, 100), dict(log.ongoing_transactions()), read_all(log),
        log.producer_state.last_entry(1),
    )  # fmt: skip


def test_a_failure_at_any_call_of_an_abort_append_is_undone(tmp_path: Path) -> None:
    reference = FaultyFiles()
    log, a = abort_scenario(tmp_path / "reference", reference)
    start = len(reference.calls)
    end(log, a, commit=False)
    calls = reference.calls[start:]
    assert len(log.segments) == 2 and any(c.name.endswith(".txnindex") for c in calls), calls
    for k, call in enumerate(calls, start=1):
        files = FaultyFiles()
        log, a = abort_scenario(tmp_path / f"fail-{k}", files)
        before = txn_state(log)
        files.fail("*", nth=k, torn=True)
        with pytest.raises(StorageError):
            end(log, a, commit=False)
        assert files.failed == [call]
        assert txn_state(log) == before, f"failure at {call} left the log changed"
        retried = end(log, a, commit=False)
        aborted = log.collect_aborted(0, 100)
        assert aborted[-1] == AbortedTxn(1, 5, retried.first_offset, 3), call
        log.close()
        assert open_log(tmp_path / f"fail-{k}").collect_aborted(0, 100) == aborted, call


@pytest.mark.parametrize("torn", [False, True])
def test_a_crash_at_any_call_of_an_abort_append_recovers_all_or_nothing(
    tmp_path: Path, torn: bool
) -> None:
    reference = FaultyFiles()
    log, a = abort_scenario(tmp_path / "reference", reference)
    start = len(reference.calls)
    end(log, a, commit=False)
    for k in range(1, len(reference.calls) - start + 1):
        files = FaultyFiles()
        log, a = abort_scenario(tmp_path / f"crash-{k}", files)
        files.crash_at(k, torn=torn)
        with pytest.raises(SimulatedCrash):
            end(log, a, commit=False)
        log.release()
        reopened = open_log(tmp_path / f"crash-{k}", clean=False)
        aborted = reopened.collect_aborted(0, 100)
        if reopened.log_end_offset == 8:  # the marker survived, and so did its index entry
            assert aborted[-1] == AbortedTxn(1, 5, 7, 3), k
            assert reopened.ongoing_transactions() == {2: 3}, k
        else:
            assert reopened.log_end_offset == 7, k
            assert reopened.ongoing_transactions() == {1: 5, 2: 3}, k
            assert [t.last_offset for t in aborted] == [2], k


def test_an_empty_txn_index_file_goes_with_its_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    plain(log)
    log.close()
    empty = log.directory / f"{0:020d}.txnindex"
    empty.write_bytes(b"")  # e.g. left by Kafka, which truncates instead of deleting
    reopened = open_log(tmp_path)
    reopened.truncate_fully_and_start_at(10)
    assert txn_index_files(reopened) == {empty.name + ".deleted": 0}
