"""The Produce response encoder against kio's, byte for byte, on every version: the answers it
takes (ok, errors with and without messages, append times, several topics, topic ids, long and
non-ASCII names) and None — kio's path — for those it leaves (record errors, v8+)."""

from __future__ import annotations

import datetime
import uuid

import pytest

from brokers.server.produce_response import (
    PartitionAnswer,
    TopicAnswer,
    encode_answers,
    kio_response,
)
from brokers.wire.entities import has_field, response_module
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import encode_entity

pytestmark = pytest.mark.unit
VERSIONS = range(3, 14)
APPENDED = datetime.datetime(2026, 11, 28, 19, 30, 1, 234000, tzinfo=datetime.UTC)


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
