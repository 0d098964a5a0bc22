"""The native byte loops (`brokers.records._native`) against their pure-Python twins.

Both walks must return the same tuple for any input: valid batches, forged counts, mangled and
random bytes. CI must run the native module: a build that silently fell back to the twins would
put Python back on the per-record path.
"""

from __future__ import annotations

import os
import struct

import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.records import native
from brokers.records.compression import ZSTD, compress
from brokers.records.record import Record, encode_records
from brokers.records.record_walk import (
    CHECK_KEYS,
    CHECK_TIMESTAMPS,
    INT64_MAX,
    INT64_MIN,
    OFFSET_DELTA,
    OK,
    TOO_FEW,
    TRAILING,
    VARINT_TOO_LONG,
    WalkResult,
    walk_records_py,
)
from brokers.records.zstd_frames import FrameWalk, walk_frames_py
from tests.unit.records.strategies import INT64, any_records, record_lists

pytestmark = pytest.mark.unit

NOW = 1_700_000_000_000
NATIVE = native.NATIVE


def test_native_module_is_in_use() -> None:
    if os.environ.get("PIER_RECORDS_PURE_PYTHON") == "1":
        pytest.skip("PIER_RECORDS_PURE_PYTHON=1 asks for the twins")
    assert native.IMPLEMENTATION == "native", (
        "brokers.records._native did not import: `pip install -e .` must build _native.c "
        "(setup.py); without it every record is walked in Python"
    )


needs_native = pytest.mark.skipif(NATIVE is None, reason="the native module is not built")


def both_walks(
    payload: bytes, count: int, base: int, low: int, high: int, flags: int
) -> WalkResult:
    assert NATIVE is not None
    expected = walk_records_py(payload, count, base, low, high, flags)
    assert NATIVE.walk_records(payload, count, base, low, high, flags, False) == expected
    assert NATIVE.walk_records(memoryview(payload), count, base, low, high, flags, True) == expected
    return expected


windows = st.tuples(INT64, INT64).map(lambda w: (min(w), max(w))) | st.just(
    (NOW - 10**6, NOW + 10**9)
)


@needs_native
@settings(max_examples=300, deadline=None)
@given(record_lists(max_size=30), INT64 | st.just(NOW), windows, st.integers(0, 3))
def test_valid_records_walk_the_same(
    records: list[Record], base: int, window: tuple[int, int], flags: int
) -> None:
    payload = encode_records(records)
    status, index, position, *_ = both_walks(payload, len(records), base, *window, flags)
    assert (status, index, position) == (OK, len(records), len(payload))


@needs_native
@settings(max_examples=300, deadline=None)
@given(any_records, st.integers(-2, 12), INT64, windows, st.integers(0, 3))
def test_any_records_and_counts_walk_the_same(
    records: list[Record], count: int, base: int, window: tuple[int, int], flags: int
) -> None:
    both_walks(encode_records(records), count, base, *window, flags)


@needs_native
@settings(max_examples=500, deadline=None)
@given(record_lists(max_size=8), st.data(), st.integers(0, 3))
def test_mangled_records_walk_the_same(
    records: list[Record], data: st.DataObject, flags: int
) -> None:
    payload = bytearray(encode_records(records))
    for _ in range(data.draw(st.integers(0, 4))):
        if payload:
            payload[data.draw(st.integers(0, len(payload) - 1))] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(payload)))
    count = data.draw(st.integers(0, len(records) + 2))
    both_walks(bytes(payload[:cut]), count, NOW, NOW - 10**6, NOW + 10**9, flags)


@needs_native
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(-1, 2**31 - 1), INT64, st.integers(0, 3))
def test_random_bytes_walk_the_same(payload: bytes, count: int, base: int, flags: int) -> None:
    both_walks(payload, count, base, INT64_MIN, INT64_MAX, flags)


def record(offset_delta: int, body_fields: bytes) -> bytes:
    """A record whose fields after the offset delta are given raw."""
    delta = bytes([(offset_delta << 1) & 0x7F]) if offset_delta < 64 else b""
    body = b"\x00\x00" + delta + body_fields
    return bytes([len(body) << 1]) + body


