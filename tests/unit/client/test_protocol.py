"""The client's connection protocol, fed bytes: framing, correlation, limits, ApiVersions fallback."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsV0
from kio.schema.list_groups.v0.request import ListGroupsRequest as ListGroupsV0
from kio.schema.list_groups.v0.response import ListedGroup
from kio.schema.list_groups.v0.response import ListGroupsResponse as ListGroupsResponseV0
from kio.schema.list_groups.v5.request import ListGroupsRequest as ListGroupsV5
from kio.schema.types import GroupId
from kio.static.primitive import i16

from brokers.client.connection import _api_versions_request
from brokers.client.errors import (
    ConnectionClosedError,
    ProtocolViolationError,
    ResponseTooLargeError,
)
from brokers.client.protocol import ClientProtocol
from brokers.handlers.build import make, response_module, throttle
from brokers.wire.errors import ErrorCode
from brokers.wire.headers import parse_request_header
from brokers.wire.messages import encode_entity

pytestmark = pytest.mark.unit


def frame(correlation_id: int, body: bytes, *, flexible_header: bool = False) -> bytes:
    header = struct.pack(">i", correlation_id) + (b"\x00" if flexible_header else b"")
    return struct.pack(">i", len(header) + len(body)) + header + body


def groups_body(*names: str) -> bytes:
    listed = tuple(ListedGroup(group_id=GroupId(n), protocol_type="consumer") for n in names)
    return encode_entity(ListGroupsResponseV0(error_code=ErrorCode.none, groups=listed))


def v5_groups_body(*names: str) -> bytes:
    module = response_module(16, 5)
    listed = tuple(
        make(
            module,
            "ListedGroup",
            group_id=n,
            protocol_type="c",
            group_state="Empty",
            group_type="classic",
        )
        for n in names
    )
    return encode_entity(
        make(
            module,
            "ListGroupsResponse",
            throttle_time=throttle(),
            error_code=ErrorCode.none,
            groups=listed,
        )
    )


def test_request_frame_carries_header_and_increasing_correlation_ids() -> None:
    protocol = ClientProtocol("tester")
    first, parts = protocol.request(ListGroupsV0())
    second, _ = protocol.request(ListGroupsV5())
    raw = b"".join(parts)
    (size,) = struct.unpack_from(">i", raw, 0)
    assert size == len(raw) - 4
    header, _offset = parse_request_header(memoryview(raw[4:]), flexible=False)
    assert (header.api_key, header.api_version, header.correlation_id) == (16, 0, first)
    assert header.client_id == "tester"
    assert second == first + 1
    assert protocol.in_flight == 2


def test_flexible_request_gets_header_v2_tagged_section() -> None:
    protocol = ClientProtocol(None)
    _cid, parts = protocol.request(ListGroupsV5())
    raw = b"".join(parts)[4:]
    header, offset = parse_request_header(memoryview(raw), flexible=True)
    assert header.client_id is None
    assert raw[offset - 1 : offset] == b"\x00"  # empty tagged-field section ends the header


def test_a_name_scope_goes_in_a_flexible_header_only() -> None:
    """The gateway's HTTP listings (`gateway.http.fleet_calls`) send the tenant's prefix."""
    protocol = ClientProtocol("gw")
    _cid, parts = protocol.request(ListGroupsV5(), name_scope="acme_")
    raw = b"".join(parts)[4:]
    header, offset = parse_request_header(memoryview(raw), flexible=True)
    assert (header.client_id, header.name_scope) == ("gw", "acme_")
    assert raw[offset:] == encode_entity(ListGroupsV5())
    _cid, parts = protocol.request(ListGroupsV0(), name_scope="acme_")
    assert b"".join(parts)[4:].endswith(b"gw"), "v0 has no header tags: sent without one"


def test_pipelined_responses_are_answered_in_order() -> None:
    protocol = ClientProtocol("c")
    ids = [protocol.request(ListGroupsV0())[0] for _ in range(3)]
    data = b"".join(frame(cid, groups_body(f"g{cid}")) for cid in ids)
    answers = protocol.feed(data)
    assert [a.correlation_id for a in answers] == ids
    assert [a.response.groups[0].group_id for a in answers] == [f"g{cid}" for cid in ids]
    assert protocol.in_flight == 0


def test_flexible_response_header_is_skipped() -> None:
    protocol = ClientProtocol("c")
    cid, _ = protocol.request(ListGroupsV5())
    (answer,) = protocol.feed(frame(cid, v5_groups_body("a"), flexible_header=True))
    assert answer.response.groups[0].group_state == "Empty"


@given(cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=12))
@settings(max_examples=60, deadline=None)
def test_any_split_of_the_byte_stream_gives_the_same_answers(cuts: list[int]) -> None:
    protocol = ClientProtocol("c")
    ids = [protocol.request(ListGroupsV0())[0] for _ in range(3)]
    data = b"".join(frame(cid, groups_body("x" * cid)) for cid in ids)
    points = sorted({min(c, len(data)) for c in cuts})
    chunks = [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]
    answers = [a for chunk in chunks for a in protocol.feed(chunk)]
    assert [a.correlation_id for a in answers] == ids


def test_out_of_order_correlation_id_breaks_the_connection() -> None:
    protocol = ClientProtocol("c")
    first = protocol.request(ListGroupsV0())[0]
    second = protocol.request(ListGroupsV0())[0]
    with pytest.raises(ProtocolViolationError, match="out of order"):
        protocol.feed(frame(second, groups_body()))
    with pytest.raises(ProtocolViolationError):  # stays broken, even for the right answer
        protocol.feed(frame(first, groups_body()))


def test_response_with_nothing_in_flight_breaks_the_connection() -> None:
    with pytest.raises(ProtocolViolationError, match="no request in flight"):
        ClientProtocol("c").feed(frame(7, groups_body()))


def test_oversized_response_is_refused_on_its_size_prefix() -> None:
    protocol = ClientProtocol("c", max_response_bytes=1024)
    protocol.request(ListGroupsV0())
    with pytest.raises(ResponseTooLargeError):
        protocol.feed(struct.pack(">i", 1025))  # refused before any body byte arrives


@pytest.mark.parametrize("size", [-1, 0, 3])
def test_size_prefix_too_small_for_a_header_is_a_violation(size: int) -> None:
    protocol = ClientProtocol("c")
    protocol.request(ListGroupsV0())
    with pytest.raises(ProtocolViolationError):
        protocol.feed(struct.pack(">i", size))


def test_truncated_body_inside_a_frame_is_a_violation() -> None:
    protocol = ClientProtocol("c")
    cid = protocol.request(ListGroupsV0())[0]
    body = groups_body("group-a")[:-3]  # the frame is complete, its body is not
    with pytest.raises(ProtocolViolationError, match=r"does not decode|truncated"):
        protocol.feed(frame(cid, body))


def test_trailing_bytes_after_the_body_are_a_violation() -> None:
    protocol = ClientProtocol("c")
    cid = protocol.request(ListGroupsV0())[0]
    with pytest.raises(ProtocolViolationError, match="trailing"):
        protocol.feed(frame(cid, groups_body("g") + b"\x00"))


def test_hostile_array_count_is_refused_without_allocating() -> None:
    protocol = ClientProtocol("c")
    cid = protocol.request(ListGroupsV0())[0]
    body = struct.pack(">hi", 0, 800_000_000)  # claims 800M groups in 6 bytes
    with pytest.raises(ProtocolViolationError):
        protocol.feed(frame(cid, body))


def test_unknown_error_code_is_a_violation_not_a_crash() -> None:
    protocol = ClientProtocol("c")
    cid = protocol.request(ListGroupsV0())[0]
    with pytest.raises(ProtocolViolationError):
        protocol.feed(frame(cid, struct.pack(">hi", 30_000, 0)))


def test_eof_mid_frame_or_with_requests_unanswered_reports_the_loss() -> None:
    protocol = ClientProtocol("c")
    cid = protocol.request(ListGroupsV0())[0]
    protocol.feed(frame(cid, groups_body("g"))[:6])
    with pytest.raises(ConnectionClosedError, match="middle of a response"):
        protocol.eof()
    waiting = ClientProtocol("c")
    waiting.request(ListGroupsV0())
    with pytest.raises(ConnectionClosedError, match="1 request"):
        waiting.eof()
    ClientProtocol("c").eof()  # nothing lost: no error


def test_no_response_expected_is_not_tracked() -> None:
    protocol = ClientProtocol("c")
    protocol.request(ListGroupsV0(), expect_response=False)
    cid = protocol.request(ListGroupsV0())[0]
    assert protocol.in_flight == 1
    assert [a.correlation_id for a in protocol.feed(frame(cid, groups_body()))] == [cid]


def test_refused_api_versions_is_read_as_a_v0_body() -> None:
    """KIP-511: a broker that does not serve our ApiVersions version answers with a v0 body."""
    protocol = ClientProtocol("c")
    cid = protocol.request(_api_versions_request(4))[0]
    refusal = ApiVersionsV0(
        error_code=ErrorCode.unsupported_version,
        api_keys=(ApiVersionV0(api_key=i16(18), min_version=i16(0), max_version=i16(2)),),
    )
    (answer,) = protocol.feed(frame(cid, encode_entity(refusal)))
    assert answer.response.error_code == ErrorCode.unsupported_version
    assert answer.response.api_keys[0].max_version == 2


def test_correlation_ids_wrap_at_int32() -> None:
    protocol = ClientProtocol("c")
    protocol._next_correlation = 2**31 - 1
    assert protocol.request(ListGroupsV0())[0] == 2**31 - 1
    assert protocol.request(ListGroupsV0())[0] == 0
