"""Records over HTTP (pure): embedded formats, the partitioner, fetched batches within bounds."""

from __future__ import annotations

import base64
import random
from datetime import UTC, datetime

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from brokers.records.builder import build_batch
from brokers.records.compression import GZIP, LZ4, SNAPPY, ZSTD
from brokers.records.record import Record
from brokers.wire.errors import ErrorCode
from gateway.http.errors import ApiError, from_kafka
from gateway.http.records import (
    Bookmark,
    PollLimits,
    RoundRobin,
    choose_partition,
    encode_value,
    fetched_records,
    iso_ms,
    key_partition,
    murmur2,
    next_offset,
    produce_record,
)

pytestmark = pytest.mark.unit
UNBOUNDED = PollLimits(max_records=10**9, max_bytes=10**9)


@pytest.mark.parametrize(
    "key", [b"", b"a", b"ab", b"abc", b"abcd", b"hello", b"\xff" * 17, bytes(range(256))]
)
def test_murmur2_is_kafkas(key: bytes) -> None:
    assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)  # theirs is unsigned
    assert key_partition(key, 7) == (kafka_python_murmur2(key) & 0x7FFFFFFF) % 7


def test_embedded_formats() -> None:
    record = produce_record(
        {
            "partition_id": 2,
            "key": {"type": "BINARY", "data": base64.b64encode(b"\x00k").decode()},
            "value": {"type": "JSON", "data": {"a": [1, None]}},
            "headers": [
                {"name": "h", "value": base64.b64encode(b"v").decode()},
                {"name": "n", "value": None},
            ],
            "timestamp": "2024-01-02T03:04:05Z",
        }
    )
    assert record.partition == 2
    assert record.key is not None and record.key.data == b"\x00k"
    assert record.value is not None and record.value.data == b'{"a":[1,null]}'
    assert record.headers == (("h", b"v"), ("n", None))
    assert record.timestamp_ms == 1704164645000
    text = produce_record({"value": {"type": "STRING", "data": "é"}})
    assert text.value is not None and text.value.data == "é".encode() and text.key is None
    assert produce_record({"value": {"type": "BINARY", "data": None}}).value is not None


@pytest.mark.parametrize(
    "bad",
    [
        [],
        {"partition_id": -1},
        {"partition_id": True},
        {"key": "plain"},
        {"value": {"type": "AVRO", "data": 1}},
        {"value": {"type": "BINARY", "data": "%%%"}},
        {"value": {"type": "STRING", "data": 5}},
        {"headers": [{"value": "AA=="}]},
        {"headers": "x"},
        {"timestamp": "yesterday"},
    ],
)
def test_bad_records_are_422(bad: object) -> None:
    with pytest.raises(ApiError) as error:
        produce_record(bad)
    assert error.value.status == 422


def test_partition_choice() -> None:
    rr = RoundRobin()
    unkeyed = produce_record({"value": {"type": "STRING", "data": "x"}})
    assert [choose_partition(unkeyed, "t", 3, rr) for _ in range(4)] == [0, 1, 2, 0]
    keyed = produce_record({"key": {"type": "STRING", "data": "k"}})
    assert choose_partition(keyed, "t", 5, rr) == key_partition(b"k", 5)
    assert choose_partition(produce_record({"partition_id": 9}), "t", 5, rr) == 9


def test_fetched_records_skip_before_start_and_partial_batches() -> None:
    first = build_batch(
        [Record(0, 0, b"a", b"1", ()), Record(1, 5, b"b", b"2", (("h", b"x"),))],
        base_offset=10,
        base_timestamp=1000,
    )
    second = build_batch([(b"c", b"3")], base_offset=12, base_timestamp=2000)
    records = fetched_records(first + second + second[:20], 11, UNBOUNDED).records
    assert [(r.offset, r.key, r.value, r.timestamp_ms, r.headers) for r in records] == [
        (11, b"b", b"2", 1005, (("h", b"x"),)),
        (12, b"c", b"3", 2000, ()),
    ]
    assert next_offset(first + second[:30], 10) == 12
    assert next_offset(b"", 7) == 7


def test_encode_value_formats() -> None:
    assert encode_value("binary", b"\x00", "w", part="value") == "AA=="
    assert encode_value("string", b"abc", "w", part="value") == "abc"
    assert encode_value("json", b'{"a":1}', "w", part="value") == {"a": 1}
    assert encode_value("json", None, "w", part="key") is None


@pytest.mark.parametrize("part", ["key", "value"])
def test_a_part_that_is_not_json_is_named_with_its_record(part: str) -> None:
    with pytest.raises(ApiError) as error:
        encode_value("json", b"\xff", "topic 't' partition 0 offset 3", part=part)
    assert error.value.status == 422 and error.value.error_code == 42203
    assert error.value.message.startswith(f"the {part} of the record at topic 't' partition 0")
    assert "offset 3" in error.value.message


