"""The log cleaner of one log dir: compaction rounds over its compacted logs (Kafka's LogCleaner).

Owns: the Cleaner (offset map of log.cleaner.dedupe.buffer.size, I/O throttle) and the
CleanerManager of one log dir, built from a `CleanerConfig`; the two drivers and the metrics.

A round over one log: plan (`CleaningPass.start`), offset map of the dirty section, then group by
group a cleaned segment written aside and swapped in; finally the cleaner checkpoint moves to the
round's end offset. The groups of a round share one `CleanedTransactions`, which decides what
becomes of aborted data and transaction markers (see `transactions`, `batch_filter`). Drivers, each cleaning every eligible log at most once, filthiest first:
- `run(logs)`: the whole round on the calling thread. Simple and deterministic (tests, tools), but a
  round blocks the event loop for its duration, throttle naps included.
- `await run_async(logs)`: the broker's choice, scheduled every log.cleaner.backoff.ms. The heavy
  steps (offset map; each group's cleaned segment) run on the loop's default executor thread:
  they touch no Log (see `cleaner`). Planning and every swap run on the loop between those steps,
  so a swap is atomic for readers and appenders, and a log that changed meanwhile (truncation,
  retention, deletion) aborts the round instead of being swapped. The worker holds the GIL while
  it decodes records, so the loop shares the CPU with it; the throttle bounds the rate.
  Cancelling it aborts the worker at its next batch; its descriptors and files are released when
  it stops, and no new round starts before that.
Outcomes: CleaningAbortedError (or a log closed meanwhile) ends a round quietly; any other error
marks the partition uncleanable (Kafka's markPartitionUncleanable) and is logged; a BaseException
propagates untouched (tests simulate crashes with one). `fault` is a test hook called at named
steps ("plan", "map", "cleaned", then the swap steps of `cleaning_pass`).

Metrics: `metrics` (CleanerMetrics) and the manager's max_dirty_ratio / max_compaction_delay_ms /
uncleanable, all plain attributes for the broker to export. Runs on the event loop; not thread-safe
apart from the worker steps described above.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from brokers.common.clock import Clock
from brokers.log.cleaner.cleaner import Cleaner, CleanerStats, CleaningAbortedError
from brokers.log.cleaner.cleaning_pass import CleaningPass, Fault
from brokers.log.cleaner.config import CleanerConfig
from brokers.log.cleaner.manager import CleanerManager, LogToClean
from brokers.log.cleaner.offset_map import OffsetMap
from brokers.log.cleaner.throttler import Throttler
from brokers.log.cleaner.transactions import CleanedTransactions
from brokers.log.log import Log
from brokers.log.segment import LogSegment

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(slots=True)
class CleanerMetrics:
    rounds: int = 0
    rounds_aborted: int = 0
    rounds_failed: int = 0
    bytes_read: int = 0  # cleaning reads, all rounds
    bytes_written: int = 0
    map_bytes_read: int = 0
    records_read: int = 0
    records_removed: int = 0
    last_round_ms: float = 0.0  # duration of the last round
    last_buffer_utilization: float = 0.0  # Kafka's max-buffer-utilization-percent / 100
    last_recopy_ratio: float = 0.0  # Kafka's cleaner-recopy-percent / 100
    last_run_ms: int = 0  # wall clock of the last run (Kafka's time-since-last-run-ms)


class LogCleaner:
    def __init__(
        self, log_dir: Path, *, clock: Clock, config: CleanerConfig | None = None,
        sleep: Callable[[float], None] = time.sleep, fault: Fault | None = None,
    ) -> None:  # fmt: skip
        self.config = config or CleanerConfig()
        self.manager = CleanerManager(log_dir)
        self.metrics = CleanerMetrics()
        self._clock = clock
        self._fault = fault
        offset_map = OffsetMap(self.config.dedupe_buffer_size, self.config.io_buffer_load_factor)
        throttler = Throttler(self.config.io_max_bytes_per_second, clock=clock, sleep=sleep)
        self.cleaner = Cleaner(offset_map, throttler, io_buffer_size=self.config.io_buffer_size)
        self._busy = False
        self._worker_abandoned = False
        self._round_started = 0.0

    def startup(self) -> None:
        self.manager.load()

    def shutdown(self) -> None:
        """Stop a round in progress at its next batch (its swap then never happens)."""
        self.cleaner.abort()

    def forget(self, topic: str, partition: int) -> None:
        self.manager.forget((topic, partition))

    # -- synchronous driver ---------------------------------------------------------------------

    def run(self, logs: Iterable[Log], now_ms: int | None = None) -> int:
        """Clean each eligible log once on this thread; returns how many rounds completed."""
        if not self.config.enable or self._busy:
            return 0
        self._busy = True
        try:
            return sum(self._guarded(target, now_ms) for target in self._targets(logs, now_ms))
        finally:
            self._busy = False

    def clean_log(
        self, partition_log: Log, *, now_ms: int | None = None,
        upper_bound_offset: int | None = None,
    ) -> CleanerStats | None:  # fmt: skip
        """One round over `partition_log` now, eligible or not (tests, tools). `upper_bound_offset`
        defaults to the high watermark (the log end without replication). Errors propagate."""
        now = self._clock.time_ms() if now_ms is None else now_ms
        bound = _upper_bound(partition_log) if upper_bound_offset is None else upper_bound_offset
        return self.clean_target(self.manager.log_to_clean(partition_log, now, bound), now)

    def clean_target(self, target: LogToClean, now_ms: int) -> CleanerStats | None:
        """A whole round on this thread; None when there was nothing dirty to clean."""
        cleaning = self._start(target, now_ms)
        try:
            stats = CleanerStats()
            end = self.cleaner.build_offset_map(cleaning.plan, stats)
            self._step("map")
            if end <= target.first_dirty:
                return None
            context = self.cleaner.filter_context(cleaning.plan)
            transactions = CleanedTransactions()
            for group in cleaning.groups(end):
                cleaned = self.cleaner.clean_group(
                    cleaning.plan, group, context, transactions, stats
                )
                self._step("cleaned")
                cleaning.swap(group, cleaned)
            return self._done(target, end, stats)
        finally:
            cleaning.close()

    # -- asynchronous driver --------------------------------------------------------------------

    async def run_async(self, logs: Iterable[Log], now_ms: int | None = None) -> int:
        """Like `run`, with the heavy steps on a worker thread (see the module docstring)."""
        if not self.config.enable or self._busy:
            return 0
        self._busy = True
        try:
            done = 0
            for target in self._targets(logs, now_ms):
                done += await self._guarded_async(target, now_ms)
            return done
        finally:
            if not self._worker_abandoned:  # else the worker's completion clears it
                self._busy = False

    async def _round_async(self, target: LogToClean, now_ms: int) -> CleanerStats | None:
        cleaning = self._start(target, now_ms)
        worker: asyncio.Future[object] | None = None
        loop = asyncio.get_running_loop()
        try:
            stats = CleanerStats()
            worker = loop.run_in_executor(None, self.cleaner.build_offset_map, cleaning.plan, stats)
            end = await _await_worker(worker, self.cleaner)
            assert isinstance(end, int)
            self._step("map")
            if end <= target.first_dirty:
                return None
            context = self.cleaner.filter_context(cleaning.plan)
            transactions = CleanedTransactions()
            for group in cleaning.groups(end):
                worker = loop.run_in_executor(
                    None, self.cleaner.clean_group, cleaning.plan, group, context, transactions,
                    stats,
                )  # fmt: skip
                cleaned = await _await_worker(worker, self.cleaner)
                assert isinstance(cleaned, LogSegment)
                self._step("cleaned")
                cleaning.swap(group, cleaned)
            return self._done(target, end, stats)
        finally:
            if worker is not None and not worker.done():  # cancelled while the worker runs
                self._worker_abandoned = True
                worker.add_done_callback(lambda future: self._after_abandoned(future, cleaning))
            else:
                cleaning.close()

    def _after_abandoned(self, worker: asyncio.Future[object], cleaning: CleaningPass) -> None:
        if not worker.cancelled() and worker.exception() is None:
            result = worker.result()
            if isinstance(result, LogSegment):
                result.delete_files()
        cleaning.close()
        self._worker_abandoned = self._busy = False

    async def _guarded_async(self, target: LogToClean, now_ms: int | None) -> int:
        now = self._clock.time_ms() if now_ms is None else now_ms
        try:
            return 0 if await self._round_async(target, now) is None else 1
        except Exception as exc:
            self._failed(target, exc)
            return 0

    # -- shared steps ---------------------------------------------------------------------------

    def _targets(self, logs: Iterable[Log], now_ms: int | None) -> Iterator[LogToClean]:
        candidates = list(logs)
        seen: set[tuple[str, int]] = set()
        while True:
            now = self._clock.time_ms() if now_ms is None else now_ms
            self.metrics.last_run_ms = now
            target = self.manager.grab_filthiest(candidates, now, _upper_bound, frozenset(seen))
            if target is None:
                return
            seen.add((target.log.topic, target.log.partition))
            yield target

    def _guarded(self, target: LogToClean, now_ms: int | None) -> int:
        now = self._clock.time_ms() if now_ms is None else now_ms
        try:
            return 0 if self.clean_target(target, now) is None else 1
        except Exception as exc:
            self._failed(target, exc)
            return 0

    def _start(self, target: LogToClean, now_ms: int) -> CleaningPass:
        self.cleaner.reset()
        self._round_started = self._clock.monotonic()
        cleaning = CleaningPass.start(
            target.log, first_dirty=target.first_dirty,
            first_uncleanable=target.first_uncleanable, now_ms=now_ms, clock=self._clock,
            fault=self._fault,
        )  # fmt: skip
        try:
            self._step("plan")
        except BaseException:
            cleaning.close()
            raise
        return cleaning

    def _done(self, target: LogToClean, end_offset: int, stats: CleanerStats) -> CleanerStats:
        self.manager.done_cleaning((target.log.topic, target.log.partition), end_offset)
        self._step("checkpoint")
        metrics = self.metrics
        metrics.rounds += 1
        metrics.bytes_read += stats.bytes_read
        metrics.bytes_written += stats.bytes_written
        metrics.map_bytes_read += stats.map_bytes_read
        metrics.records_read += stats.records_read
        metrics.records_removed += stats.records_read - stats.records_kept
        metrics.last_round_ms = (self._clock.monotonic() - self._round_started) * 1000
        metrics.last_buffer_utilization = self.cleaner.offset_map.utilization
        metrics.last_recopy_ratio = (
            stats.bytes_written / stats.bytes_read if stats.bytes_read else 0
        )
        log.info(
            "event=log_cleaned partition=%s end_offset=%d read_bytes=%d written_bytes=%d "
            "records_removed=%d ms=%.0f", target.log.directory.name, end_offset,
            stats.bytes_read, stats.bytes_written, stats.records_read - stats.records_kept,
            metrics.last_round_ms,
        )  # fmt: skip
        return stats

    def _failed(self, target: LogToClean, exc: Exception) -> None:
        name = target.log.directory.name
        if isinstance(exc, CleaningAbortedError) or target.log.closed:
            self.metrics.rounds_aborted += 1
            log.info("event=log_cleaning_aborted partition=%s reason=%r", name, exc)
            return
        self.metrics.rounds_failed += 1
        self.manager.mark_uncleanable((target.log.topic, target.log.partition))
        log.error("event=log_cleaning_failed partition=%s error=%r", name, exc, exc_info=exc)

    def _step(self, name: str) -> None:
        if self._fault is not None:
            self._fault(name)


async def _await_worker(worker: asyncio.Future[object], cleaner: Cleaner) -> object:
    try:
        return await asyncio.shield(worker)
    except asyncio.CancelledError:
        cleaner.abort()  # the worker stops at its next batch
        raise


def _upper_bound(partition_log: Log) -> int:
    hw = partition_log.high_watermark
    return partition_log.log_end_offset if hw is None else hw
