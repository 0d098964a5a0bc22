"""Property: random transactional appends, markers, rolls, truncations and restarts (clean or
crashed, with the `.txnindex` files of the recovered segments deleted) of a few producers leave
the leader and a follower answering `collect_aborted`, the LSO and the open transactions exactly
as a simple model of the history does."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.log.config import LogConfig
from brokers.log.txn_index import AbortedTxn
from tests.unit.log.txn_helpers import Producer, end, open_log, plain, replicate, send

pytestmark = pytest.mark.unit

CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=100)
PIDS = (11, 12, 13)

STEPS = {
    "data": st.tuples(st.just("data"), st.sampled_from(PIDS), st.integers(1, 3)),
    "end": st.tuples(st.just("end"), st.sampled_from(PIDS), st.booleans()),
    "plain": st.tuples(st.just("plain"), st.integers(1, 2)),
    "hw": st.tuples(st.just("hw"), st.integers(0, 12)),
    "roll": st.tuples(st.just("roll")),
    "flush": st.tuples(st.just("flush")),
    "truncate": st.tuples(st.just("truncate"), st.integers(0, 4)),
    "restart": st.tuples(st.just("restart"), st.booleans()),
}
# Mostly transactions; now and then the events that reload producer state or the indexes.
KINDS = ["data"] * 8 + ["end"] * 5 + ["plain", "hw", "hw", "roll", "flush", "truncate", "restart"]
ops = st.sampled_from(KINDS).flatmap(lambda kind: STEPS[kind])


@dataclass
class Model:
    """The history of what was appended; every answer is recomputed from it."""

    events: list[tuple[str, int, int, bool]] = field(default_factory=list)  # kind, pid, offset
    high_watermark: int = 0

    def replay(self) -> tuple[dict[int, int], list[AbortedTxn], list[tuple[int, int]]]:
        open_txns: dict[int, int] = {}
        aborted: list[AbortedTxn] = []
        completed: list[tuple[int, int]] = []  # (first offset, marker offset)
        for kind, pid, offset, commit in self.events:
            if kind == "data":
                open_txns.setdefault(pid, offset)
            elif pid in open_txns:
                first = open_txns.pop(pid)
                completed.append((first, offset))
                if not commit:
                    lso = min(open_txns.values(), default=offset + 1)
                    aborted.append(AbortedTxn(pid, first, offset, lso))
        return open_txns, aborted, completed

    def lso(self) -> int:
        open_txns, _, completed = self.replay()
        unstable = [*open_txns.values(), *(f for f, m in completed if m >= self.high_watermark)]
        return min([*unstable, self.high_watermark])

    def truncate(self, offset: int) -> None:
        self.events = [e for e in self.events if e[2] < offset]


class World:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.leader = open_log(root / "leader", config=CONFIG)
        self.follower = open_log(root / "follower", config=CONFIG)
        self.producers = {pid: Producer(pid) for pid in PIDS}
        self.model = Model()

    def apply(self, op: tuple[object, ...]) -> None:
        kind = op[0]
        if kind == "data":
            pid, records = op[1], op[2]
            assert isinstance(pid, int) and isinstance(records, int)
            first = send(self.leader, self.producers[pid], records).first_offset
            self.model.events.append(("data", pid, first, False))
        elif kind == "plain":
            assert isinstance(op[1], int)
            plain(self.leader, op[1])
        elif kind == "end":
            pid, commit = op[1], op[2]
            assert isinstance(pid, int) and isinstance(commit, bool)
            offset = end(self.leader, self.producers[pid], commit=commit).first_offset
            self.model.events.append(("marker", pid, offset, commit))
        elif kind == "hw":
            assert isinstance(op[1], int)
            self.set_hw(min(self.leader.log_end_offset, self.model.high_watermark + op[1]))
        elif kind == "roll":
            self.leader.roll()
        elif kind == "flush":
            self.leader.flush()
        elif kind == "truncate":
            assert isinstance(op[1], int)
            self.truncate(max(0, self.model.high_watermark - op[1]))
        elif kind == "restart":
            self.restart(clean=bool(op[1]))
        replicate(self.leader, self.follower)

    def set_hw(self, hw: int) -> None:
        self.model.high_watermark = hw

    def truncate(self, offset: int) -> None:
        """Truncation below the high watermark only, as replication does (Kafka forgets the
        completed-but-unreplicated transactions on truncation, assuming just that)."""
        for log in (self.leader, self.follower):
            log.truncate_to(offset)
        self.model.truncate(self.leader.log_end_offset)
        self.set_hw(self.leader.log_end_offset)
        for producer in self.producers.values():  # their lost batches are not resent
            entry = self.leader.producer_state.last_entry(producer.pid)
            producer.sequence = 0 if entry is None else entry.last_sequence + 1

    def restart(self, *, clean: bool) -> None:
        """A restart forgets which completed transactions were unreplicated (as Kafka): the
        high watermark is moved to the log end first, so that none is."""
        self.set_hw(self.leader.log_end_offset)
        self.check()
        point = self.leader.recovery_point
        if clean:
            self.leader.close()
        else:
            recovered = [s for s in self.leader.segments if s.next_offset > point]
            self.leader.release()
            for segment in recovered[1:]:
                segment.txn_index.path.unlink(missing_ok=True)  # recovery must rebuild them
        self.leader = open_log(
            self.root / "leader", config=CONFIG, clean=clean, recovery_point=point
        )

    def check(self) -> None:
        open_txns, aborted, _ = self.model.replay()
        end_offset = self.leader.log_end_offset
        for log in (self.leader, self.follower):
            assert log.log_end_offset == end_offset
            assert dict(log.ongoing_transactions()) == open_txns
            assert log.last_stable_offset(self.model.high_watermark) == self.model.lso()
            assert log.collect_aborted(0, end_offset) == aborted
            for fetch in range(0, end_offset, 5):
                for upper in (fetch + 1, fetch + 7, end_offset):
                    expected = [
                        t for t in aborted if t.last_offset >= fetch and t.first_offset < upper
                    ]
                    assert log.collect_aborted(fetch, upper) == expected, (fetch, upper)


def _close(world: World) -> None:
    for log in (world.leader, world.follower):
        log.release()


@settings(max_examples=60, deadline=None)
@given(st.lists(ops, min_size=10, max_size=60))
def test_transactions_match_the_model(steps: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        world = World(Path(tmp))
        try:
            for op in steps:
                world.apply(op)
                world.check()
        finally:
            _close(world)
