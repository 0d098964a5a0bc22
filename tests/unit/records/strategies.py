"""Hypothesis strategies for records and batches, shared by the records tests."""

from __future__ import annotations

from hypothesis import strategies as st

from brokers.records.record import Record

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
maybe_bytes = st.none() | st.binary(max_size=64)
header_keys = st.text(max_size=12)
headers = st.lists(st.tuples(header_keys, maybe_bytes), max_size=3).map(tuple)


@st.composite
def record_lists(draw: st.DrawFn, max_size: int = 20) -> list[Record]:
    """Records at consecutive offset deltas with arbitrary timestamps deltas and contents."""
    count = draw(st.integers(0, max_size))
    return [
        Record(
            offset_delta=i,
            timestamp_delta=draw(st.integers(-(10**6), 10**9)),
            key=draw(maybe_bytes),
            value=draw(maybe_bytes),
            headers=draw(headers),
        )
        for i in range(count)
    ]


any_records = st.lists(
    st.builds(
        Record,
        offset_delta=INT32,
        timestamp_delta=INT64,
        key=maybe_bytes,
        value=maybe_bytes,
        headers=headers,
        attributes=st.integers(0, 255),
    ),
    max_size=8,
)
