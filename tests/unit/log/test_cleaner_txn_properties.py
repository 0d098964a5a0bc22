"""Property: compaction never changes what a read_committed consumer reads, and tidies transactions.

Random interleavings of plain keyed writes (tombstones too), three transactional producers (sends,
commits, aborts, epoch bumps by the coordinator, stray markers), rolls, clock advances, high
watermark moves and cleaning rounds with random upper bounds and offset map sizes, some killed at
a random step and followed by a restart without clean shutdown. After every round:
- a read_committed reader (Kafka's consumer: aborted transactions from `collect_aborted`, up to the
  last stable offset) rebuilds the same key -> value table as a model of what was committed;
- no record of an aborted transaction is left below the round's end;
- every transaction with a batch still in the log still has its marker; a marker is gone only if
  delete.retention.ms passed since it was written; every listed aborted transaction has its ABORT
  marker in the log;
- every batch at or past the round's first uncleanable offset is byte for byte as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from brokers.common.clock import ManualClock
from brokers.log.cleaner.config import CleanerConfig
from brokers.log.cleaner.log_cleaner import LogCleaner
from brokers.log.config import LogConfig
from brokers.log.log import Log
from brokers.records.batch import BatchHeader
from tests.unit.log.cleaner_helpers import append_records, compact_config, stored_batches
from tests.unit.log.cleaner_txn_helpers import Table, TxnProducer, read_committed

pytestmark = pytest.mark.unit

RETENTION_MS = 1000
KEYS = 5
PRODUCERS = 3

records = st.lists(
    st.tuples(st.integers(0, KEYS - 1), st.none() | st.binary(min_size=1, max_size=6)),
    min_size=1, max_size=4,
)  # fmt: skip
operation = st.one_of(
    st.tuples(st.just("plain"), records),
    st.tuples(st.just("send"), st.integers(0, PRODUCERS - 1), records),
    st.tuples(st.just("send"), st.integers(0, PRODUCERS - 1), records),
    st.tuples(st.just("end"), st.integers(0, PRODUCERS - 1), st.booleans(), st.booleans()),
    st.tuples(st.just("roll")),
    st.tuples(st.just("advance"), st.integers(0, 1500)),
    st.tuples(st.just("replicate"), st.integers(0, 100)),
    st.tuples(
        st.just("clean"),
        st.integers(0, 100),
        st.sampled_from([24 * 6, 24 * 1000]),
        st.none() | st.integers(1, 8),
    ),
)


class Crash(BaseException):
    """A simulated process death (no Exception handler runs)."""


@dataclass
class Txn:
    producer_id: int
    first_offset: int | None = None
    marker_offset: int | None = None
    marker_time: int = 0
    commit: bool = False


@dataclass
class World:
    root: Path
    clock: ManualClock
    config: LogConfig
    log: Log
    producers: list[TxnProducer] = field(default_factory=list)
    written: dict[int, tuple[bytes, bytes | None, Txn | None]] = field(default_factory=dict)
    txns: list[Txn] = field(default_factory=list)
    open: dict[int, Txn] = field(default_factory=dict)
    hw: int = 0

    def plain(self, batch: list[tuple[bytes, bytes | None]]) -> None:
        result = append_records(self.log, self.clock, batch)
        for index, (key, value) in enumerate(batch):
            self.written[result.first_offset + index] = (key, value, None)

    def send(self, index: int, batch: list[tuple[bytes, bytes | None]]) -> None:
        producer = self.producers[index]
        txn = self.open.get(producer.producer_id)
        if txn is None:
            txn = self.open[producer.producer_id] = Txn(producer.producer_id)
        result = producer.send(batch)
        if txn.first_offset is None:
            txn.first_offset = result.first_offset
        for n, (key, value) in enumerate(batch):
            self.written[result.first_offset + n] = (key, value, txn)

    def end(self, index: int, commit: bool, bump: bool) -> None:
        producer = self.producers[index]
        txn = self.open.pop(producer.producer_id, None) or Txn(producer.producer_id)
        epoch = producer.epoch + 1 if bump and not commit else None
        txn.commit, txn.marker_time = commit, self.clock.time_ms()
        txn.marker_offset = producer.end(commit=commit, epoch=epoch)
        self.txns.append(txn)

    def replicate(self, percent: int) -> None:
        """Move the high watermark to a batch boundary (followers fetch whole batches)."""
        ends = [
            h.next_offset for h, _ in stored_batches(self.log, self.hw) if h.next_offset > self.hw
        ]
        if ends:
            self.hw = ends[(len(ends) - 1) * percent // 100]
            self.log.high_watermark = self.hw

    def stable_offset(self) -> int:
        return self.log.last_stable_offset(self.hw)

    def committed_view(self, upper: int) -> Table:
        """The model: records below `upper` that are plain or of a committed transaction."""
        table: Table = {}
        for offset in sorted(self.written):
            key, value, txn = self.written[offset]
            if offset >= upper or (txn is not None and not txn.commit):
                continue
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
        return table

    def clean(self, upper_percent: int, map_bytes: int, crash_at: int | None) -> None:
        upper = (
            self.log.log_start_offset + (self.hw - self.log.log_start_offset) * upper_percent // 100
        )
        cleaner = LogCleaner(
            self.root, clock=self.clock, config=CleanerConfig(dedupe_buffer_size=map_bytes),
            fault=None if crash_at is None else _crash_on_call(crash_at),
        )  # fmt: skip
        cleaner.startup()
        now = self.clock.time_ms()
        first_uncleanable = cleaner.manager.log_to_clean(self.log, now, upper).first_uncleanable
        lso = self.stable_offset()
        assert first_uncleanable <= lso
        before = stored_batches(self.log)
        view = read_committed(self.log, lso)
        assert view == self.committed_view(lso)
        end = None
        try:
            if cleaner.clean_log(self.log, now_ms=now, upper_bound_offset=upper) is not None:
                end = cleaner.manager.first_dirty_checkpoint(("compacted", 0))
                event("round completed")
        except Crash as crash:
            event(f"crashed at {crash}")
            self.restart()
        after = stored_batches(self.log)
        untouched = [b for b in before if b[0].last_offset >= first_uncleanable]
        assert [b for b in after if b[0].last_offset >= first_uncleanable] == untouched
        assert read_committed(self.log, lso) == view
        self.check_transactions(after, end, now)

    def restart(self) -> None:
        self.log.release()
        self.log = Log.open(self.log.directory, self.config, clock=self.clock)
        self.log.high_watermark = self.hw
        for producer in self.producers:
            producer.log = self.log

    def check_transactions(
        self, batches: list[tuple[BatchHeader, bytes]], end: int | None, now: int
    ) -> None:
        headers = {h.base_offset: h for h, _ in batches}
        markers = {o for o, h in headers.items() if h.is_control and h.records_count}
        data_of: dict[int, set[int]] = {}  # producer id -> offsets of its remaining data batches
        for offset, header in headers.items():
            if header.is_transactional and not header.is_control:
                data_of.setdefault(header.producer_id, set()).add(offset)
        for txn in self.txns:
            assert txn.marker_offset is not None
            first = txn.marker_offset if txn.first_offset is None else txn.first_offset
            remaining = [
                o for o in data_of.get(txn.producer_id, ()) if first <= o < txn.marker_offset
            ]
            if remaining:
                assert txn.marker_offset in markers, f"marker of {txn} gone, data left"
            if txn.marker_offset not in markers:
                assert now >= txn.marker_time + RETENTION_MS, f"marker of {txn} gone early"
            if end is not None and not txn.commit:
                assert not [o for o in remaining if headers[o].records_count and o < end]
        for aborted in self.log.collect_aborted(0, self.log.log_end_offset):
            assert aborted.last_offset in markers, f"{aborted} listed without its marker"


def _crash_on_call(number: int) -> Callable[[str], None]:
    calls: list[str] = []

    def fault(step: str) -> None:
        calls.append(step)
        if len(calls) == number:
            raise Crash(step)

    return fault


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(operations=st.lists(operation, min_size=5, max_size=40))
def test_compaction_keeps_the_read_committed_view_of_transactions(
    tmp_path_factory: pytest.TempPathFactory, operations: list[tuple[Any, ...]]
) -> None:
    root = tmp_path_factory.mktemp("txn-compaction")
    clock = ManualClock()
    config = compact_config(segment_bytes=500, delete_retention_ms=RETENTION_MS)
    log = Log.open(root / "compacted-0", config, clock=clock)
    log.high_watermark = 0
    world = World(root, clock, config, log)
    world.producers = [TxnProducer(log, clock, 100 + n) for n in range(PRODUCERS)]
    for op in operations:
        if op[0] == "plain":
            world.plain([(b"k%d" % key, value) for key, value in op[1]])
        elif op[0] == "send":
            world.send(op[1], [(b"k%d" % key, value) for key, value in op[2]])
        elif op[0] == "end":
            world.end(op[1], op[2], op[3])
        elif op[0] == "roll":
            world.log.roll()
        elif op[0] == "advance":
            clock.advance(op[1])
        elif op[0] == "replicate":
            world.replicate(op[1])
        else:
            world.clean(op[1], op[2], op[3])
    for index, producer in enumerate(world.producers):
        if producer.producer_id in world.open:
            world.end(index, False, False)
    world.log.roll()
    world.replicate(100)
    world.clean(100, 24 * 1000, None)
    assert world.stable_offset() == world.log.log_end_offset
    assert read_committed(world.log) == world.committed_view(world.log.log_end_offset)
    world.log.close()
    reopened = Log.open(world.log.directory, config, clock=clock)  # rebuilt from the log
    assert read_committed(reopened) == world.committed_view(reopened.log_end_offset)
    reopened.close()
