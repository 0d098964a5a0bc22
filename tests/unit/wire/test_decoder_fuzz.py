"""Fuzz the request decoders: any bytes either decode or raise MalformedRequestError."""

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.wire.headers import parse_request_header
from brokers.wire.messages import MalformedRequestError, decode_request, is_flexible_request

pytestmark = pytest.mark.unit

SERVED = {
    0: (3, 11),
    1: (4, 12),
    2: (1, 9),
    3: (0, 12),
    18: (0, 4),
    19: (2, 7),
    20: (1, 6),
    21: (0, 2),
    22: (0, 5),
    23: (2, 4),
    32: (1, 4),
    33: (0, 2),
    37: (0, 3),
    44: (0, 1),
    60: (0, 1),
}
CASES = [(k, v) for k, (lo, hi) in SERVED.items() for v in range(lo, hi + 1)]


@settings(max_examples=400, deadline=None)
@given(case=st.sampled_from(CASES), body=st.binary(max_size=256))
def test_random_bodies_never_escape_as_other_errors(case: tuple[int, int], body: bytes) -> None:
    api_key, version = case
    with contextlib.suppress(MalformedRequestError):
        decode_request(api_key, version, memoryview(body), 0)


@settings(max_examples=300, deadline=None)
@given(case=st.sampled_from(CASES), frame=st.binary(min_size=0, max_size=64))
def test_random_headers_never_escape_as_other_errors(case: tuple[int, int], frame: bytes) -> None:
    with contextlib.suppress(MalformedRequestError):
        parse_request_header(memoryview(frame), is_flexible_request(*case))
