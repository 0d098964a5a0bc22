"""The raw reader's primitives and the parts writer, against the encodings kio and Kafka use."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from brokers.wire.primitives import MalformedRequestError, write_uvarint
from brokers.wire.raw_reader import Parts, Reader, encode_length, encode_string

pytestmark = pytest.mark.unit


def reader(data: bytes) -> Reader:
    return Reader(memoryview(data))


def test_fixed_width_integers_are_big_endian_and_signed() -> None:
    r = reader(struct.pack(">bhiq", -1, -2, -3, -4))

    assert (r.int8(), r.int16(), r.int32(), r.int64()) == (-1, -2, -3, -4)
    r.expect_end()


@pytest.mark.parametrize("size", [0, 1, 3, 7])
def test_a_short_integer_is_malformed(size: int) -> None:
    with pytest.raises(MalformedRequestError):
        reader(b"\x00" * size).int64()


@given(st.integers(0, 2**32 - 1))
def test_uvarints_round_trip(value: int) -> None:
    r = reader(write_uvarint(value))

    assert r.uvarint() == value
    r.expect_end()


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff", b"\x80\x80\x80\x80\x80\x01"])
def test_truncated_or_overlong_uvarints_are_malformed(data: bytes) -> None:
    with pytest.raises(MalformedRequestError):
        reader(data).uvarint()


@pytest.mark.parametrize("flexible", [False, True])
@pytest.mark.parametrize("value", [None, "", "orders", "naïve"])
def test_strings_round_trip(flexible: bool, value: str | None) -> None:
    r = reader(encode_string(value, flexible) + b"!")

    assert r.nullable_string(flexible) == value
    assert r.remaining == 1


@pytest.mark.parametrize("flexible", [False, True])
def test_a_null_string_where_one_is_required_is_malformed(flexible: bool) -> None:
    with pytest.raises(MalformedRequestError, match="null"):
        reader(encode_string(None, flexible)).string(flexible)


@pytest.mark.parametrize(
    ("data", "flexible"),
    [(b"\x00\x05abc", False), (b"\xff\xfe", False), (b"\x06abc", True), (b"\x02\xff", True)],
)
def test_short_negative_or_undecodable_strings_are_malformed(data: bytes, flexible: bool) -> None:
    with pytest.raises(MalformedRequestError):
        reader(data).nullable_string(flexible)


@pytest.mark.parametrize("flexible", [False, True])
def test_bytes_are_views_of_the_buffer(flexible: bool) -> None:
    buffer = memoryview(encode_length(3, flexible, wide=True) + b"abc" + b"!")
    r = Reader(buffer)

    view = r.nullable_bytes(flexible)

    assert view is not None and view.obj is buffer.obj and bytes(view) == b"abc"
    assert reader(encode_length(-1, flexible, wide=True)).nullable_bytes(flexible) is None


@pytest.mark.parametrize(
    ("data", "flexible"),
    [
        (struct.pack(">i", 2**31 - 1), False),
        (struct.pack(">i", -2), False),
        (b"\x05ab", True),
        (b"\xff\xff\xff\xff\x07", True),
    ],
)
def test_bytes_longer_than_what_remains_or_negative_are_malformed(
    data: bytes, flexible: bool
) -> None:
    with pytest.raises(MalformedRequestError):
        reader(data).bytes_length(flexible)


def test_array_counts_are_checked_against_the_smallest_element() -> None:
    assert reader(struct.pack(">i", 2) + b"\x00" * 8).array_length(False, 4) == 2
    assert reader(struct.pack(">i", -1)).array_length(False) == -1
    assert reader(b"\x00").array_length(True) == -1
    with pytest.raises(MalformedRequestError):
        reader(struct.pack(">i", 3) + b"\x00" * 8).array_length(False, 4)
    with pytest.raises(MalformedRequestError):
        reader(struct.pack(">i", -5)).array_length(False)


def test_tagged_sections_are_skipped_whole() -> None:
    r = reader(b"\x02" + b"\x00\x02ab" + b"\x09\x00" + b"!")

    r.tagged_fields()

    assert r.remaining == 1


@pytest.mark.parametrize(
    "data", [b"", b"\x01", b"\x01\x00", b"\x01\x00\x03ab", b"\x05\x00\x00", b"\x01\x00\x80"]
)
def test_truncated_tagged_sections_are_malformed(data: bytes) -> None:
    with pytest.raises(MalformedRequestError):
        reader(data).tagged_fields()


def test_trailing_bytes_are_malformed() -> None:
    with pytest.raises(MalformedRequestError, match="1 trailing"):
        reader(b"\x00").expect_end()


def test_parts_join_new_bytes_and_keep_views() -> None:
    original = memoryview(b"0123456789")
    parts = Parts()

    parts.write(b"ab")
    parts.write(original[:2])
    parts.view(original[2:6])
    parts.view(original[6:6])
    parts.write(b"c")

    result = parts.finish()

    assert result == [b"ab01", original[2:6], b"c"]
    assert parts.size == 9
    assert isinstance(result[1], memoryview) and result[1].obj is original.obj


def test_names_too_long_for_the_protocol_are_refused() -> None:
    with pytest.raises(ValueError, match="too long"):
        encode_string("x" * 0x8000, False)
