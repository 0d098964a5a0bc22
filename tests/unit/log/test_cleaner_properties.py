"""Property: whatever is written and whenever the cleaner runs or dies, compaction loses nothing.

Random keyed updates and tombstones (several keys, random values, batch sizes and codecs, some
from an idempotent producer), rolls,
clock advances, and cleaning rounds with a random upper bound (the high watermark), some killed at
a random step and followed by a reopen without clean shutdown. After every round a reader from
the log start must see, in offset order and at their original offsets, only records that were
written there, the latest value of every live key, no tombstone of a deleted key unless it is the
latest record of that key, no tombstone kept longer than delete.retention.ms after it was cleaned,
every batch at or past the round's first uncleanable offset byte for byte as before, and the
producer's last sequence (Kafka keeps the batch holding it, even emptied).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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
from tests.unit.log.cleaner_helpers import (
    StoredRecord,
    append,
    compact_config,
    keyed_batch,
    read_records,
    stored_batches,
)

pytestmark = pytest.mark.unit

RETENTION_MS = 1000
PRODUCER_ID = 4242
KEYS = 6

records = st.lists(
    st.tuples(st.integers(0, KEYS - 1), st.none() | st.binary(max_size=12)), min_size=1, max_size=6
)
appends = st.tuples(st.just("append"), records, st.integers(0, 4), st.booleans())
operation = st.one_of(
    appends,
    appends,
    appends,
    st.tuples(st.just("roll")),
    st.tuples(st.just("advance"), st.integers(0, 1500)),
    st.tuples(
        st.just("clean"), st.none() | st.integers(1, 8) | st.integers(3, 7), st.integers(0, 100)
    ),
)


class Crash(BaseException):
    """A simulated process death (no Exception handler runs)."""


@dataclass
class World:
    root: Path
    clock: ManualClock
    config: LogConfig
    map_bytes: int
    log: Log
    written: dict[int, tuple[bytes, bytes | None]]
    next_sequence: int = 0  # of the idempotent producer PRODUCER_ID

    def append(self, batch: list[tuple[bytes, bytes | None]], codec: int, idempotent: bool) -> None:
        producer = {}
        if idempotent:
            producer = {"producer_id": PRODUCER_ID, "producer_epoch": 0}
            producer["base_sequence"] = self.next_sequence
            self.next_sequence += len(batch)
        data = keyed_batch(batch, timestamp=self.clock.time_ms(), codec=codec, **producer)
        result = append(self.log, data)
        for index, record in enumerate(batch):
            self.written[result.first_offset + index] = record

    def clean(self, crash_at: int | None, upper_percent: int) -> None:
        log = self.log
        upper = (
            log.log_start_offset
            + (log.log_end_offset - log.log_start_offset) * upper_percent // 100
        )
        cleaner = LogCleaner(
            self.root, clock=self.clock, config=CleanerConfig(dedupe_buffer_size=self.map_bytes),
            fault=None if crash_at is None else _crash_on_call(crash_at),
        )  # fmt: skip
        cleaner.startup()
        now = self.clock.time_ms()
        first_uncleanable = cleaner.manager.log_to_clean(log, now, upper).first_uncleanable
        untouched = [b for b in stored_batches(log) if b[0].last_offset >= first_uncleanable]
        end_before = log.log_end_offset
        try:
            cleaned = cleaner.clean_log(log, now_ms=now, upper_bound_offset=upper) is not None
        except Crash as crash:
            event(f"crashed at {crash}")
            cleaned = False
            log.release()
            self.log = self.reopen_from_log_alone(clean=False)
        assert self.log.log_end_offset == end_before
        after = stored_batches(self.log)
        assert [b for b in after if b[0].last_offset >= first_uncleanable] == untouched
        self.check_records(read_records(self.log))
        self.check_producer_state()
        if cleaned:
            event("round completed")
            end = cleaner.manager.first_dirty_checkpoint(("compacted", 0))
            assert end is not None
            self.check_tombstone_horizons(read_records(self.log), end, now)

    def check_records(self, seen: list[StoredRecord]) -> None:
        offsets = [r.offset for r in seen]
        assert offsets == sorted(set(offsets))
        assert all(self.written[r.offset] == (r.key, r.value) for r in seen)
        latest: dict[bytes, int] = {}
        for offset, (key, _) in sorted(self.written.items()):
            latest[key] = offset
        present = {r.offset for r in seen}
        keys_present = {r.key for r in seen}
        for key, offset in latest.items():
            if self.written[offset][1] is not None:
                assert offset in present, f"latest value of {key!r} at {offset} lost"
            else:
                assert offset in present or key not in keys_present, f"{key!r} resurrected"

    def reopen_from_log_alone(self, *, clean: bool) -> Log:
        """Reopen without producer snapshots: producer state then comes from the batches."""
        for snapshot in self.log.directory.glob("*.snapshot"):
            snapshot.unlink()
        return Log.open(self.log.directory, self.config, clock=self.clock, had_clean_shutdown=clean)

    def check_producer_state(self) -> None:
        """Kafka's retainLastBatchSequence: the producer's last sequence survives cleaning."""
        entry = self.log.producer_state.last_entry(PRODUCER_ID)
        if self.next_sequence:
            assert entry is not None and entry.last_sequence == self.next_sequence - 1
        else:
            assert entry is None

    def check_tombstone_horizons(self, seen: list[StoredRecord], end: int, now: int) -> None:
        for record in seen:
            if record.value is None and record.offset < end:
                assert record.horizon is not None
                assert now < record.horizon <= now + RETENTION_MS


def _crash_on_call(number: int) -> Callable[[str], None]:
    calls: list[str] = []

    def fault(step: str) -> None:
        calls.append(step)
        if len(calls) == number:
            raise Crash(step)

    return fault


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    operations=st.lists(operation, min_size=5, max_size=40),
    map_bytes=st.sampled_from([24 * 8, 24 * 1000]),
)
def test_compaction_keeps_the_latest_value_of_every_key_through_crashes(
    tmp_path_factory: pytest.TempPathFactory, operations: list[tuple[Any, ...]], map_bytes: int
) -> None:
    root = tmp_path_factory.mktemp("compaction")
    clock = ManualClock()
    config = compact_config(segment_bytes=600, delete_retention_ms=RETENTION_MS)
    log = Log.open(root / "compacted-0", config, clock=clock)
    world = World(root, clock, config, map_bytes, log, {})
    for op in operations:
        if op[0] == "append":
            world.append([(b"k%d" % key, value) for key, value in op[1]], op[2], op[3])
        elif op[0] == "roll":
            world.log.roll()
        elif op[0] == "advance":
            clock.advance(op[1])
        else:
            world.clean(op[1], op[2])
    world.log.roll()
    world.clean(None, 100)
    world.log.close()
    world.log = world.reopen_from_log_alone(clean=True)
    world.check_records(read_records(world.log))
    world.check_producer_state()
    world.log.close()
