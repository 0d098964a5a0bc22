"""OffsetCommit through the gateway: group and topics prefixed, answers stripped and foreign
topics dropped; READ on the group and on each topic, refused topics answered locally and merged
in request order."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import offset_commit
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
M = offset_commit


def _commit(version: int, *topics: str) -> object:
    def topic(name: str) -> object:
        part = request(
            M,
            version,
            "OffsetCommitRequestPartition",
            partition_index=0,
            committed_offset=5,
            committed_leader_epoch=-1,
            committed_metadata=None,
        )
        return request(M, version, "OffsetCommitRequestTopic", name=name, partitions=(part,))

    return request(
        M,
        version,
        "OffsetCommitRequest",
        group_id="g",
        generation_id_or_member_epoch=1,
        member_id="m",
        group_instance_id=None,
        topics=tuple(topic(t) for t in topics),
    )


def _answer(version: int, *topics: str) -> object:
    def topic(name: str) -> object:
        part = response(
            M,
            version,
            "OffsetCommitResponsePartition",
            partition_index=0,
            error_code=ErrorCode.none,
        )
        return response(M, version, "OffsetCommitResponseTopic", name=name, partitions=(part,))

    return response(M, version, "OffsetCommitResponse", topics=tuple(topic(t) for t in topics))


def _errors(answer: object) -> list[tuple[str, ErrorCode]]:
    return [(t.name, t.partitions[0].error_code) for t in answer.topics]  # type: ignore[attr-defined]


@pytest.mark.parametrize("version", list(versions(offset_commit)))
def test_names_prefixed_and_stripped_foreign_dropped(version: int) -> None:
    outcome = forwarded(asyncio.run(run(M, context(M, version), _commit(version, "a", "b"))))
    assert outcome.request.group_id == "acme_g"
    assert [t.name for t in outcome.request.topics] == ["acme_a", "acme_b"]
    client = outcome.on_response(
        _answer(version, "acme_a", "bolt_a", "acme_b", "__consumer_offsets")
    )
    assert _errors(client) == [("a", ErrorCode.none), ("b", ErrorCode.none)]


@pytest.mark.parametrize("version", [2, 9])
def test_refused_topics_are_merged_in_request_order(version: int) -> None:
    ctx = context(M, version, access=FakeAccess(denied={("READ", "TOPIC", "b")}))
    outcome = forwarded(asyncio.run(run(M, ctx, _commit(version, "a", "b", "c"))))
    assert [t.name for t in outcome.request.topics] == ["acme_a", "acme_c"]
    client = outcome.on_response(_answer(version, "acme_c", "acme_a"))
    assert _errors(client) == [
        ("a", ErrorCode.none),
        ("b", ErrorCode.topic_authorization_failed),
        ("c", ErrorCode.none),
    ]


def test_all_topics_refused_is_answered_locally() -> None:
    ctx = context(M, 9, access=FakeAccess(denied={("READ", "TOPIC", "a")}))
    answer = replied(asyncio.run(run(M, ctx, _commit(9, "a"))))
    assert _errors(answer) == [("a", ErrorCode.topic_authorization_failed)]


@pytest.mark.parametrize("version", [2, 9])
def test_denied_group_fails_every_partition(version: int) -> None:
    ctx = context(M, version, access=FakeAccess(denied={("READ", "GROUP", "g")}))
    answer = replied(asyncio.run(run(M, ctx, _commit(version, "a", "b"))))
    assert _errors(answer) == [
        ("a", ErrorCode.group_authorization_failed),
        ("b", ErrorCode.group_authorization_failed),
    ]


DAY = datetime.timedelta(days=1)
FLEET = datetime.timedelta(milliseconds=-1)


@pytest.mark.parametrize("version", [2, 3, 4])
@pytest.mark.parametrize(
    ("asked", "sent"),
    [
        (FLEET, FLEET),  # the fleet's retention, as asked
        (datetime.timedelta(0), datetime.timedelta(0)),
        (DAY, DAY),  # shorter than the fleet's: the tenant's own choice
        (7 * DAY, 7 * DAY),
        (7 * DAY + datetime.timedelta(milliseconds=1), FLEET),  # longer: the fleet's
        (datetime.timedelta.max, FLEET),  # "forever"
        (datetime.timedelta(milliseconds=-2), FLEET),  # a negative Kafka does not document
    ],
)
def test_a_retention_time_past_a_week_is_sent_as_the_fleet_s(
    version: int, asked: datetime.timedelta, sent: datetime.timedelta
) -> None:
    commit = dataclasses.replace(_commit(version, "a"), retention_time=asked)  # type: ignore[type-var]
    outcome = forwarded(asyncio.run(run(M, context(M, version), commit)))
    assert outcome.request.retention_time == sent
    assert outcome.request.group_id == "acme_g"


def test_versions_without_a_retention_time_are_forwarded_as_they_are() -> None:
    outcome = forwarded(asyncio.run(run(M, context(M, 5), _commit(5, "a"))))
    assert not hasattr(outcome.request, "retention_time")
