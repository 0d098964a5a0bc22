"""Leader epoch cache: Kafka's assign rules, KIP-279 end offsets, truncation, checkpoint file."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.log.leader_epoch_cache import LeaderEpochCache

pytestmark = pytest.mark.unit

UNDEFINED = (-1, -1)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "leader-epoch-checkpoint"


@pytest.fixture
def cache(path: Path) -> LeaderEpochCache:
    cache = LeaderEpochCache(path)
    for epoch, start in [(1, 5), (3, 10), (5, 20)]:
        cache.assign(epoch, start)
    return cache


# -- assign -----------------------------------------------------------------------------------


def test_empty_cache(path: Path) -> None:
    cache = LeaderEpochCache(path)
    assert cache.latest_epoch() is None
    assert cache.entries() == []
    assert cache.end_offset_for(0, 100) == UNDEFINED
    assert cache.epoch_for_offset(0) is None
    assert not path.exists()  # nothing written until something changes


def test_assign_appends_and_writes_kafkas_format(cache: LeaderEpochCache, path: Path) -> None:
    assert cache.entries() == [(1, 5), (3, 10), (5, 20)]
    assert cache.latest_epoch() == 5
    assert cache.latest_entry() == (5, 20)
    assert cache.earliest_entry() == (1, 5)
    assert path.read_text() == "0\n3\n1 5\n3 10\n5 20\n"
    assert not path.with_name(path.name + ".tmp").exists()


def test_same_epoch_at_a_later_offset_is_ignored(cache: LeaderEpochCache, path: Path) -> None:
    path.write_text("0\n0\n")  # would be overwritten if the cache wrote again
    cache.assign(5, 25)
    assert cache.entries() == [(1, 5), (3, 10), (5, 20)]
    assert path.read_text() == "0\n0\n"


def test_same_epoch_at_an_earlier_offset_replaces_it(cache: LeaderEpochCache) -> None:
    cache.assign(5, 15)
    assert cache.entries() == [(1, 5), (3, 10), (5, 15)]


def test_lower_epoch_or_offset_drops_conflicting_entries(
    cache: LeaderEpochCache, path: Path
) -> None:
    cache.assign(4, 12)  # epoch 5 >= 4 goes
    assert cache.entries() == [(1, 5), (3, 10), (4, 12)]
    cache.assign(6, 10)  # start 10 <= entries starting at 10 and 12 go
    assert cache.entries() == [(1, 5), (6, 10)]
    assert path.read_text() == "0\n2\n1 5\n6 10\n"


def test_negative_entries_are_refused(path: Path) -> None:
    cache = LeaderEpochCache(path)
    with pytest.raises(ValueError):
        cache.assign(-1, 0)
    with pytest.raises(ValueError):
        cache.assign(0, -1)
    assert cache.entries() == []


# -- OffsetForLeaderEpoch (KIP-101 / KIP-279) ---------------------------------------------------


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (5, (5, 30)),  # the latest epoch ends at the log end offset
        (3, (3, 20)),  # a cached epoch ends where the next one starts
        (4, (3, 20)),  # unknown epoch in between: the largest epoch below it
        (1, (1, 10)),
        (2, (1, 10)),
        (0, (0, 5)),  # below the first cached epoch: its start (Kafka >= 2.1, KAFKA-7415)
        (6, UNDEFINED),  # above every epoch
        (-1, UNDEFINED),  # undefined epoch
    ],
)
def test_end_offset_for(cache: LeaderEpochCache, requested: int, expected: tuple[int, int]) -> None:
    assert cache.end_offset_for(requested, 30) == expected


@pytest.mark.parametrize(
    ("offset", "epoch"),
    [(0, None), (4, None), (5, 1), (9, 1), (10, 3), (19, 3), (20, 5), (1000, 5)],
)
def test_epoch_for_offset(cache: LeaderEpochCache, offset: int, epoch: int | None) -> None:
    assert cache.epoch_for_offset(offset) == epoch


# -- truncation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("end_offset", "expected"),
    [
        (25, [(1, 5), (3, 10), (5, 20)]),  # nothing starts at or after 25
        (20, [(1, 5), (3, 10)]),  # an entry starting exactly at the end goes
        (15, [(1, 5), (3, 10)]),
        (10, [(1, 5)]),
        (0, []),
        (-1, [(1, 5), (3, 10), (5, 20)]),  # Kafka ignores a negative end offset
    ],
)
def test_truncate_from_end(
    cache: LeaderEpochCache, path: Path, end_offset: int, expected: list[tuple[int, int]]
) -> None:
    cache.truncate_from_end(end_offset)
    assert cache.entries() == expected
    assert LeaderEpochCache(path).entries() == expected


@pytest.mark.parametrize(
    ("start_offset", "expected"),
    [
        (4, [(1, 5), (3, 10), (5, 20)]),  # below the first entry: nothing to do
        (5, [(1, 5), (3, 10), (5, 20)]),  # exclusive: the entry at 5 stays as it is
        (7, [(1, 7), (3, 10), (5, 20)]),  # the covering epoch now starts at 7
        (10, [(3, 10), (5, 20)]),
        (15, [(3, 15), (5, 20)]),
        (50, [(5, 50)]),
    ],
)
def test_truncate_from_start(
    cache: LeaderEpochCache, path: Path, start_offset: int, expected: list[tuple[int, int]]
) -> None:
    cache.truncate_from_start(start_offset)
    assert cache.entries() == expected
    assert LeaderEpochCache(path).entries() == expected


def test_clear_writes_an_empty_checkpoint(cache: LeaderEpochCache, path: Path) -> None:
    cache.clear()
    assert cache.entries() == []
    assert path.read_text() == "0\n0\n"


# -- the checkpoint file ----------------------------------------------------------------------


def test_checkpoint_round_trip(cache: LeaderEpochCache, path: Path) -> None:
    reopened = LeaderEpochCache(path)
    assert reopened.entries() == cache.entries()
    assert reopened.end_offset_for(3, 30) == (3, 20)


def test_reads_a_kafka_written_checkpoint(path: Path) -> None:
    path.write_text("0\n2\n0 0\n4 1200\n")
    assert LeaderEpochCache(path).entries() == [(0, 0), (4, 1200)]
    path.write_text("")  # Kafka creates the file empty
    assert LeaderEpochCache(path).entries() == []


@pytest.mark.parametrize(
    "content",
    [
        "1\n1\n0 0\n",  # unknown version
        "0\n2\n0 0\n",  # fewer entries than the count says
        "0\n1\n0 0 7\n",  # malformed line
        "0\n1\nzero 0\n",
        "zero\n",
        "0\n1\n-3 5\n",  # impossible entry
    ],
)
def test_corrupt_checkpoint_starts_empty_and_says_so(
    path: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    path.write_text(content)
    with caplog.at_level(logging.WARNING, logger="brokers.log.leader_epoch_cache"):
        cache = LeaderEpochCache(path)
    assert cache.entries() == []
    assert "leader epoch checkpoint" in caplog.text
    cache.assign(2, 3)
    assert LeaderEpochCache(path).entries() == [(2, 3)]


def test_loading_reapplies_monotonicity(path: Path) -> None:
    path.write_text("0\n3\n1 5\n3 4\n4 9\n")  # (1, 5) conflicts with (3, 4)
    assert LeaderEpochCache(path).entries() == [(3, 4), (4, 9)]


# -- a property test against a list model -----------------------------------------------------


class Model:
    """Kafka's rules written as plainly as possible over a list of (epoch, start)."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, int]] = []

    def assign(self, epoch: int, start: int) -> None:
        if self.entries and self.entries[-1][0] == epoch and start >= self.entries[-1][1]:
            return
        while self.entries and (self.entries[-1][0] >= epoch or self.entries[-1][1] >= start):
            self.entries.pop()
        self.entries.append((epoch, start))

    def truncate_from_end(self, end: int) -> None:
        if end >= 0:
            self.entries = [e for e in self.entries if e[1] < end]

    def truncate_from_start(self, start: int) -> None:
        removed = [e for e in self.entries if e[1] <= start]
        if removed:
            self.entries = [(removed[-1][0], start)] + [e for e in self.entries if e[1] > start]

    def end_offset_for(self, epoch: int, leo: int) -> tuple[int, int]:
        if epoch == -1 or not self.entries:
            return UNDEFINED
        if self.entries[-1][0] == epoch:
            return epoch, leo
        higher = [e for e in self.entries if e[0] > epoch]
        floor = [e for e in self.entries if e[0] <= epoch]
        if not higher:
            return UNDEFINED
        return (floor[-1][0] if floor else epoch), higher[0][1]

    def epoch_for_offset(self, offset: int) -> int | None:
        previous = None
        for epoch, start in self.entries:
            if start == offset:
                return epoch
            if start > offset:
                return previous
            previous = epoch
        return previous


