"""OffsetFetch through the gateway: v1-7 one group, v8+ many; group and topics prefixed, answers
stripped and foreign groups/topics dropped; null topics pass as null and the answer keeps only the
tenant's topics the caller may DESCRIBE; DESCRIBE on groups and topics, refusals merged in order."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import offset_fetch
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
M = offset_fetch
SINGLE = [v for v in versions(M) if v < 8]
MULTI = [v for v in versions(M) if v >= 8]


def _topics(version: int, names: tuple[str, ...] | None) -> Any:
    cls = "OffsetFetchRequestTopics" if version >= 8 else "OffsetFetchRequestTopic"
    if names is None:
        return None
    return tuple(request(M, version, cls, name=n, partition_indexes=(0,)) for n in names)


def _fetch(version: int, names: tuple[str, ...] | None, groups: tuple[str, ...] = ("g",)) -> Any:
    if version < 8:
        return request(
            M,
            version,
            "OffsetFetchRequest",
            group_id=groups[0],
            topics=_topics(version, names),
            require_stable=False,
        )
    entries = tuple(
        request(
            M,
            version,
            "OffsetFetchRequestGroup",
            group_id=g,
            member_id=None,
            member_epoch=-1,
            topics=_topics(version, names),
        )
        for g in groups
    )
    return request(M, version, "OffsetFetchRequest", groups=entries, require_stable=False)


def _answer_topics(version: int, names: tuple[str, ...]) -> Any:
    suffix = "s" if version >= 8 else ""
    return tuple(
        response(
            M,
            version,
            "OffsetFetchResponseTopic" + suffix,
            name=n,
            partitions=(
                response(
                    M,
                    version,
                    "OffsetFetchResponsePartition" + suffix,
                    partition_index=0,
                    committed_offset=7,
                    committed_leader_epoch=-1,
                    metadata="",
                    error_code=ErrorCode.none,
                ),
            ),
        )
        for n in names
    )


def _answer(version: int, names: tuple[str, ...], groups: tuple[str, ...] = ("acme_g",)) -> Any:
    if version < 8:
        return response(
            M,
            version,
            "OffsetFetchResponse",
            error_code=ErrorCode.none,
            topics=_answer_topics(version, names),
        )
    entries = tuple(
        response(
            M,
            version,
            "OffsetFetchResponseGroup",
            group_id=g,
            topics=_answer_topics(version, names),
            error_code=ErrorCode.none,
        )
        for g in groups
    )
    return response(M, version, "OffsetFetchResponse", groups=entries)


def _seen(topics: Any) -> list[tuple[str, ErrorCode]]:
    return [(t.name, t.partitions[0].error_code) for t in topics]


FOREIGN = ("acme_b", "bolt_a", "__consumer_offsets", "acme_a")


@pytest.mark.parametrize("version", SINGLE)
def test_single_group_named_topics(version: int) -> None:
    outcome = forwarded(asyncio.run(run(M, context(M, version), _fetch(version, ("a", "b")))))
    assert outcome.request.group_id == "acme_g"
    assert [t.name for t in outcome.request.topics] == ["acme_a", "acme_b"]
    client = outcome.on_response(_answer(version, FOREIGN))
    assert _seen(client.topics) == [("a", ErrorCode.none), ("b", ErrorCode.none)]


@pytest.mark.parametrize("version", [v for v in SINGLE if v >= 2])
def test_single_group_all_topics_filtered_by_describe(version: int) -> None:
    ctx = context(M, version, access=FakeAccess(denied={("DESCRIBE", "TOPIC", "b")}))
    outcome = forwarded(asyncio.run(run(M, ctx, _fetch(version, None))))
    assert outcome.request.topics is None
    client = outcome.on_response(_answer(version, FOREIGN))
    assert _seen(client.topics) == [("a", ErrorCode.none)]


@pytest.mark.parametrize("version", [1, 7, 8, 9])
def test_refused_topics_merged_in_request_order(version: int) -> None:
    ctx = context(M, version, access=FakeAccess(denied={("DESCRIBE", "TOPIC", "b")}))
    outcome = forwarded(asyncio.run(run(M, ctx, _fetch(version, ("b", "a")))))
    client = outcome.on_response(_answer(version, ("acme_a",)))
    topics = client.topics if version < 8 else client.groups[0].topics
    assert _seen(topics) == [("b", ErrorCode.topic_authorization_failed), ("a", ErrorCode.none)]
    assert topics[0].partitions[0].committed_offset == -1


@pytest.mark.parametrize("version", [1, 2, 7])
def test_denied_group_single(version: int) -> None:
    ctx = context(M, version, access=FakeAccess(denied={("DESCRIBE", "GROUP", "g")}))
    answer = replied(asyncio.run(run(M, ctx, _fetch(version, ("a",)))))
    if version == 1:
        assert _seen(answer.topics) == [("a", ErrorCode.group_authorization_failed)]
    else:
        assert answer.error_code == ErrorCode.group_authorization_failed
        assert answer.topics == ()


@pytest.mark.parametrize("version", MULTI)
def test_many_groups(version: int) -> None:
    access = FakeAccess(denied={("DESCRIBE", "GROUP", "h"), ("DESCRIBE", "TOPIC", "b")})
    ctx = context(M, version, access=access)
    req = _fetch(version, None, groups=("g", "h", "k"))
    outcome = forwarded(asyncio.run(run(M, ctx, req)))
    assert [(g.group_id, g.topics) for g in outcome.request.groups] == [
        ("acme_g", None),
        ("acme_k", None),
    ]
    client = outcome.on_response(_answer(version, FOREIGN, groups=("acme_k", "bolt_g", "acme_g")))
    assert [(g.group_id, g.error_code) for g in client.groups] == [
        ("g", ErrorCode.none),
        ("h", ErrorCode.group_authorization_failed),
        ("k", ErrorCode.none),
    ]
    assert _seen(client.groups[0].topics) == [("a", ErrorCode.none)]


@pytest.mark.parametrize("version", [1, 9])
def test_all_topics_refused_is_answered_locally(version: int) -> None:
    ctx = context(M, version, access=FakeAccess(denied={("DESCRIBE", "TOPIC", "a")}))
    answer = replied(asyncio.run(run(M, ctx, _fetch(version, ("a",)))))
    topics = answer.topics if version < 8 else answer.groups[0].topics
    assert _seen(topics) == [("a", ErrorCode.topic_authorization_failed)]
