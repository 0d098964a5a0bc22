"""Record payload codec: varints, round trips, Kafka's byte layout, malformed input."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.util import decode_varint, encode_varint

from brokers.records.errors import InvalidRecordError, RecordError
from brokers.records.record import Record, decode_records, encode_records
from brokers.records.varint import read_varint, read_varlong, varint_size, write_varint
from tests.unit.records.strategies import INT32, INT64, any_records

pytestmark = pytest.mark.unit


@given(INT32)
def test_varint_matches_kafka_python_encoding(value: int) -> None:
    expected = bytearray()
    encode_varint(value, expected.append)
    ours = bytearray()
    write_varint(ours, value)
    assert ours == expected
    assert varint_size(value) == len(ours)
    assert read_varint(bytes(ours), 0) == (value, len(ours))
    assert decode_varint(bytes(ours), 0) == (value, len(ours))


@given(INT64)
def test_varlong_round_trip(value: int) -> None:
    out = bytearray(b"\xff")
    write_varint(out, value)
    assert len(out) - 1 <= 10
    assert read_varlong(bytes(out), 1) == (value, len(out))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f"), (64, b"\x80\x01"),
     (2**31 - 1, b"\xfe\xff\xff\xff\x0f"), (-(2**31), b"\xff\xff\xff\xff\x0f")],
)  # fmt: skip
def test_varint_known_encodings(value: int, encoded: bytes) -> None:
    out = bytearray()
    write_varint(out, value)
    assert bytes(out) == encoded


def test_varint_too_long_and_truncated() -> None:
    with pytest.raises(InvalidRecordError, match="longer"):
        read_varint(b"\x80\x80\x80\x80\x80\x01", 0)
    with pytest.raises(InvalidRecordError, match="truncated"):
        read_varint(b"\x80\x80", 0)
    with pytest.raises(InvalidRecordError, match="truncated"):
        read_varlong(b"", 0)


@settings(max_examples=200, deadline=None)
@given(any_records)
def test_encode_decode_round_trip(records: list[Record]) -> None:
    payload = encode_records(records)
    assert decode_records(payload, len(records)) == records
    assert decode_records(memoryview(payload), len(records)) == records


def test_known_record_layout() -> None:
    # length 12 (zigzag 24) | attrs 0 | ts delta 2 (zigzag 4) | offset delta 1 (zigzag 2) |
    # key "k" | value "vv" | one header "h" = null
    record = Record(1, 2, b"k", b"vv", (("h", None),))
    expected = b"\x18\x00\x04\x02\x02k\x04vv\x02\x02h\x01"
    assert encode_records([record]) == expected
    assert decode_records(expected, 1) == [record]


def test_null_key_and_empty_key_differ() -> None:
    records = [Record(0, 0, None, b""), Record(1, 0, b"", None)]
    decoded = decode_records(encode_records(records), 2)
    assert decoded[0].key is None and decoded[0].value == b""
    assert decoded[1].key == b"" and decoded[1].value is None


def test_non_utf8_header_key_survives_a_round_trip() -> None:
    payload = b"\x16\x00\x00\x00\x01\x01\x02\x04\xff\xfe\x02x"
    (record,) = decode_records(payload, 1)
    assert encode_records([record]) == payload


def test_count_must_match_payload() -> None:
    payload = encode_records([Record(0, 0, b"k", b"v"), Record(1, 0, b"k", b"v")])
    with pytest.raises(InvalidRecordError, match="left after"):
        decode_records(payload, 1)
    with pytest.raises(InvalidRecordError):
        decode_records(payload, 3)
    with pytest.raises(InvalidRecordError):
        decode_records(payload, -1)


def test_record_length_must_match_its_fields() -> None:
    payload = bytearray(encode_records([Record(0, 0, b"k", b"v")]))
    payload[0] += 2  # claims one more byte than the fields use
    with pytest.raises(InvalidRecordError):
        decode_records(bytes(payload) + b"\x00", 1)


def test_null_header_key_is_invalid() -> None:
    payload = b"\x10\x00\x00\x00\x01\x01\x02\x01\x01"
    with pytest.raises(InvalidRecordError, match="null header key"):
        decode_records(payload, 1)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80), st.integers(0, 5))
def test_garbage_raises_only_record_errors(payload: bytes, count: int) -> None:
    with contextlib.suppress(RecordError):
        decode_records(payload, count)
