"""The Produce response encoder against kio's, byte for byte, on every version: the answers it
takes (ok, errors with and without messages, append times, several topics, topic ids), from kio
objects and from the handler's plain answers, and None — kio's path — for those it leaves
(record errors, a current leader, endpoints)."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest

from brokers.server.produce_response import (
    PartitionAnswer,
    TopicAnswer,
    encode_answers,
    encode_produce_response,
    kio_response,
)
from brokers.wire.entities import has_field, make, response_module
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import encode_entity

pytestmark = pytest.mark.unit
VERSIONS = range(3, 14)
APPENDED = datetime.datetime(2026, 11, 28, 19, 30, 1, 234000, tzinfo=datetime.UTC)


def _partition(module: Any, index: int, **fields: Any) -> Any:
    values: dict[str, Any] = {
        "index": index,
        "error_code": ErrorCode.none,
        "base_offset": 1_000_000_007 * index,
        "log_append_time": None,
        "log_start_offset": index,
        "record_errors": (),
        "error_message": None,
        **fields,
    }
    return make(module, "PartitionProduceResponse", **values)


def _response(version: int, topics: list[tuple[str, list[Any]]], throttle_ms: int = 0) -> Any:
    module = response_module(0, version)
    entries = [
        make(
            module,
            "TopicProduceResponse",
            name=name,
            topic_id=uuid.uuid5(uuid.NAMESPACE_DNS, name),
            partition_responses=tuple(parts),
        )
        for name, parts in topics
    ]
    return make(
        module,
        "ProduceResponse",
        responses=tuple(entries),
        throttle_time=datetime.timedelta(milliseconds=throttle_ms),
    )


def _answers(version: int) -> list[Any]:
    module = response_module(0, version)
    p = _partition
    long_name = "t" * 200  # a name whose compact length takes two varint bytes
    return [
        _response(version, []),
        _response(version, [("orders", [p(module, 0)])]),
        _response(version, [("orders", [p(module, 0, log_append_time=APPENDED)])], 250),
        _response(
            version,
            [
                ("orders", [p(module, i) for i in range(5)]),
                (long_name, [p(module, 7, error_code=ErrorCode.not_leader_or_follower)]),
                (
                    "é-topic",
                    [
                        p(module, 1, error_code=ErrorCode.invalid_record, error_message="bad: é"),
                        p(module, 2, base_offset=-1, log_start_offset=-1),
                    ],
                ),
            ],
        ),
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_fast_encoding_is_kios_encoding(version: int) -> None:
    for answer in _answers(version):
        assert encode_produce_response(answer) == encode_entity(answer)


@pytest.mark.parametrize("version", VERSIONS)
def test_answers_it_does_not_take_go_to_kio(version: int) -> None:
    module = response_module(0, version)
    if has_field(module, "PartitionProduceResponse", "record_errors"):
        error = make(module, "BatchIndexAndErrorMessage", batch_index=3)
        refused = _partition(module, 0, error_code=ErrorCode.invalid_record, record_errors=(error,))
        assert encode_produce_response(_response(version, [("t", [refused])])) is None
    if has_field(module, "PartitionProduceResponse", "current_leader"):
        leader = make(module, "LeaderIdAndEpoch", leader_id=2, leader_epoch=5)
        moved = _partition(module, 0, error_code=ErrorCode.not_leader_or_follower)
        moved = make(
            module,
            "PartitionProduceResponse",
            **{f: getattr(moved, f) for f in moved.__slots__ if f != "current_leader"},
            current_leader=leader,
        )
        assert encode_produce_response(_response(version, [("t", [moved])])) is None
    if has_field(module, "ProduceResponse", "node_endpoints"):
        node = make(module, "NodeEndpoint", node_id=2, host="broker-2", port=9092)
        answer = _response(version, [("t", [_partition(module, 0)])])
        pointed = make(
            module,
            "ProduceResponse",
            responses=answer.responses,
            throttle_time=answer.throttle_time,
            node_endpoints=(node,),
        )
        assert encode_produce_response(pointed) is None


def _plain_answers() -> list[list[TopicAnswer]]:
    appended = int(APPENDED.timestamp() * 1000)
    ok = [PartitionAnswer(i, ErrorCode.none, 1_000_000_007 * i, -1, i) for i in range(5)]
    refused = PartitionAnswer(
        1, ErrorCode.invalid_record, error_message="bad: é", record_errors=((3, "why"), (4, None))
    )
    topic_id = uuid.uuid5(uuid.NAMESPACE_DNS, "orders").bytes
    return [
        [],
        [TopicAnswer("orders", topic_id, ok[:1])],
        [TopicAnswer("orders", topic_id, [PartitionAnswer(0, 0, 5, appended, 0)])],
        [
            TopicAnswer("orders", topic_id, ok),
            TopicAnswer("t" * 200, None, [PartitionAnswer(7, ErrorCode.not_leader_or_follower)]),
            TopicAnswer("é-topic", None, [PartitionAnswer(2, ErrorCode.unknown_topic_id)]),
        ],
        [TopicAnswer("orders", topic_id, [ok[0], refused])],
    ]


@pytest.mark.parametrize("version", VERSIONS)
def test_plain_answers_are_written_as_kio_writes_them(version: int) -> None:
    """What the Produce handler answers: the bytes kio writes for the same answer, or None (kio's
    path) where a partition names a record (v8+)."""
    module = response_module(0, version)
    for topics in _plain_answers():
        expected = encode_entity(kio_response(module, topics))
        encoded = encode_answers(version, topics)
        named = any(p.record_errors for t in topics for p in t.partitions)
        if named and has_field(module, "PartitionProduceResponse", "record_errors"):
            assert encoded is None
        else:
            assert encoded == expected
