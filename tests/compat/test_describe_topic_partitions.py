"""DescribeTopicPartitions (KIP-966, API 75 v0) byte for byte against Apache Kafka 4.1.1: the same
hand-made requests go to the session's Pier broker and Kafka node, and the decoded answers must be
equal once topic ids are reduced to "zero or not". Covers named and all-topics requests, paging by
partition limit (1, 2, 0 meaning 1), a cursor mid-topic, past the last partition and at a deleted
topic, unknown and illegal names, and the cursors Kafka refuses (INVALID_REQUEST)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kio.schema.describe_topic_partitions.v0 import request as dtp
from kio.schema.describe_topic_partitions.v0.response import DescribeTopicPartitionsResponse
from kio.schema.types import TopicName
from kio.static.primitive import i32

from brokers.wire.errors import ErrorCode
from tests.compat import data
from tests.compat.side_by_side import SideBySide, Target
from tests.e2e.raw_wire import RawConnection
from tests.polling import wait_until

pytestmark = [pytest.mark.compat]
TIMEOUT_S = 30.0
PARTITIONS = {"a": 3, "b": 1, "b-gone": 1, "c": 2}
Cursor = tuple[str, int] | None


@pytest.fixture
def base(side_by_side: SideBySide) -> str:
    """A fresh name prefix with topics a, b, c (3, 1, 2 partitions) on both systems, and `b-gone`
    (sorting between b and c), created and deleted."""
    prefix = f"dtp-{uuid.uuid4().hex[:8]}"
    for target in data.targets(side_by_side):
        for suffix, count in PARTITIONS.items():
            data.create_topic(target, f"{prefix}-{suffix}", count)
        admin = AdminClient({"bootstrap.servers": target.bootstrap})
        gone = f"{prefix}-b-gone"
        admin.delete_topics([gone])[gone].result(TIMEOUT_S)
        _wait_gone(target, gone)
    return prefix


def _wait_gone(target: Target, topic: str) -> None:
    def gone() -> bool:
        (answer,) = _ask(target, [_request([topic], 2000, None)])
        return bool(answer.topics[0].error_code == ErrorCode.unknown_topic_or_partition)

    wait_until(gone, what=f"{topic} deleted on {target.name}")


def _request(names: list[str], limit: int, cursor: Cursor) -> Any:
    return dtp.DescribeTopicPartitionsRequest(
        topics=tuple(dtp.TopicRequest(name=TopicName(n)) for n in names),
        response_partition_limit=i32(limit),
        cursor=None
        if cursor is None
        else dtp.Cursor(topic_name=TopicName(cursor[0]), partition_index=i32(cursor[1])),
    )


def _connect(target: Target) -> RawConnection:
    host, port = target.bootstrap.rsplit(":", 1)
    return RawConnection(host, int(port), timeout=TIMEOUT_S)


def _ask(target: Target, requests: list[Any]) -> list[Any]:
    with _connect(target) as connection:
        return [
            connection.call(r, DescribeTopicPartitionsResponse, timeout=TIMEOUT_S) for r in requests
        ]


def _comparable(answer: Any) -> Any:
    """The answer with topic ids reduced to whether they are set (ids differ between systems)."""
    topics = tuple(
        dataclasses.replace(
            t, topic_id=uuid.UUID(int=0 if t.topic_id is None or t.topic_id.int == 0 else 1)
        )
        for t in answer.topics
    )
    return dataclasses.replace(answer, topics=topics)


def _walk(target: Target, names: list[str], limit: int, cursor: Cursor) -> Iterator[Any]:
    """Every page, following next_cursor (at most 20) when topics are named; the all-topics form
    gets one page (the session holds other tests' topics, not the same on both systems: the
    cases end their page inside this test's names)."""
    with _connect(target) as connection:
        for _ in range(20 if names else 1):
            page = connection.call(
                _request(names, limit, cursor), DescribeTopicPartitionsResponse, timeout=TIMEOUT_S
            )
            yield page
            if page.next_cursor is None:
                return
            cursor = (page.next_cursor.topic_name, page.next_cursor.partition_index)


def _same(side_by_side: SideBySide, names: list[str], limit: int, cursor: Cursor) -> list[Any]:
    pier, kafka = (
        [_comparable(p) for p in _walk(t, names, limit, cursor)] for t in data.targets(side_by_side)
    )
    assert pier == kafka
    return pier


CASES: dict[str, tuple[list[str], int, tuple[str, int] | None]] = {
    "named-all": (["c", "a", "b", "a"], 2000, None),
    "named-limit-1": (["a", "b", "c"], 1, None),
    "named-limit-2-mid-topic": (["c", "a"], 2, ("a", 1)),
    "limit-0-is-1": (["b", "a"], 0, None),
    "cursor-at-deleted-topic": (["b-gone", "c"], 1, ("b-gone", 0)),
    "all-topics-cursor-at-deleted-topic": ([], 1, ("b-gone", 0)),
    "cursor-past-last-partition": (["b"], 2000, ("b", 5)),
    "unknown-and-illegal-names": (["missing", "bad name", "a"], 2000, None),
    "cursor-not-named": (["a", "b"], 2000, ("c", 0)),
    "cursor-negative-partition": (["a"], 2000, ("a", -1)),
    "all-topics-from-cursor": ([], 4, ("a", 1)),
    "all-topics-negative-partition": ([], 4, ("a", -1)),
}


@pytest.mark.parametrize("case", CASES)
def test_same_answers_as_kafka(side_by_side: SideBySide, base: str, case: str) -> None:
    names, limit, cursor = CASES[case]
    full = [n if n == "bad name" else f"{base}-{n}" for n in names]
    start = None if cursor is None else (f"{base}-{cursor[0]}", cursor[1])
    pages = _same(side_by_side, full, limit, start)
    assert pages and (pages[0].topics or case == "all-topics-negative-partition")
    if not names:  # one page, which must have ended inside this test's topics
        assert pages[0].next_cursor is None or pages[0].next_cursor.topic_name.startswith(base)
