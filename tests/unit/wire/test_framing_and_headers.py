import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokers.wire.framing import SIZE_PREFIX, FrameSizeError, check_request_size
from brokers.wire.headers import (
    NAME_SCOPE_TAG,
    parse_request_header,
    response_header,
    scoped_header,
)
from brokers.wire.messages import MalformedRequestError, read_uvarint, write_uvarint

pytestmark = pytest.mark.unit


def frame_size(prefix: bytes, limit: int) -> int:
    """A size prefix decoded and checked as a connection's frame reader checks it."""
    size: int = SIZE_PREFIX.unpack(prefix)[0]
    check_request_size(size, limit)
    return size


def test_frame_size_accepts_within_limit() -> None:
    assert frame_size(struct.pack(">i", 1000), 1000) == 1000


@pytest.mark.parametrize("size", [2**31 - 1, 1001, -1, 0, 7])
def test_frame_size_refuses_before_allocation(size: int) -> None:
    with pytest.raises(FrameSizeError):
        frame_size(struct.pack(">i", size), 1000)


def _header(
    api_key: int, version: int, corr: int, client: bytes | None, tagged: bytes = b""
) -> bytes:
    body = struct.pack(">hhi", api_key, version, corr)
    body += struct.pack(">h", -1) if client is None else struct.pack(">h", len(client)) + client
    return body + tagged


def test_request_header_v1_and_v2() -> None:
    raw = _header(3, 1, 42, b"my-client")
    header, offset = parse_request_header(memoryview(raw + b"BODY"), flexible=False)
    assert (header.api_key, header.api_version, header.correlation_id) == (3, 1, 42)
    assert header.client_id == "my-client"
    assert raw[offset:] == b"" and offset == len(raw)
    flexible = _header(3, 12, 7, None, tagged=b"\x01\x05\x02ab")  # one tagged field, tag 5, 2 bytes
    header, offset = parse_request_header(memoryview(flexible + b"X"), flexible=True)
    assert header.client_id is None
    assert offset == len(flexible)


@pytest.mark.parametrize(
    "raw",
    [b"\x00\x03", _header(3, 1, 1, b"abc")[:-1], _header(3, 12, 1, b"a", tagged=b"\x01\x05\x09a")],
)
def test_truncated_headers_are_malformed(raw: bytes) -> None:
    with pytest.raises(MalformedRequestError):
        parse_request_header(memoryview(raw), flexible=True)


def test_response_headers() -> None:
    assert response_header(9, flexible=False) == struct.pack(">i", 9)
    assert response_header(9, flexible=True) == struct.pack(">i", 9) + b"\x00"


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_uvarint_round_trip(value: int) -> None:
    encoded = write_uvarint(value)
    assert read_uvarint(memoryview(encoded), 0) == (value, len(encoded))


def test_uvarint_refuses_endless_continuation() -> None:
    with pytest.raises(MalformedRequestError):
        read_uvarint(memoryview(b"\xff" * 10), 0)


def test_a_scoped_header_carries_the_name_scope_and_keeps_the_rest() -> None:
    """The gateway replaces a flexible header's tagged fields with the tenant's prefix; the
    broker reads it back, and skips any other tag as before."""
    client = _header(16, 4, 9, b"app", tagged=b"\x01\x05\x02ab")
    scoped = scoped_header(client, "acme_")
    header, offset = parse_request_header(memoryview(scoped + b"BODY"), flexible=True)
    assert (header.api_key, header.api_version, header.correlation_id) == (16, 4, 9)
    assert header.client_id == "app" and header.name_scope == "acme_"
    assert offset == len(scoped)
    unscoped, _ = parse_request_header(memoryview(client), flexible=True)
    assert unscoped.name_scope is None
    other_tag = _header(16, 4, 9, None, tagged=b"\x02\x05\x02ab" + _tag(NAME_SCOPE_TAG, b"x_"))
    assert parse_request_header(memoryview(other_tag), flexible=True)[0].name_scope == "x_"


def _tag(tag: int, value: bytes) -> bytes:
    return write_uvarint(tag) + write_uvarint(len(value)) + value
