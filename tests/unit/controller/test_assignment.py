"""Rack-aware replica assignment: Kafka's known layouts and the balance/placement properties."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.controller.assignment import assign_replicas, rack_alternated
from brokers.controller.errors import (
    InconsistentRackError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
)

pytestmark = pytest.mark.unit


def test_rack_unaware_matches_kafkas_documented_layout() -> None:
    # AdminUtils' doc example: 5 brokers, 10 partitions, RF 3, start index 0.
    brokers = dict.fromkeys(range(5))
    result = assign_replicas(brokers, 10, 3, start_index=0)
    assert result[0] == [0, 1, 2]
    assert result[4] == [4, 0, 1]
    assert result[5] == [0, 2, 3]
    assert result[9] == [4, 1, 2]


def test_rack_alternated_list_takes_one_broker_per_rack_in_turn() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]


def test_rack_aware_matches_kafkas_documented_layout() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    result = assign_replicas(racks, 6, 3, start_index=0)
    assert result[0] == [0, 3, 1]
    assert result[1] == [3, 1, 5]
    assert result[2] == [1, 5, 4]
    assert result[3] == [5, 4, 2]
    assert result[4] == [4, 2, 0]
    assert result[5] == [2, 0, 3]


def test_start_partition_continues_numbering_for_partition_growth() -> None:
    result = assign_replicas(dict.fromkeys([1, 2, 3]), 2, 2, start_index=0, start_partition=4)
    assert sorted(result) == [4, 5]


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf", "error"),
    [
        ({1: None}, 0, 1, InvalidPartitionsError),
        ({1: None}, 1, 0, InvalidReplicationFactorError),
        ({1: None, 2: None}, 1, 3, InvalidReplicationFactorError),
        ({1: "a", 2: None}, 1, 1, InconsistentRackError),
    ],
)
def test_invalid_requests_raise(
    brokers: dict[int, str | None], partitions: int, rf: int, error: type[Exception]
) -> None:
    with pytest.raises(error):
        assign_replicas(brokers, partitions, rf)


cluster = st.integers(1, 9).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 1000), min_size=n, max_size=n, unique=True),
        st.integers(1, 4),
        st.integers(1, n),
        st.integers(1, 60),
        st.integers(0, n - 1),
    )
)


@settings(max_examples=150, deadline=None)
@given(cluster, st.booleans())
def test_assignment_properties(
    params: tuple[list[int], int, int, int, int], with_racks: bool
) -> None:
    ids, rack_count, rf, partitions, start = params
    brokers: dict[int, str | None] = {
        b: (f"r{i % rack_count}" if with_racks else None) for i, b in enumerate(ids)
    }
    result = assign_replicas(brokers, partitions, rf, start_index=start)
    assert sorted(result) == list(range(partitions))
    racks_in_use = len(set(brokers.values()))
    for replicas in result.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf, "replicas on distinct brokers"
        assert set(replicas) <= set(ids)
        if with_racks:
            # Distinct racks while there are enough; otherwise every rack is used first.
            assert len({brokers[r] for r in replicas}) == min(rf, racks_in_use)
    leaders = Counter(replicas[0] for replicas in result.values())
    counts = [leaders.get(b, 0) for b in ids]
    assert max(counts) - min(counts) <= 1, "leaders spread evenly"


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 8), st.integers(1, 3), st.integers(0, 2**32))
def test_replicas_spread_evenly_over_whole_rounds(n: int, rf_seed: int, seed: int) -> None:
    rf = min(n, rf_seed)
    brokers: dict[int, str | None] = dict.fromkeys(range(n))
    result = assign_replicas(brokers, n * 4, rf, rng=random.Random(seed))
    replica_counts = Counter(r for replicas in result.values() for r in replicas)
    assert set(replica_counts.values()) == {4 * rf}
