"""Property test: random appends, rolls, truncations, DeleteRecords and restarts (clean or
crashed) against an in-memory model of the partition."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brokers.common.clock import ManualClock
from brokers.log.config import LogConfig
from brokers.log.log import Log
from brokers.records.batch import iter_headers
from tests.unit.log.partition_helpers import append, make_batch, read_all

pytestmark = pytest.mark.unit

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=64, segment_index_bytes=64)


@dataclass
class Model:
    batches: list[tuple[int, int, bytes]] = field(default_factory=list)  # base, last, body
    log_start: int = 0
    log_end: int = 0

    def append(self, records: int, body: bytes) -> None:
        self.batches.append((self.log_end, self.log_end + records - 1, body))
        self.log_end += records

    def truncate_to(self, offset: int) -> None:
        if offset >= self.log_end:
            return
        if offset < self.log_start:
            self.batches, self.log_start, self.log_end = [], offset, offset
            return
        removed = [b for b in self.batches if b[1] >= offset]
        self.batches = [b for b in self.batches if b[1] < offset]
        self.log_end = removed[0][0]
        if self.log_end < self.log_start:
            self.batches, self.log_end = [], self.log_start

    def visible(self) -> list[tuple[int, int, bytes]]:
        return [b for b in self.batches if b[1] >= self.log_start]


operations = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 5), st.integers(0, 250)),
        st.tuples(st.just("roll"), st.just(0), st.just(0)),
        st.tuples(st.just("truncate"), st.floats(0, 1.2), st.just(0)),
        st.tuples(st.just("delete_records"), st.floats(0, 1), st.just(0)),
        st.tuples(st.just("reopen"), st.booleans(), st.just(0)),
    ),
    min_size=1,
    max_size=40,
)


def check(log: Log, model: Model) -> None:
    assert (log.log_start_offset, log.log_end_offset) == (model.log_start, model.log_end)
    stored = read_all(log)
    assert [(b.base_offset, b.last_offset, b.body) for b in stored] == model.visible()
    for base, last, _ in model.visible():
        for offset in {max(base, model.log_start), last}:
            region = log.read(offset, 1).region  # min one batch
            assert region is not None
            headers = [h for _, h in iter_headers(region.read())]
            assert [(h.base_offset, h.last_offset) for h in headers] == [(base, last)]


def reopen(directory: Path, log: Log, clock: ManualClock, clean: bool) -> Log:
    recovery_point, log_start = log.recovery_point, log.log_start_offset
    if clean:
        log.close()
    else:
        log.release()  # a crash: no final index entries, no snapshot
    return Log.open(
        directory, CONFIG, clock=clock, recovery_point=recovery_point,
        log_start_offset=log_start, had_clean_shutdown=clean,
    )  # fmt: skip


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
def test_log_matches_model(ops: list[tuple[str, object, object]]) -> None:
    clock = ManualClock()
    model = Model()
    with tempfile.TemporaryDirectory() as root:
        directory = Path(root) / "prop-0"
        log = Log.open(directory, CONFIG, clock=clock)
        for name, a, b in ops:
            if name == "append":
                assert isinstance(a, int) and isinstance(b, int)
                batch = make_batch(a, value=bytes([a]) * b, timestamp=clock.time_ms())
                assert append(log, batch).first_offset == model.log_end
                model.append(a, batch[61:])
            elif name == "roll":
                log.roll()
            elif name == "truncate":
                assert isinstance(a, float)
                offset = int(a * model.log_end)
                log.truncate_to(offset)
                model.truncate_to(offset)
            elif name == "delete_records":
                assert isinstance(a, float)
                offset = max(model.log_start, int(a * model.log_end))
                assert log.delete_records_before(offset) == offset
                model.log_start = offset
            else:
                log = reopen(directory, log, clock, bool(a))
            clock.advance(7)
            check(log, model)
        log.close()
