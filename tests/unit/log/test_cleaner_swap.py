"""The cleaner against crashes, concurrent reads, log changes and its asynchronous driver."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from brokers.common.clock import ManualClock
from brokers.log.cleaner.cleaner import CleanerStats, CleaningAbortedError, CleaningPlan
from brokers.log.cleaner.cleaning_pass import CleaningPass
from brokers.log.cleaner.config import CleanerConfig
from brokers.log.cleaner.log_cleaner import LogCleaner
from brokers.log.cleaner.transactions import CleanedTransactions
from brokers.log.log import Log
from tests.polling import wait_until_async
from tests.unit.log.cleaner_helpers import (
    StoredRecord,
    append_records,
    compact_config,
    new_cleaner,
    open_compacted,
    read_records,
    segment_files,
    stored_batches,
    values_by_key,
)

pytestmark = pytest.mark.unit

Table = dict[bytes | None, bytes | None]
SWAP_STEPS = ("swap", "swap-renamed", "swap-replaced", "swap-done")


class Crash(BaseException):
    """A simulated process death: not an Exception, so no cleanup handler runs."""


def crash_on_call(number: int) -> tuple[Callable[[str], None], list[str]]:
    steps: list[str] = []

    def fault(step: str) -> None:
        steps.append(step)
        if len(steps) == number:
            raise Crash(step)

    return fault, steps


def populate(log: Log, clock: ManualClock) -> None:
    """Several segments of updates and tombstones, some past their delete horizon later."""
    for n in range(30):
        append_records(log, clock, [(b"k%d" % i, b"%d-%d" % (n, i)) for i in range(4)], n % 5)
        if n % 9 == 8:
            append_records(log, clock, [(b"k%d" % (n % 4), None)])
    log.roll()


def assert_consistent(
    records: list[StoredRecord], original: dict[int, StoredRecord], table: Table
) -> None:
    """Offsets increase, every record is the one written at its offset, every key reads right."""
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets))
    for record in records:
        written = original[record.offset]
        assert (record.key, record.value, record.timestamp) == (
            written.key,
            written.value,
            written.timestamp,
        )
    seen = values_by_key(records)
    for key, value in table.items():
        assert seen.get(key) == value or (value is None and key not in seen)


def test_a_crash_at_any_step_of_a_round_loses_nothing(tmp_path: Path) -> None:
    number, completed = 1, False
    while not completed:
        clock = ManualClock()
        root = tmp_path / f"crash-{number}"
        log = open_compacted(root, clock)
        populate(log, clock)
        new_cleaner(root, clock).clean_log(log)  # tombstones get their horizon
        clock.advance(2000)  # ... which the next round passes
        populate(log, clock)
        original = {r.offset: r for r in read_records(log)}
        table = values_by_key(read_records(log))
        end = log.log_end_offset
        fault, steps = crash_on_call(number)
        cleaner = LogCleaner(
            root, clock=clock, config=CleanerConfig(dedupe_buffer_size=24 * 1000), fault=fault
        )
        cleaner.startup()
        try:
            cleaner.clean_log(log)
            completed = True
        except Crash:
            pass
        log.release()  # the process died: nothing is flushed or closed cleanly
        reopened = Log.open(log.directory, log.config, clock=clock, had_clean_shutdown=False)
        assert reopened.log_end_offset == end
        assert not [f for f in segment_files(reopened) if f.endswith((".cleaned", ".swap"))]
        assert_consistent(read_records(reopened), original, table)

        new_cleaner(root, clock).clean_log(reopened)  # the next round finishes the job
        final = read_records(reopened)
        assert_consistent(final, original, table)
        assert {r.key for r in final if r.value is None} <= {r.key for r in final}
        assert len(final) <= 4 + 4  # at most the latest per key, plus the active segment's
        reopened.close()
        number += 1
    assert set(SWAP_STEPS) <= set(steps) and steps.count("swap") > 1  # several groups crossed


def test_reads_during_a_round_see_consistent_data_and_old_regions_stay_valid(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock, compact_config(file_delete_delay_ms=60_000))
    populate(log, clock)
    original = {r.offset: r for r in read_records(log)}
    table = values_by_key(read_records(log))
    cleaner = new_cleaner(tmp_path, clock)
    target = cleaner.manager.log_to_clean(log, clock.time_ms(), log.log_end_offset)
    cleaning = CleaningPass.start(
        log, first_dirty=target.first_dirty, first_uncleanable=target.first_uncleanable,
        now_ms=clock.time_ms(), clock=clock,
    )  # fmt: skip
    in_flight = log.read(0, 1 << 20)  # a fetch response not yet sent
    assert in_flight.region is not None
    sent_later = in_flight.region.read()
    stats = CleanerStats()
    end = cleaner.cleaner.build_offset_map(cleaning.plan, stats)
    context = cleaner.cleaner.filter_context(cleaning.plan)
    groups = cleaning.groups(end)
    transactions = CleanedTransactions()
    assert len(groups) > 2
    for group in groups:
        cleaned = cleaner.cleaner.clean_group(cleaning.plan, group, context, transactions, stats)
        assert_consistent(read_records(log), original, table)  # the cleaned copy is not visible
        cleaning.swap(group, cleaned)
        assert_consistent(read_records(log), original, table)
    cleaning.close()

    assert in_flight.region.read() == sent_later  # the old file is renamed, not gone
    assert len(read_records(log)) < len(original)
    assert log.delete_expired_segment_files(clock.time_ms() + 60_000) > 0


def test_a_log_truncated_during_a_round_is_not_swapped(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    populate(log, clock)
    cleaner = new_cleaner(tmp_path, clock)
    target = cleaner.manager.log_to_clean(log, clock.time_ms(), log.log_end_offset)
    cleaning = CleaningPass.start(
        log, first_dirty=target.first_dirty, first_uncleanable=target.first_uncleanable,
        now_ms=clock.time_ms(), clock=clock,
    )  # fmt: skip
    end = cleaner.cleaner.build_offset_map(cleaning.plan, CleanerStats())
    group = cleaning.groups(end)[0]
    cleaned = cleaner.cleaner.clean_group(
        cleaning.plan, group, cleaner.cleaner.filter_context(cleaning.plan),
        CleanedTransactions(), CleanerStats(),
    )  # fmt: skip
    log.truncate_to(log.segments[1].base_offset + 1)  # a follower truncating below the round
    before = stored_batches(log)

    with pytest.raises(CleaningAbortedError):
        cleaning.swap(group, cleaned)
    cleaning.close()
    assert stored_batches(log) == before
    assert not [f for f in segment_files(log) if f.endswith((".cleaned", ".swap"))]


class TickingClock(ManualClock):
    """Monotonic time moves one second per reading, so the throttle always finds a rate."""

    def monotonic(self) -> float:
        self.advance(1000)
        return super().monotonic()


def test_async_driver_runs_the_heavy_part_off_the_loop_and_swaps_on_it(tmp_path: Path) -> None:
    clock = ManualClock()
    log = open_compacted(tmp_path, clock)
    populate(log, clock)
    table = values_by_key(read_records(log))
    threads: dict[str, set[int]] = {"swap": set(), "map": set()}

    def record_swap_thread(step: str) -> None:
        if step in SWAP_STEPS:
            threads["swap"].add(threading.get_ident())

    cleaner = LogCleaner(
        tmp_path, clock=clock, config=CleanerConfig(dedupe_buffer_size=24 * 1000),
        fault=record_swap_thread,
    )  # fmt: skip
    build = cleaner.cleaner.build_offset_map

    def recording_build(plan: CleaningPlan, stats: CleanerStats) -> int:
        threads["map"].add(threading.get_ident())
        return build(plan, stats)

    cleaner.cleaner.build_offset_map = recording_build  # type: ignore[method-assign]

    async def scenario() -> tuple[int, int]:
        return await cleaner.run_async([log]), threading.get_ident()

    rounds, loop_thread = asyncio.run(scenario())
    assert rounds == 1
    assert threads["swap"] == {loop_thread}
    assert threads["map"] and loop_thread not in threads["map"]
    assert values_by_key(read_records(log)) == table
    assert cleaner.manager.first_dirty_checkpoint(("compacted", 0)) == log.log_end_offset


def test_cancelling_the_async_driver_aborts_the_worker_and_releases_everything(
    tmp_path: Path,
) -> None:
    clock = TickingClock()
    log = open_compacted(tmp_path, clock)
    populate(log, clock)
    before = stored_batches(log)
    entered, release = threading.Event(), threading.Event()

    def blocking_sleep(seconds: float) -> None:
        entered.set()
        release.wait(10)

    cleaner = LogCleaner(
        tmp_path, clock=clock, sleep=blocking_sleep,
        config=CleanerConfig(dedupe_buffer_size=24 * 1000, io_max_bytes_per_second=10),
    )  # fmt: skip

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        task = asyncio.create_task(cleaner.run_async([log]))
        assert await loop.run_in_executor(None, entered.wait, 10)
        assert read_records(log)  # the loop serves reads while the worker runs
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await cleaner.run_async([log]) == 0  # the worker still runs: no second round
        release.set()

        async def worker_done() -> bool:
            return not cleaner._busy

        await wait_until_async(worker_done, what="the cancelled round's worker done", timeout=10)

    asyncio.run(scenario())
    assert stored_batches(log) == before
    assert not [f for f in segment_files(log) if f.endswith((".cleaned", ".swap"))]
    assert cleaner.run([log]) == 1  # abort requests do not outlive the round