@pytest.mark.parametrize("walk", ["python", "native"])
def test_java_varint_rules(walk: str) -> None:
    if walk == "native" and NATIVE is None:
        pytest.skip("the native module is not built")

    def run(payload: bytes) -> WalkResult:
        args = (payload, 1, NOW, INT64_MIN, INT64_MAX, CHECK_KEYS)
        if walk == "native":
            assert NATIVE is not None
            result: WalkResult = NATIVE.walk_records(*args, False)
            return result
        return walk_records_py(*args)

    # A 5-byte offset delta keeps 32 bits, as ByteUtils.readVarint: 2^32 + 0 reads as 0.
    five = b"\x80\x80\x80\x80\x20"
    body = b"\x00\x00" + five + b"\x02k\x00\x00"
    assert run(bytes([len(body) << 1]) + body)[0] == OK
    six = b"\x80\x80\x80\x80\x80\x00"
    body = b"\x00\x00" + six + b"\x02k\x00\x00"
    assert run(bytes([len(body) << 1]) + body)[0] == VARINT_TOO_LONG


def test_walk_reports_counts_offsets_keys_and_timestamps() -> None:
    keyed = record(0, b"\x02k\x00\x00")
    keyless = record(1, b"\x01\x00\x00")
    payload = keyed + keyless
    flags = CHECK_KEYS | CHECK_TIMESTAMPS
    assert walk_records_py(payload, 2, NOW, NOW, NOW, flags)[:5] == (OK, 2, len(payload), 1, -1)
    assert walk_records_py(payload, 3, NOW, NOW, NOW, flags)[:3] == (TOO_FEW, 2, len(payload))
    assert walk_records_py(payload, 1, NOW, NOW, NOW, flags)[:3] == (TRAILING, 1, len(keyed))
    assert walk_records_py(keyless + keyed, 2, NOW, NOW, NOW, flags)[:2] == (OFFSET_DELTA, 0)
    # The window excludes NOW: the keyed record is out of range; the keyless one is a key error.
    found = walk_records_py(payload, 2, NOW, NOW + 1, NOW + 2, flags)
    assert found[3:] == (1, 0, NOW, NOW)


def test_timestamps_wrap_like_java_longs() -> None:
    # base + delta overflows to Long.MIN_VALUE; the max starts at -1 as Kafka's maxBatchTimestamp.
    payload = encode_records([Record(0, 1, b"k", b"v")])
    result = walk_records_py(payload, 1, INT64_MAX, 0, INT64_MAX, CHECK_TIMESTAMPS)
    assert result[4:] == (0, INT64_MIN, -1)
    if NATIVE is not None:
        native_result = NATIVE.walk_records(payload, 1, INT64_MAX, 0, INT64_MAX, 1, False)
        assert native_result == result


# ---- zstd frame walking ---------------------------------------------------------------------


def both_frame_walks(data: bytes) -> FrameWalk:
    assert NATIVE is not None
    expected = walk_frames_py(memoryview(data))
    assert NATIVE.zstd_frames(memoryview(data)) == expected
    return expected


@needs_native
@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=3000), st.booleans(), st.booleans(), st.data())
def test_zstd_frames_walk_the_same(
    data: bytes, content_size: bool, checksum: bool, draw: st.DataObject
) -> None:
    compressor = zstandard.ZstdCompressor(write_content_size=content_size, write_checksum=checksum)
    packed = bytearray(compressor.compress(data) + compress(ZSTD, data[:100]))
    frames, error, *_ = both_frame_walks(bytes(packed))
    assert error == 0 and len(frames) == 2
    for _ in range(draw.draw(st.integers(1, 3))):
        packed[draw.draw(st.integers(0, len(packed) - 1))] = draw.draw(st.integers(0, 255))
    both_frame_walks(bytes(packed[: draw.draw(st.integers(0, len(packed)))]))


@needs_native
@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_zstd_frames_on_random_bytes_walk_the_same(tail: bytes) -> None:
    both_frame_walks(tail)
    both_frame_walks(struct.pack("<I", 0xFD2FB528) + tail)
    both_frame_walks(struct.pack("<II", 0x184D2A50, len(tail)) + tail)


@needs_native
def test_zstd_frames_of_many_tiny_blocks() -> None:
    # 16 Ki RLE blocks of one byte each: the shape that made the Python walk cost ~10 ms.
    blocks = b"".join(
        ((1 << 3) | (1 << 1) | (i == 16383)).to_bytes(3, "little") + b"\x00" for i in range(16384)
    )
    data = struct.pack("<I", 0xFD2FB528) + b"\x00\x00" + blocks
    frames, error, *_ = both_frame_walks(data)
    assert error == 0 and frames == [(0, len(data), 16384, None)]
