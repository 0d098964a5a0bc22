"""Helpers for the cleaner's transaction tests: transactional producers and a read_committed reader."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from brokers.common.clock import ManualClock
from brokers.log.log import AppendResult, Log
from brokers.records.batch import BatchHeader
from brokers.records.builder import build_batch, read_batch
from brokers.records.control import ABORT, EndTxnMarker, control_type_of
from tests.unit.log.cleaner_helpers import KeyValue, append, stored_batches

Table = dict[bytes | None, bytes]


@dataclass
class TxnProducer:
    """One transactional producer writing to one log (sequences and epoch tracked here)."""

    log: Log
    clock: ManualClock
    producer_id: int
    epoch: int = 0
    next_sequence: int = 0
    open_since: int | None = None  # first offset of its open transaction
    written: list[int] = field(default_factory=list)  # offsets of its open transaction's records

    def send(self, records: Sequence[KeyValue]) -> AppendResult:
        data = build_batch(
            list(records), producer_id=self.producer_id, producer_epoch=self.epoch,
            base_sequence=self.next_sequence, is_transactional=True,
            base_timestamp=self.clock.time_ms(),
        )  # fmt: skip
        result = append(self.log, data)
        self.next_sequence += len(records)
        if self.open_since is None:
            self.open_since = result.first_offset
        self.written.extend(range(result.first_offset, result.last_offset + 1))
        return result

    def end(self, *, commit: bool, epoch: int | None = None) -> int:
        """Write the marker (optionally with a bumped epoch); returns its offset."""
        if epoch is not None and epoch != self.epoch:
            self.epoch, self.next_sequence = epoch, 0
        result = self.log.append_marker(
            self.producer_id, self.epoch, EndTxnMarker(commit, 0), leader_epoch=0
        )
        self.open_since, self.written = None, []
        return result.first_offset


def is_abort_marker(header: BatchHeader, data: bytes) -> bool:
    if not header.is_control or header.records_count == 0:
        return False
    _, records = read_batch(data)
    return control_type_of(records[0]) == ABORT


def read_committed(log: Log, upper: int | None = None) -> Table:
    """What a read_committed consumer rebuilding a table from the log start ends with: reads up
    to the last stable offset (or `upper`), skipping the batches of aborted transactions as
    Kafka's consumer does with the fetch's aborted transactions (from `collect_aborted`)."""
    end = log.last_stable_offset(log.log_end_offset) if upper is None else upper
    ahead = sorted(log.collect_aborted(log.log_start_offset, end), key=lambda t: t.first_offset)
    aborting: set[int] = set()
    table: Table = {}
    for header, data in stored_batches(log):
        if header.base_offset >= end:
            break
        while ahead and ahead[0].first_offset <= header.last_offset:
            aborting.add(ahead.pop(0).producer_id)
        if header.is_control:
            if is_abort_marker(header, data):
                aborting.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in aborting:
            continue
        _, records = read_batch(data)
        for record in records:
            if record.value is None:
                table.pop(record.key, None)
            else:
                table[record.key] = record.value
    return table


def marker_offsets(log: Log) -> list[int]:
    """Offsets of the control batches still holding their marker."""
    return [h.base_offset for h, _ in stored_batches(log) if h.is_control and h.records_count]
