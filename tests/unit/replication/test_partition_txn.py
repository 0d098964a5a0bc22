"""A partition's transactional reads and markers on real logs: read_committed stops at the last
stable offset and lists the aborted transactions of the data it returns; markers move the LSO
once the high watermark passes them (and wake parked fetches through the HW callback); markers
are checked like acks=all appends; a follower that becomes leader has the right LSO at once."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from brokers.common.clock import ManualClock
from brokers.log.config import LogConfig
from brokers.log.errors import InvalidProducerEpochError, TransactionCoordinatorFencedError
from brokers.log.log import Log
from brokers.records.batch import iter_headers
from brokers.records.builder import build_batch
from brokers.records.control import EndTxnMarker
from brokers.replication.errors import NotEnoughReplicasError, NotLeaderOrFollowerError
from brokers.replication.metrics import LastStableOffsetLagCollector
from brokers.replication.partition import FetchedData, LeadershipState, Partition

pytestmark = pytest.mark.unit
NOW = 1_700_000_000_000
ALL = 1 << 20
COMMIT, ABORT = EndTxnMarker(True, 0), EndTxnMarker(False, 0)


class Recorder:
    def __init__(self) -> None:
        self.moves: list[int] = []

    def __call__(self, partition: Partition) -> None:
        self.moves.append(partition.high_watermark)


def make_partition(
    root: Path, node_id: int = 0, config: LogConfig | None = None
) -> tuple[Partition, Recorder]:
    clock = ManualClock(NOW)
    log = Log.open(root / f"node{node_id}" / "t-0", config or LogConfig(), clock=clock)
    recorder = Recorder()
    partition = Partition(
        log, node_id=node_id, clock=clock, high_watermark=0, on_high_watermark=recorder
    )
    return partition, recorder


def txn(producer_id: int, sequence: int, count: int = 2, epoch: int = 0) -> bytes:
    records = [(None, b"p%d-%d" % (producer_id, sequence + i)) for i in range(count)]
    return build_batch(
        records,
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=True,
        base_timestamp=NOW,
    )


def plain(count: int = 1) -> bytes:
    return build_batch([(None, b"x")] * count, base_timestamp=NOW)


def read(p: Partition, offset: int = 0, max_bytes: int = ALL, **kw: bool) -> FetchedData:
    return p.read(offset, max_bytes, **kw)


def next_offset(fetched: FetchedData) -> int:
    assert fetched.read is not None
    return fetched.read.next_offset


def aborted(fetched: FetchedData) -> list[tuple[int, int]] | None:
    found = fetched.aborted_transactions
    return None if found is None else [(t.producer_id, t.first_offset) for t in found]


def test_read_committed_stops_at_an_open_transaction(tmp_path: Path) -> None:
    p, _ = make_partition(tmp_path)
    p.append_as_leader(plain(2))  # 0-1
    p.append_as_leader(txn(7, 0))  # 2-3, open
    p.append_as_leader(plain())  # 4
    assert (p.high_watermark, p.last_stable_offset) == (5, 2)

    committed = read(p, read_committed=True)
    assert next_offset(committed) == 2 and aborted(committed) == []
    assert committed.last_stable_offset == 2 and committed.high_watermark == 5
    assert next_offset(read(p, 2, read_committed=True)) == 2  # nothing past the LSO

    uncommitted = read(p)
    assert next_offset(uncommitted) == 5 and aborted(uncommitted) is None
    assert uncommitted.last_stable_offset == 2  # Kafka reports the LSO at either level
    follower = read(p, for_follower=True, read_committed=True)
    assert next_offset(follower) == 5 and aborted(follower) is None


def test_markers_move_the_lso_and_aborted_transactions_are_listed(tmp_path: Path) -> None:
    p, recorder = make_partition(tmp_path)
    p.append_as_leader(txn(1, 0))  # 0-1
    p.append_as_leader(txn(2, 0))  # 2-3
    assert p.last_stable_offset == 0
    moves = len(recorder.moves)
    result = p.append_marker(1, 0, ABORT)  # 4
    assert (result.first_offset, result.last_offset) == (4, 4)
    assert len(recorder.moves) > moves  # the HW moved: parked fetches wake
    assert p.last_stable_offset == 2  # producer 2 is still open
    p.append_marker(2, 0, COMMIT)  # 5
    assert p.last_stable_offset == p.high_watermark == 6

    everything = read(p, read_committed=True)
    assert next_offset(everything) == 6 and aborted(everything) == [(1, 0)]
    assert aborted(read(p, 4, read_committed=True)) == [(1, 0)]  # the marker itself is read
    assert aborted(read(p, 5, read_committed=True)) == []


def test_aborted_transactions_are_those_of_the_data_returned(tmp_path: Path) -> None:
    p, _ = make_partition(tmp_path)
    p.append_as_leader(txn(1, 0))  # 0-1
    p.append_as_leader(plain())  # 2
    p.append_as_leader(txn(2, 0))  # 3-4
    p.append_marker(2, 0, ABORT)  # 5
    p.append_marker(1, 0, ABORT)  # 6
    first = read(p, 0, 1, read_committed=True)  # one batch: 0-1
    assert next_offset(first) == 2 and aborted(first) == [(1, 0)]
    rest = read(p, 2, read_committed=True)
    assert next_offset(rest) == 7
    assert sorted(aborted(rest) or []) == [(1, 0), (2, 3)]  # producer 1's ends in range


def test_the_lso_waits_for_the_high_watermark_to_pass_the_marker(tmp_path: Path) -> None:
    p, recorder = make_partition(tmp_path)
    p.become_leader(LeadershipState(0, 1, [0, 1], [0, 1]))
    p.append_as_leader(txn(1, 0))  # 0-1
    p.update_follower_fetch_state(1, 2, 0, NOW)
    assert p.high_watermark == 2 and p.last_stable_offset == 0
    p.append_marker(1, 0, COMMIT)  # 2: decided, not yet replicated
    assert p.high_watermark == 2 and p.last_stable_offset == 0
    assert next_offset(read(p, read_committed=True)) == 0
    moves = len(recorder.moves)
    p.update_follower_fetch_state(1, 3, 0, NOW)  # the follower has the marker
    assert p.high_watermark == 3 and p.last_stable_offset == 3
    assert len(recorder.moves) > moves  # read_committed fetches parked on it wake now
    assert next_offset(read(p, read_committed=True)) == 3


def test_markers_are_checked_like_acks_all_appends(tmp_path: Path) -> None:
    p, _ = make_partition(tmp_path)
    p.append_as_leader(txn(1, 0, epoch=3))
    p.become_follower(LeadershipState(1, 1, [0, 1], [0, 1]))
    with pytest.raises(NotLeaderOrFollowerError):
        p.append_marker(1, 3, COMMIT)
    p.become_leader(LeadershipState(0, 2, [0, 1], [0]))
    p.log.update_config(LogConfig.from_properties({"min.insync.replicas": "2"}))
    with pytest.raises(NotEnoughReplicasError):
        p.append_marker(1, 3, COMMIT)
    p.log.update_config(LogConfig())
    with pytest.raises(InvalidProducerEpochError):
        p.append_marker(1, 2, COMMIT)
    p.append_marker(1, 3, EndTxnMarker(True, coordinator_epoch=5))
    with pytest.raises(TransactionCoordinatorFencedError):
        p.append_marker(1, 3, EndTxnMarker(False, coordinator_epoch=4))
    assert p.log.log_end_offset == 3  # refused markers were never written


def test_a_follower_that_becomes_leader_has_the_right_lso(tmp_path: Path) -> None:
    leader, _ = make_partition(tmp_path, node_id=0)
    leader.append_as_leader(txn(1, 0))  # 0-1, aborted below
    leader.append_as_leader(txn(2, 0))  # 2-3, still open when leadership moves
    leader.append_as_leader(plain())  # 4
    leader.append_marker(1, 0, ABORT)  # 5
    follower, _ = make_partition(tmp_path, node_id=1)
    follower.become_follower(LeadershipState(0, 1, [0, 1], [0, 1]))
    region = leader.log.read(0, ALL).region
    assert region is not None
    data = region.read()
    follower.log.append_as_follower(data, list(iter_headers(data)))
    follower.set_follower_high_watermark(6)

    follower.become_leader(LeadershipState(1, 2, [0, 1], [1]))
    assert follower.high_watermark == 6 and follower.last_stable_offset == 2
    fetched = read(follower, read_committed=True)
    assert next_offset(fetched) == 2 and aborted(fetched) == [(1, 0)]
    follower.append_marker(2, 0, COMMIT)
    assert follower.last_stable_offset == follower.log.log_end_offset == 7


def test_the_lso_lag_metric_is_what_an_open_transaction_holds_back(tmp_path: Path) -> None:
    p, _ = make_partition(tmp_path)
    registry = CollectorRegistry()
    registry.register(LastStableOffsetLagCollector(lambda: [p]))

    def lag() -> float | None:
        labels = {"topic": "t", "partition": "0"}
        return registry.get_sample_value("kafka_cluster_partition_laststableoffsetlag", labels)

    p.append_as_leader(plain(2))  # 0-1
    assert lag() == 0
    p.append_as_leader(txn(7, 0))  # 2-3, open
    p.append_as_leader(plain(3))  # 4-6
    assert lag() == p.high_watermark - 2 == 5
    p.append_marker(7, 0, COMMIT)
    assert lag() == 0
