"""Offset reset planning as kafka-consumer-groups.sh does it: a property over every strategy."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.client.errors import OffsetResetError
from brokers.client.metadata import TopicPartition
from brokers.client.offset_reset import ResetKind, ResetSpec, plan_reset

pytestmark = pytest.mark.unit
TP = TopicPartition("t", 0)


@given(
    kind=st.sampled_from(list(ResetKind)),
    value=st.integers(-(2**40), 2**40),
    start=st.integers(0, 1_000),
    length=st.integers(0, 1_000),
    committed=st.one_of(st.none(), st.integers(0, 3_000)),
    found=st.integers(-1, 3_000),
)
@settings(max_examples=300, deadline=None)
def test_targets_stay_within_the_log(
    kind: ResetKind, value: int, start: int, length: int, committed: int | None, found: int
) -> None:
    end = start + length
    current = {} if committed is None else {TP: committed}
    spec = ResetSpec(kind, value)
    try:
        (entry,) = plan_reset(spec, [TP], current, {TP: start}, {TP: end}, {TP: found})
    except OffsetResetError:
        assert kind is ResetKind.SHIFT and committed is None
        return
    assert start <= entry.target <= end
    assert entry.current == committed
    if kind is ResetKind.SHIFT and committed is not None and start <= committed + value <= end:
        assert entry.target == committed + value
    if kind is ResetKind.DATETIME and found < 0:
        assert entry.target == end  # no record at or after the time: the log end


def test_plan_is_sorted_by_partition() -> None:
    tps = [TopicPartition("b", 0), TopicPartition("a", 1), TopicPartition("a", 0)]
    bounds = dict.fromkeys(tps, 0)
    plan = plan_reset(ResetSpec(ResetKind.EARLIEST), tps, {}, bounds, bounds)
    assert [e.tp for e in plan] == sorted(tps)
