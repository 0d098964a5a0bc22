"""The replica's in-place Fetch v11 parser against what Pier's leader encodes and what kio
encodes (aborted transactions, null records), plus truncated, padded and failed answers."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import pytest

from brokers.client.errors import ProtocolViolationError
from brokers.client.metadata import TopicPartition
from brokers.handlers.fetch_response import PartitionData, TopicData, encode_fetch_response
from brokers.replication.fetch_answer import FETCH_VERSION, parse_fetch_response
from brokers.wire.entities import make, response_module
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import encode_entity

pytestmark = pytest.mark.unit


@dataclass(frozen=True)
class InMemorySegment:
    data: bytes
    fd: int = -1
    position: int = 0

    @property
    def size(self) -> int:
        return len(self.data)

    def read(self) -> bytes:
        return self.data


def pier_body(topics: list[TopicData]) -> bytes:
    raw = encode_fetch_response(FETCH_VERSION, topics)
    return b"".join(p if isinstance(p, bytes) else p.read() for p in raw.parts)  # type: ignore[union-attr]


def test_parses_pier_leader_answer_with_records_as_views_into_the_frame() -> None:
    records = bytes(range(256)) * 40
    body = pier_body(
        [
            TopicData(
                "t",
                [
                    PartitionData(0, ErrorCode.none, 7, 7, 2, InMemorySegment(records)),
                    PartitionData(1, ErrorCode.fenced_leader_epoch),
                ],
            ),
            TopicData("u", [PartitionData(3, ErrorCode.none, 0, 0, 0)]),
        ]
    )
    frame = memoryview(bytearray(b"HEAD" + body))
    answers = parse_fetch_response(frame, 4)
    first = answers[TopicPartition("t", 0)]
    assert (first.error, first.high_watermark, first.log_start_offset) == (ErrorCode.none, 7, 2)
    assert bytes(first.records) == records
    assert first.records.obj is frame.obj  # no copy: a slice of the received frame
    assert answers[TopicPartition("t", 1)].error == ErrorCode.fenced_leader_epoch
    assert bytes(answers[TopicPartition("u", 3)].records) == b""


def kio_body(
    aborted: tuple[tuple[int, int], ...] | None, records: bytes | None = b"batch"
) -> bytes:
    module = response_module(1, FETCH_VERSION)
    transactions = (
        None
        if aborted is None
        else tuple(
            make(module, "AbortedTransaction", producer_id=p, first_offset=o) for p, o in aborted
        )
    )
    partition = make(
        module,
        "PartitionData",
        partition_index=5,
        error_code=ErrorCode.none,
        high_watermark=42,
        last_stable_offset=42,
        log_start_offset=1,
        aborted_transactions=transactions,
        preferred_read_replica=-1,
        records=records,
    )
    topic = make(module, "FetchableTopicResponse", topic="kio", partitions=(partition,))
    response = make(
        module,
        "FetchResponse",
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        session_id=0,
        responses=(topic,),
    )
    return encode_entity(response)


@pytest.mark.parametrize("aborted", [None, (), ((9, 3), (10, 4))])
def test_skips_aborted_transactions(aborted: tuple[tuple[int, int], ...] | None) -> None:
    answers = parse_fetch_response(memoryview(kio_body(aborted)), 0)
    answer = answers[TopicPartition("kio", 5)]
    assert (answer.high_watermark, bytes(answer.records)) == (42, b"batch")


def test_null_records_are_empty() -> None:
    answers = parse_fetch_response(memoryview(kio_body(None, records=None)), 0)
    assert bytes(answers[TopicPartition("kio", 5)].records) == b""


def test_trailing_bytes_are_a_protocol_violation() -> None:
    with pytest.raises(ProtocolViolationError, match="trailing"):
        parse_fetch_response(memoryview(kio_body(None) + b"\x00"), 0)


def test_truncated_answer_is_a_protocol_violation() -> None:
    body = kio_body(None)
    for cut in (3, 12, len(body) - 5):
        with pytest.raises(ProtocolViolationError):
            parse_fetch_response(memoryview(body[:cut]), 0)


def test_top_level_error_is_a_protocol_violation() -> None:
    raw = encode_fetch_response(FETCH_VERSION, [], error=ErrorCode.fetch_session_id_not_found)
    body = b"".join(p for p in raw.parts if isinstance(p, bytes))
    with pytest.raises(ProtocolViolationError, match="fetch_session_id_not_found"):
        parse_fetch_response(memoryview(body), 0)


def test_a_topic_name_that_is_not_utf8_is_a_protocol_violation() -> None:
    body = kio_body(None)
    bad = body.replace(b"\x00\x03kio", b"\x00\x03\xff\xfe\xfd")
    assert bad != body
    with pytest.raises(ProtocolViolationError):
        parse_fetch_response(memoryview(bad), 0)
