"""DescribeProducers through the gateway: topics prefixed, answers stripped and foreign topics
dropped, error messages made safe; READ per topic, refusals merged in request order."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import describe_producers
from tests.unit.gateway.filters.harness import (
    FakeAccess,
    context,
    forwarded,
    replied,
    request,
    response,
    run,
    versions,
)

pytestmark = pytest.mark.unit
M = describe_producers


def _describe(version: int, *topics: str) -> Any:
    entries = tuple(
        request(M, version, "TopicRequest", name=t, partition_indexes=(0,)) for t in topics
    )
    return request(M, version, "DescribeProducersRequest", topics=entries)


def _topic(version: int, name: str, message: str | None) -> Any:
    partition = response(
        M,
        version,
        "PartitionResponse",
        partition_index=0,
        error_code=ErrorCode.none,
        error_message=message,
        active_producers=(),
    )
    return response(M, version, "TopicResponse", name=name, partitions=(partition,))


@pytest.mark.parametrize("version", list(versions(M)))
def test_names_prefixed_stripped_and_refusals_merged(version: int) -> None:
    ctx = context(M, version, access=FakeAccess(denied={("READ", "TOPIC", "a")}))
    outcome = forwarded(asyncio.run(run(M, ctx, _describe(version, "a", "b", "c"))))
    assert [t.name for t in outcome.request.topics] == ["acme_b", "acme_c"]
    topics = (
        _topic(version, "acme_c", "bolt_x is busy"),
        _topic(version, "bolt_b", None),
        _topic(version, "acme_b", "acme_b is busy"),
    )
    answer = response(M, version, "DescribeProducersResponse", topics=topics)
    client = outcome.on_response(answer)
    assert [
        (t.name, t.partitions[0].error_code, t.partitions[0].error_message) for t in client.topics
    ] == [
        ("a", ErrorCode.topic_authorization_failed, None),
        ("b", ErrorCode.none, "b is busy"),
        ("c", ErrorCode.none, None),
    ]


def test_all_refused_is_answered_locally() -> None:
    ctx = context(M, 0, access=FakeAccess(denied={("READ", "TOPIC", "a")}))
    answer = replied(asyncio.run(run(M, ctx, _describe(0, "a"))))
    assert answer.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
