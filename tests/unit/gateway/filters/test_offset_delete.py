"""OffsetDelete through the gateway: group and topics prefixed, topics stripped and foreign ones
dropped; DELETE on the group, READ on each topic (refusals merged in request order)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import offset_delete
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
M = offset_delete


def _delete(version: int, *topics: str) -> Any:
    entries = tuple(
        request(
            M,
            version,
            "OffsetDeleteRequestTopic",
            name=t,
            partitions=(request(M, version, "OffsetDeleteRequestPartition", partition_index=0),),
        )
        for t in topics
    )
    return request(M, version, "OffsetDeleteRequest", group_id="g", topics=entries)


def _answer(version: int, *topics: str) -> Any:
    entries = tuple(
        response(
            M,
            version,
            "OffsetDeleteResponseTopic",
            name=t,
            partitions=(
                response(
                    M,
                    version,
                    "OffsetDeleteResponsePartition",
                    partition_index=0,
                    error_code=ErrorCode.none,
                ),
            ),
        )
        for t in topics
    )
    return response(M, version, "OffsetDeleteResponse", error_code=ErrorCode.none, topics=entries)


@pytest.mark.parametrize("version", list(versions(M)))
def test_names_prefixed_stripped_and_refusals_merged(version: int) -> None:
    ctx = context(M, version, access=FakeAccess(denied={("READ", "TOPIC", "b")}))
    outcome = forwarded(asyncio.run(run(M, ctx, _delete(version, "a", "b"))))
    assert outcome.request.group_id == "acme_g"
    assert [t.name for t in outcome.request.topics] == ["acme_a"]
    client = outcome.on_response(_answer(version, "bolt_a", "acme_a", "__consumer_offsets"))
    assert [(t.name, t.partitions[0].error_code) for t in client.topics] == [
        ("a", ErrorCode.none),
        ("b", ErrorCode.topic_authorization_failed),
    ]


def test_denied_group_is_answered_locally() -> None:
    ctx = context(M, 0, access=FakeAccess(denied={("DELETE", "GROUP", "g")}))
    answer = replied(asyncio.run(run(M, ctx, _delete(0, "a"))))
    assert answer.error_code == ErrorCode.group_authorization_failed
    assert answer.topics == ()


def test_all_topics_refused_is_answered_locally() -> None:
    ctx = context(M, 0, access=FakeAccess(denied={("READ", "TOPIC", "a")}))
    answer = replied(asyncio.run(run(M, ctx, _delete(0, "a"))))
    assert answer.error_code == ErrorCode.none
    assert answer.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed


def test_empty_group_id_is_invalid() -> None:
    req = _delete(0, "a")
    import dataclasses

    answer = replied(asyncio.run(run(M, context(M, 0), dataclasses.replace(req, group_id=""))))
    assert answer.error_code == ErrorCode.invalid_group_id
