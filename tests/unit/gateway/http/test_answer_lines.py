"""A streamed produce's answer lines (`gateway.http.produce.AnswerLines`) are the bytes
`json.dumps` writes for the record's ProduceResponse (`answer`), whatever the record holds."""

from __future__ import annotations

import json

import pytest

from brokers.client.producer import ProduceResult
from gateway.http.produce import AnswerLines, Prepared, answer
from gateway.http.records import produce_record

RECORDS = [
    {"value": {"type": "BINARY", "data": "AAEC"}},
    {"key": {"type": "STRING", "data": "k"}, "value": {"type": "JSON", "data": {"a": [1]}}},
    {"key": {"type": "JSON", "data": None}},
    {},
]


@pytest.mark.parametrize("raw", RECORDS)
@pytest.mark.parametrize("topic", ["orders", 'tëst"\\topic'])
def test_a_line_is_the_json_of_the_answer(raw: dict[str, object], topic: str) -> None:
    lines = AnswerLines('cl-ü"1', topic)
    for offset, (stamp, appended) in enumerate([(1_700_000_000_123, -1), (5, 1_700_000_000_999)]):
        prepared = Prepared(topic, 3, stamp, produce_record(raw))
        result = ProduceResult(offset, appended, 0)
        expected = json.dumps(answer('cl-ü"1', prepared, result), separators=(",", ":")) + "\n"
        assert lines.line(prepared, result) == expected
        assert lines.line(prepared, result) == expected  # the remembered timestamp too


@pytest.mark.parametrize("raw", RECORDS)
def test_a_single_records_answer_is_its_json(raw: dict[str, object]) -> None:
    """The single-record route answers from the topic's template: the same JSON as the dict."""
    lines = AnswerLines("cl-1", "orders")
    prepared = Prepared("orders", 0, 1_700_000_000_000, produce_record(raw))
    result = ProduceResult(41, -1, 0)
    expected = json.dumps(answer("cl-1", prepared, result), separators=(",", ":")).encode()
    assert lines.json(prepared, result) == expected


def test_a_plain_runs_lines_are_each_records_line() -> None:
    """A run of value-only records is answered in one pass (`plain_lines`): each line is the
    one `line` writes for that record."""
    lines = AnswerLines("cl-1", "orders")
    raws = [
        {"value": {"type": "BINARY", "data": "AAEC"}},
        {"value": {"type": "BINARY", "data": ""}},
    ]
    records = [produce_record(raw) for raw in raws]
    for first, stamp in ((ProduceResult(9, -1, 0), 1_700_000_000_123), (ProduceResult(9, 5, 0), 7)):
        expected = [
            lines.line(
                Prepared("orders", 4, stamp, record),
                ProduceResult(9 + i, first.log_append_time_ms, 0),
            )
            for i, record in enumerate(records)
        ]
        assert lines.plain_lines(4, first, stamp, "BINARY", [3, 0]) == expected
