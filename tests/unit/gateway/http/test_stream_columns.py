"""A streamed chunk is read as columns (`gateway.http.stream_columns`) only when every record is
plain, and then to the bytes the record-by-record path (`produce_record`) reads; anything else
goes that path, which decides and words every refusal."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from gateway.http.records import produce_record
from gateway.http.stream_columns import columns

pytestmark = pytest.mark.unit


def _binary(data: bytes, **fields: Any) -> dict[str, Any]:
    return {"value": {"type": "BINARY", "data": base64.b64encode(data).decode()}, **fields}


PLAIN = [
    [_binary(b"a"), _binary(b"", partition_id=2), _binary(bytes(range(256)))],
    [{"value": {"type": "STRING", "data": "é"}}, {"value": {"type": "STRING", "data": ""}}],
]


@pytest.mark.parametrize("records", PLAIN)
def test_plain_records_are_read_as_the_record_path_reads_them(records: list[Any]) -> None:
    read = columns(records)
    assert read is not None
    each = [produce_record(record) for record in records]
    assert read.values == [r.value.data for r in each if r.value is not None]
    assert read.partitions == [r.partition for r in each]
    assert each[0].value is not None and read.kind == each[0].value.type


NOT_PLAIN = [
    [_binary(b"a"), {"key": {"type": "STRING", "data": "k"}, **_binary(b"b")}],
    [_binary(b"a"), _binary(b"b", headers=[])],
    [_binary(b"a"), _binary(b"b", timestamp=5)],
    [_binary(b"a"), {"value": {"type": "STRING", "data": "s"}}],  # two types
    [_binary(b"a"), {"value": {"type": "JSON", "data": {"x": 1}}}],
    [{"value": {"type": "JSON", "data": "x"}}, {"value": {"type": "JSON", "data": "y"}}],
    [_binary(b"a"), {"value": {"type": "BINARY", "data": None}}],
    [_binary(b"a"), {"value": {"type": "BINARY", "data": "not base64!"}}],
    [_binary(b"a"), {"value": {"type": "binary", "data": "YQ=="}}],
    [_binary(b"a"), {"value": {"data": "YQ=="}}],
    [_binary(b"a"), _binary(b"b", partition_id=-1)],
    [_binary(b"a"), _binary(b"b", partition_id=True)],
    [_binary(b"a"), _binary(b"b", partition_id="1")],
    [_binary(b"a"), {}],
    [_binary(b"a"), ["not", "a", "record"]],
    [_binary(b"a"), {"value": "text"}],
    [_binary(b"a"), {"value": {"type": "BINARY", "data": "YQ==", "extra": 1}}],
    [{"value": {"type": "STRING", "data": "\ud800"}}, {"value": {"type": "STRING", "data": "s"}}],
    [],
]


@pytest.mark.parametrize("records", NOT_PLAIN)
def test_anything_else_goes_record_by_record(records: list[Any]) -> None:
    assert columns(records) is None
