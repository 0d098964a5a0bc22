"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords through the gateway: topic names both ways,
foreign topics dropped, per-topic ACL refusals merged in request order, replica requests refused."""

from __future__ import annotations

import asyncio
from types import ModuleType
from typing import Any

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import delete_records, list_offsets, offset_for_leader_epoch
from tests.unit.gateway.filters.harness import (
    FakeAccess,
    context,
    fitting,
    forwarded,
    replied,
    request,
    response,
    run,
    versions,
)

pytestmark = pytest.mark.unit
# module -> (ACL operation, request topic/partition classes, response classes, name field)
SHAPES: dict[ModuleType, tuple[str, str, str, str, str, str, str, str]] = {
    list_offsets: (
        "DESCRIBE",
        "ListOffsetsRequest",
        "ListOffsetsTopic",
        "ListOffsetsPartition",
        "ListOffsetsResponse",
        "ListOffsetsTopicResponse",
        "ListOffsetsPartitionResponse",
        "name",
    ),
    offset_for_leader_epoch: (
        "DESCRIBE",
        "OffsetForLeaderEpochRequest",
        "OffsetForLeaderTopic",
        "OffsetForLeaderPartition",
        "OffsetForLeaderEpochResponse",
        "OffsetForLeaderTopicResult",
        "EpochEndOffset",
        "topic",
    ),
    delete_records: (
        "DELETE",
        "DeleteRecordsRequest",
        "DeleteRecordsTopic",
        "DeleteRecordsPartition",
        "DeleteRecordsResponse",
        "DeleteRecordsTopicResult",
        "DeleteRecordsPartitionResult",
        "name",
    ),
}
CASES = [(m, v) for m in SHAPES for v in versions(m)]
P = dict(
    partition_index=0,
    partition=0,
    timestamp=-1,
    offset=5,
    current_leader_epoch=-1,
    leader_epoch=0,
    low_watermark=0,
    end_offset=5,
    error_code=ErrorCode.none,
)


def _request(module: ModuleType, version: int, names: list[str], replica_id: int = -1) -> Any:
    _, req, topic, part, *_rest, field = SHAPES[module]
    topics = tuple(
        request(
            module,
            version,
            topic,
            **{field: n},
            partitions=(request(module, version, part, **fitting(module, version, part, P)),),
        )
        for n in names
    )
    top = {"replica_id": replica_id, "isolation_level": 0, "timeout": 0}
    return request(module, version, req, topics=topics, **fitting(module, version, req, top))


def _answer(module: ModuleType, version: int, names: list[str]) -> Any:
    *_, resp, topic, part, field = SHAPES[module]
    topics = tuple(
        response(
            module,
            version,
            topic,
            **{field: n},
            partitions=(response(module, version, part, **fitting(module, version, part, P)),),
        )
        for n in names
    )
    return response(module, version, resp, topics=topics)


@pytest.mark.parametrize(("module", "version"), CASES)
def test_names_both_ways_with_refusals_in_order(module: ModuleType, version: int) -> None:
    operation, *_, field = SHAPES[module]
    ctx = context(module, version, access=FakeAccess(denied={(operation, "TOPIC", "no")}))
    outcome = forwarded(asyncio.run(run(module, ctx, _request(module, version, ["a", "no", "b"]))))
    assert [getattr(t, field) for t in outcome.request.topics] == ["acme_a", "acme_b"]
    shown = outcome.on_response(
        _answer(module, version, ["acme_b", "bolt_a", "__consumer_offsets", "acme_a"])
    )
    assert [(getattr(t, field), t.partitions[0].error_code) for t in shown.topics] == [
        ("a", ErrorCode.none),
        ("no", ErrorCode.topic_authorization_failed),
        ("b", ErrorCode.none),
    ]


@pytest.mark.parametrize("module", list(SHAPES))
def test_all_refused_is_answered_locally(module: ModuleType) -> None:
    operation, *_ = SHAPES[module]
    ctx = context(
        module, module.MAX_VERSION, access=FakeAccess(denied={(operation, "TOPIC", "no")})
    )
    answer = replied(asyncio.run(run(module, ctx, _request(module, module.MAX_VERSION, ["no"]))))
    assert answer.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed


@pytest.mark.parametrize(
    ("module", "replica_id", "served"),
    [
        (list_offsets, -2, False),
        (list_offsets, 1, False),
        (offset_for_leader_epoch, -2, True),
        (offset_for_leader_epoch, 0, False),
    ],
)
def test_replica_requests_are_never_forwarded(
    module: ModuleType, replica_id: int, served: bool
) -> None:
    outcome = asyncio.run(
        run(
            module,
            context(module, module.MAX_VERSION),
            _request(module, module.MAX_VERSION, ["a"], replica_id),
        )
    )
    if served:
        forwarded(outcome)
    else:
        assert (
            replied(outcome).topics[0].partitions[0].error_code
            == ErrorCode.cluster_authorization_failed
        )
