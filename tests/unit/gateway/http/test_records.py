"""Records over HTTP (pure): embedded formats, the partitioner, fetched batches, JSON streams."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from brokers.records.builder import build_batch
from brokers.records.record import Record
from brokers.wire.errors import ErrorCode
from gateway.http.errors import ApiError, from_kafka
from gateway.http.records import (
    RoundRobin,
    choose_partition,
    encode_value,
    fetched_records,
    key_partition,
    murmur2,
    next_offset,
    produce_record,
)
from gateway.http.v3 import _TRAILING, _json_stream, _split_json

pytestmark = pytest.mark.unit


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
    records = fetched_records(first + second + second[:20], 11)
    assert [(r.offset, r.key, r.value, r.timestamp_ms, r.headers) for r in records] == [
        (11, b"b", b"2", 1005, (("h", b"x"),)),
        (12, b"c", b"3", 2000, ()),
    ]
    assert next_offset(first + second[:30], 10) == 12
    assert next_offset(b"", 7) == 7


def test_encode_value_formats() -> None:
    assert encode_value("binary", b"\x00", "w") == "AA=="
    assert encode_value("string", b"abc", "w") == "abc"
    assert encode_value("json", b'{"a":1}', "w") == {"a": 1}
    assert encode_value("json", None, "w") is None
    with pytest.raises(ApiError) as error:
        encode_value("json", b"\xff", "t-0@3")
    assert error.value.error_code == 42203 and "t-0@3" in error.value.message


def test_split_json_counts_every_byte() -> None:
    body = b' {"a": 1}\n{"b": "\xc3\xa9"}\n\n'
    values = _split_json(body)
    assert [v for v, _ in values] == [{"a": 1}, {"b": "é"}]
    assert sum(size for _, size in values) == len(body.rstrip())
    assert len(_split_json(json.dumps({"x": 1}).encode())) == 1
    for bad in (b"", b"   ", b"{nope", b"\xff"):
        with pytest.raises(ApiError) as error:
            _split_json(bad)
        assert error.value.status == 400


def test_kafka_errors_map_to_http() -> None:
    assert from_kafka(ErrorCode.topic_authorization_failed, "t").status == 403
    assert from_kafka(ErrorCode.unknown_topic_or_partition, "t").error_code == 40401
    retriable = from_kafka(ErrorCode.not_leader_or_follower, "t")
    assert retriable.status == 503 and retriable.retry_after_s == 1
    assert from_kafka(ErrorCode.topic_already_exists, "t").status == 409


class _Chunks:
    """What `_json_stream` reads of a request: `content.iter_any()` yielding the chunks."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.content = self
        self._chunks = chunks

    async def iter_any(self) -> Any:
        for chunk in self._chunks:
            yield chunk


def stream_values(chunks: list[bytes]) -> list[tuple[object, int]]:
    async def run() -> list[tuple[object, int]]:
        return [item async for item in _json_stream(_Chunks(chunks))]  # type: ignore[arg-type]

    return asyncio.run(run())


def test_json_stream_splits_values_across_chunks_and_counts_every_byte() -> None:
    body = ' {"a": 1}\n{"b": "é"}\n\n{"c": [1, 2]}\n'.encode()
    for cut in range(1, len(body)):
        values = stream_values([body[:cut], body[cut:]])
        parsed = [v for v, _ in values if v is not _TRAILING]
        assert parsed == [{"a": 1}, {"b": "é"}, {"c": [1, 2]}], cut
        assert sum(size for _, size in values) == len(body), cut


def test_json_stream_refuses_a_cut_value() -> None:
    with pytest.raises(ApiError) as error:
        stream_values([b'{"a": 1}\n{"b": '])
    assert error.value.status == 400
