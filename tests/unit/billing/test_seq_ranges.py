"""`billing.rollup.seq_ranges.merge` (the union of counted sequence ranges per writer) and
`billing.rollup.ranges.bit_runs` (the runs of a chunk's presence mask)."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given
from hypothesis import strategies as st

from billing.rollup.ranges import bit_runs
from billing.rollup.seq_ranges import Range, merge


def test_adjacent_and_overlapping_ranges_join_per_writer() -> None:
    merged = merge(
        [
            Range("gw/a", 0, 9, 10),
            Range("gw/a", 10, 19, 20),  # adjacent
            Range("gw/a", 15, 30, 5),  # overlapping
            Range("gw/a", 40, 41, 1),  # a gap: stays apart
            Range("gw/b", 31, 39, 7),  # another writer never joins gw/a's
        ]
    )
    assert merged == [
        Range("gw/a", 0, 30, 20),
        Range("gw/a", 40, 41, 1),
        Range("gw/b", 31, 39, 7),
    ]


@given(st.lists(st.tuples(st.sampled_from(["w1", "w2"]), st.integers(0, 60), st.integers(0, 5))))
def test_merge_holds_exactly_the_union(spans: list[tuple[str, int, int]]) -> None:
    ranges = [Range(w, lo, lo + n, 0) for w, lo, n in spans]
    merged = merge(ranges)
    covered = {(r.writer, s) for r in ranges for s in range(r.lo, r.hi + 1)}
    assert {(r.writer, s) for r in merged for s in range(r.lo, r.hi + 1)} == covered
    for a, b in pairwise(merged):
        assert a.writer != b.writer or b.lo > a.hi + 1  # disjoint, never adjacent


@given(st.integers(-(2**63), 2**63 - 1))
def test_bit_runs_are_the_set_bits_of_a_signed_mask(mask: int) -> None:
    runs = bit_runs(mask)
    bits = {b for low, high in runs for b in range(low, high + 1)}
    assert bits == {b for b in range(64) if (mask >> b) & 1}
    for (_, high), (low, _) in pairwise(runs):
        assert low > high + 1  # maximal: separated by a clear bit
    assert bit_runs(-1) == [(0, 63)] and bit_runs(0) == []