def test_kafka_errors_map_to_http() -> None:
    assert from_kafka(ErrorCode.topic_authorization_failed, "t").status == 403
    assert from_kafka(ErrorCode.unknown_topic_or_partition, "t").error_code == 40401
    retriable = from_kafka(ErrorCode.not_leader_or_follower, "t")
    assert retriable.status == 503 and retriable.retry_after_s == 1
    assert from_kafka(ErrorCode.topic_already_exists, "t").status == 409


def _empty_records(count: int, *, base_offset: int = 0, compression: int = ZSTD) -> bytes:
    return build_batch(
        [Record(i, 0, None, None) for i in range(count)],
        base_offset=base_offset,
        compression=compression,
        base_timestamp=1000,
    )


def test_attack_14_empty_records_are_bounded_by_count_not_bytes() -> None:
    batch = _empty_records(20_000)  # what bytes alone never bound: each record is 0 bytes
    polled = fetched_records(batch, 0, PollLimits(max_records=500, max_bytes=1))
    assert [r.offset for r in polled.records] == list(range(500))
    assert polled.bookmark is not None and polled.bookmark.index == 500
    later = fetched_records(batch, 500, PollLimits(500, 1), polled.bookmark)
    assert [r.offset for r in later.records] == list(range(500, 1000))


def test_a_bookmark_resumes_where_the_records_start_and_is_checked() -> None:
    batch = _empty_records(1000, base_offset=100)
    first = fetched_records(batch, 100, PollLimits(300, 10**6))
    assert first.bookmark is not None
    resumed = fetched_records(batch, 400, PollLimits(10, 10**6), first.bookmark)
    assert [r.offset for r in resumed.records] == list(range(400, 410))
    walked = fetched_records(batch, 650, PollLimits(5, 10**6), first.bookmark)  # from it on
    assert [r.offset for r in walked.records] == list(range(650, 655))
    behind = fetched_records(batch, 150, PollLimits(5, 10**6), first.bookmark)  # sought back
    assert [r.offset for r in behind.records] == list(range(150, 155))
    wrong = Bookmark(100, first.bookmark.crc ^ 1, 300, 3)  # another batch at the same offset
    assert [r.offset for r in fetched_records(batch, 400, PollLimits(2, 10**6), wrong).records] == [
        400,
        401,
    ]
    assert fetched_records(batch, 1095, PollLimits(10, 10**6)).bookmark is None  # read to its end


def test_the_byte_bound_still_holds_and_the_first_record_always_goes() -> None:
    batch = build_batch([(b"k", b"v" * 100)] * 5, base_timestamp=0)
    assert len(fetched_records(batch, 0, PollLimits(500, 1)).records) == 1
    assert len(fetched_records(batch, 0, PollLimits(500, 250)).records) == 2
    two = _empty_records(3) + build_batch([(b"k", b"v")], base_offset=3, base_timestamp=0)
    assert [r.offset for r in fetched_records(two, 0, PollLimits(4, 10**6)).records] == [0, 1, 2, 3]
    assert [r.offset for r in fetched_records(two, 0, PollLimits(2, 10**6)).records] == [0, 1]


@pytest.mark.parametrize("codec", [GZIP, LZ4, ZSTD, SNAPPY])
def test_every_decompression_is_bounded(codec: int) -> None:
    bomb = build_batch([(None, b"\0" * 4_000_000)], compression=codec, base_timestamp=0)
    assert len(bomb) < 400_000
    with pytest.raises(ApiError) as error:
        fetched_records(bomb, 0, PollLimits(500, 10**9, max_decompressed_bytes=1_000_000))
    assert error.value.status == 422 and "decompresses beyond 1000000 bytes" in error.value.message
    whole = fetched_records(bomb, 0, PollLimits(500, 10**9, max_decompressed_bytes=8_000_000))
    assert len(whole.records) == 1


def test_a_corrupt_batch_is_a_clear_error() -> None:
    batch = bytearray(_empty_records(10, compression=0))
    batch[-1] ^= 0xFF
    with pytest.raises(ApiError) as error:
        fetched_records(bytes(batch), 0, PollLimits(500, 10))
    assert error.value.status == 502


def test_iso_ms_is_isoformats_text() -> None:
    """The answers' timestamp, formatted a second at a time, is `datetime.isoformat`'s (the
    reference, exact up to 2100: past it, its float division is off by a microsecond)."""
    rng = random.Random(24)
    stamps = [0, 1, 999, 1000, 1001, 59_999, 1_700_000_000_000, 1_700_000_000_123]
    stamps += sorted(rng.randrange(0, 4_102_444_800_000) for _ in range(3000))
    for ms in stamps + stamps[::-1]:
        expected = datetime.fromtimestamp(ms / 1000, UTC).isoformat().replace("+00:00", "Z")
        assert iso_ms(ms) == expected