# Truncation offsets are either arbitrary or exactly an existing start offset (a boundary that
# random integers rarely hit); `at_start` picks which.
offsets = st.tuples(st.integers(-1, 30), st.none() | st.integers(0, 10))
operations = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), st.integers(0, 9), st.integers(0, 30)),
        st.tuples(st.just("end"), offsets),
        st.tuples(st.just("start"), offsets),
        st.tuples(st.just("reopen")),
    ),
    max_size=30,
)


def pick_offset(model: Model, offset: tuple[int, int | None]) -> int:
    value, at_start = offset
    if at_start is not None and model.entries:
        return model.entries[at_start % len(model.entries)][1]
    return value


@settings(max_examples=300, deadline=None)
@given(operations)
def test_matches_the_list_model(tmp_path_factory: pytest.TempPathFactory, ops: list[tuple]) -> None:  # type: ignore[type-arg]
    path = tmp_path_factory.mktemp("epochs") / "leader-epoch-checkpoint"
    cache, model = LeaderEpochCache(path), Model()
    for op in ops:
        if op[0] == "assign":
            cache.assign(op[1], op[2])
            model.assign(op[1], op[2])
        elif op[0] == "end":
            offset = pick_offset(model, op[1])
            cache.truncate_from_end(offset)
            model.truncate_from_end(offset)
        elif op[0] == "start":
            offset = max(0, pick_offset(model, op[1]))
            cache.truncate_from_start(offset)
            model.truncate_from_start(offset)
        else:
            cache = LeaderEpochCache(path)
        assert cache.entries() == model.entries
        epochs, starts = zip(*cache.entries(), strict=True) if model.entries else ((), ())
        assert list(epochs) == sorted(set(epochs)) and list(starts) == sorted(set(starts))
    for epoch in range(-1, 11):
        assert cache.end_offset_for(epoch, 100) == model.end_offset_for(epoch, 100)
    for offset in range(0, 32):
        assert cache.epoch_for_offset(offset) == model.epoch_for_offset(offset)
    assert cache.latest_epoch() == (model.entries[-1][0] if model.entries else None)
