"""What waits at the batcher (`gateway.http.batcher`): one request's record, or a stream's run.

Owns: `Pending` (one record of a single-record request; its future gets the record's own
`ProduceResult`) and `Run` (the records a streamed chunk bound for one partition: one entry, one
future and one result for them all, so a streamed record costs the batcher no future, no entry
and no result object of its own), and what the batcher does with a batch of either: its rows
(`rows`), how many records it holds (`count`), answering it from the batch's base offset
(`answer`: record i of the batch at base + i), failing it (`fail`), and splitting it into single
records (`one_by_one`, for a batch the broker refused that must be sent again record by record:
a run's records then each get their own outcome in its `RunResult`). A run never goes in two
batches: it is made at most `MAX_BATCH_RECORDS` records, and a batch takes whole entries.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from brokers.client.producer import ProduceResult
from brokers.records.builder import Row

OVERHEAD_BYTES = 64  # what a record adds to a batch besides its key and value, about
Outcome = ProduceResult | BaseException


@dataclass(slots=True)
class Pending:
    row: Row
    done: asyncio.Future[ProduceResult]
    size: int  # what it adds to a batch, counted once
    count: ClassVar[int] = 1


@dataclass(frozen=True, slots=True)
class RunResult:
    """Where a run's records landed: record i at `first.base_offset + i`, or, when its records
    went one at a time, each its own outcome in `each`."""

    first: ProduceResult | None
    each: tuple[Outcome, ...] | None = None

    def outcome(self, index: int) -> Outcome:
        if self.each is not None:
            return self.each[index]
        first = self.first
        assert first is not None
        return ProduceResult(
            first.base_offset + index, first.log_append_time_ms, first.log_start_offset
        )


@dataclass(slots=True)
class Run:
    rows: list[Row]
    done: asyncio.Future[RunResult]
    size: int

    @property
    def count(self) -> int:
        return len(self.rows)


Entry = Pending | Run


def pending(row: Row, done: asyncio.Future[ProduceResult]) -> Pending:
    key, value = row[0], row[1]
    return Pending(row, done, len(key or b"") + len(value or b"") + OVERHEAD_BYTES)


def run(rows: list[Row], done: asyncio.Future[RunResult]) -> Run:
    size = sum(len(key or b"") + len(value or b"") for key, value, _h, _t in rows)
    return Run(rows, done, size + OVERHEAD_BYTES * len(rows))


def count(entries: Sequence[Entry]) -> int:
    return sum(entry.count for entry in entries)


def rows(entries: Sequence[Entry]) -> list[Row]:
    out: list[Row] = []
    for entry in entries:
        if isinstance(entry, Pending):
            out.append(entry.row)
        else:
            out.extend(entry.rows)
    return out


def answer(entries: Sequence[Entry], result: ProduceResult) -> None:
    """Each entry's result, from the batch's: its records at the batch's offsets, in order."""
    base, appended, start = result.base_offset, result.log_append_time_ms, result.log_start_offset
    index = 0
    for entry in entries:
        if not entry.done.done():
            landed = ProduceResult(base + index, appended, start)
            if isinstance(entry, Pending):
                entry.done.set_result(landed)
            else:
                entry.done.set_result(RunResult(landed))
        index += entry.count


def fail(entries: Sequence[Entry], error: BaseException) -> None:
    for entry in entries:
        if not entry.done.done():
            entry.done.set_exception(error)


def one_by_one(entries: Sequence[Entry]) -> list[Pending]:
    """The entries as single records; a run's result is given once all of its records have
    theirs (each its own outcome)."""
    out: list[Pending] = []
    for entry in entries:
        if isinstance(entry, Pending):
            out.append(entry)
        elif not entry.done.done():
            out.extend(_split(entry))
    return out


def _split(whole: Run) -> list[Pending]:
    loop = asyncio.get_running_loop()
    parts = [pending(row, loop.create_future()) for row in whole.rows]

    def settle(_done: asyncio.Future[ProduceResult]) -> None:
        if whole.done.done() or not all(part.done.done() for part in parts):
            return
        each = tuple(part.done.exception() or part.done.result() for part in parts)
        whole.done.set_result(RunResult(None, each))

    for part in parts:
        part.done.add_done_callback(settle)
    return parts
