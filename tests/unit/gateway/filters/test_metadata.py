"""Metadata through the gateway: names both ways, foreign and internal topics dropped, endpoints
and cluster id rewritten, DESCRIBE refusals, auto-creation only within ACLs and limits."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import metadata
from tests.unit.gateway.filters.harness import (
    FakeAccess,
    FakeFleet,
    context,
    forwarded,
    request,
    response,
    run,
    versions,
)

pytestmark = pytest.mark.unit
ALL_VERSIONS = list(versions(metadata))


def _req(version: int, names: list[str] | None, **fields: Any) -> Any:
    topics = (
        None
        if names is None
        else tuple(
            request(metadata, version, "MetadataRequestTopic", name=n, topic_id=None) for n in names
        )
    )
    fields.setdefault("allow_auto_topic_creation", True)
    fields.setdefault("include_cluster_authorized_operations", False)
    fields.setdefault("include_topic_authorized_operations", False)
    return request(metadata, version, "MetadataRequest", topics=topics, **fields)


def _answer(version: int, names: list[str]) -> Any:
    topics = tuple(
        response(
            metadata,
            version,
            "MetadataResponseTopic",
            error_code=ErrorCode.none,
            name=n,
            topic_id=None,
            is_internal=n.startswith("__"),
            partitions=(),
            topic_authorized_operations=-(2**31),
        )
        for n in names
    )
    brokers = tuple(
        response(
            metadata,
            version,
            "MetadataResponseBroker",
            node_id=i,
            host=f"b{i}.fleet",
            port=9092,
            rack="r1",
        )
        for i in (1, 2, 3)
    )
    return response(
        metadata,
        version,
        "MetadataResponse",
        brokers=brokers,
        cluster_id="fleet",
        controller_id=2,
        topics=topics,
        cluster_authorized_operations=-(2**31),
        error_code=0,
    )


FLEET_TOPICS = ["acme_a", "bolt_a", "__consumer_offsets", "acme_b", "plain"]


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_all_topics_are_filtered_to_the_tenant(version: int) -> None:
    ctx = context(metadata, version)
    req = _req(version, [] if version == 0 else None)
    outcome = forwarded(asyncio.run(run(metadata, ctx, req)))
    # Asked as the tenant's prefix and the brokers' wildcard: never every topic of the fleet.
    assert [(t.name, getattr(t, "topic_id", None)) for t in outcome.request.topics] == [
        ("acme_*", None)
    ]
    assert dataclasses.replace(outcome.request, topics=req.topics) == req
    shown = outcome.on_response(_answer(version, [*FLEET_TOPICS, "acme_*"]))
    assert [t.name for t in shown.topics] == ["a", "b"]
    assert all(getattr(t, "is_internal", False) is False for t in shown.topics)
    assert [(b.node_id, b.host, b.port) for b in shown.brokers] == [
        (1, "gw.example", 9101),
        (2, "gw.example", 9102),
    ]  # broker 3 has no gateway endpoint
    assert all(getattr(b, "rack", None) is None for b in shown.brokers)
    if version >= 2:
        assert shown.cluster_id == "virtual-acme"
    if version >= 1:
        assert shown.controller_id == 2


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_named_topics_are_prefixed_and_denied_ones_refused(version: int) -> None:
    access = FakeAccess(denied={("DESCRIBE", "TOPIC", "secret")})
    ctx = context(metadata, version, access=access, fleet=FakeFleet(partitions=0))
    outcome = forwarded(asyncio.run(run(metadata, ctx, _req(version, ["a", "secret", "b"]))))
    assert [t.name for t in outcome.request.topics] == ["acme_a", "acme_b"]
    shown = outcome.on_response(_answer(version, ["acme_b", "bolt_b", "acme_a"]))
    assert [(t.name, t.error_code) for t in shown.topics] == [
        ("a", ErrorCode.none),
        ("secret", ErrorCode.topic_authorization_failed),
        ("b", ErrorCode.none),
    ]


def test_all_topics_answer_omits_topics_denied_describe() -> None:
    ctx = context(metadata, 12, access=FakeAccess(denied={("DESCRIBE", "TOPIC", "b")}))
    outcome = forwarded(asyncio.run(run(metadata, ctx, _req(12, None))))
    assert [t.name for t in outcome.on_response(_answer(12, FLEET_TOPICS)).topics] == ["a"]


@pytest.mark.parametrize(
    ("access", "in_use", "expected"),
    [
        (FakeAccess(), 98, True),
        (FakeAccess(), 99, False),  # two topics x 1 default partition: 101 > 100
        (FakeAccess(denied={("CREATE", "CLUSTER", "kafka-cluster")}), 0, True),
        (
            FakeAccess(denied={("CREATE", "CLUSTER", "kafka-cluster"), ("CREATE", "TOPIC", "b")}),
            0,
            False,
        ),
    ],
)
def test_auto_creation_needs_create_and_room(
    access: FakeAccess, in_use: int, expected: bool
) -> None:
    ctx = context(metadata, 9, access=access, fleet=FakeFleet(partitions=in_use))
    outcome = forwarded(asyncio.run(run(metadata, ctx, _req(9, ["a", "b"]))))
    assert outcome.request.allow_auto_topic_creation is expected


@pytest.mark.parametrize("version", [0, 1, 3])
def test_old_versions_ask_for_all_topics_when_creation_is_refused(version: int) -> None:
    ctx = context(metadata, version, fleet=FakeFleet(partitions=100))
    outcome = forwarded(asyncio.run(run(metadata, ctx, _req(version, ["a", "new"]))))
    assert [t.name for t in outcome.request.topics] == ["acme_*"]  # the tenant's: creates nothing
    shown = outcome.on_response(_answer(version, FLEET_TOPICS))
    assert [(t.name, t.error_code) for t in shown.topics] == [
        ("a", ErrorCode.none),
        ("new", ErrorCode.unknown_topic_or_partition),
    ]


def test_lookup_by_topic_id_is_refused_and_operations_computed() -> None:
    import uuid

    topic_id = uuid.uuid4()
    access = FakeAccess(denied={("WRITE", "TOPIC", "a")})
    ctx = context(metadata, 10, access=access)
    by_id = request(metadata, 10, "MetadataRequestTopic", name=None, topic_id=topic_id)
    by_name = request(metadata, 10, "MetadataRequestTopic", name="a", topic_id=None)
    req = request(
        metadata,
        10,
        "MetadataRequest",
        topics=(by_id, by_name),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )
    outcome = forwarded(asyncio.run(run(metadata, ctx, req)))
    assert [t.name for t in outcome.request.topics] == ["acme_a"]
    shown = outcome.on_response(_answer(10, ["acme_a"]))
    assert [(t.name, t.error_code) for t in shown.topics] == [
        ("", ErrorCode.unknown_topic_id),  # v10-11 answers cannot carry a null name
        ("a", ErrorCode.none),
    ]
    ops = shown.topics[1].topic_authorized_operations
    assert ops & (1 << 3) and not ops & (1 << 4)  # READ yes, WRITE denied
    assert shown.cluster_authorized_operations > 0


def test_every_id_and_name_of_a_request_is_looked_up_once_not_per_topic() -> None:
    """A tenant naming many ids (or many new topics) costs one look-up of those alone: looking
    each up with the whole fleet's metadata made 20 unknown ids cost 2.6 s of the gateway's loop
    on a fleet of 17,000 partitions."""
    import uuid

    own = uuid.uuid4()
    unknown = [uuid.uuid4() for _ in range(20)]
    fleet = FakeFleet(ids={own: "acme_a", unknown[0]: "bolt_x"})
    ctx = context(metadata, 12, fleet=fleet)
    by_ids = tuple(
        request(metadata, 12, "MetadataRequestTopic", name=None, topic_id=i)
        for i in [own, *unknown]
    )
    req = request(
        metadata,
        12,
        "MetadataRequest",
        topics=by_ids,
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    outcome = forwarded(asyncio.run(run(metadata, ctx, req)))
    assert [t.name for t in outcome.request.topics] == ["acme_a"]
    assert fleet.lookups == [("ids", 21)]
    shown = outcome.on_response(_answer(12, ["acme_a"]))
    assert [t.error_code for t in shown.topics].count(ErrorCode.unknown_topic_id) == 20

    fleet = FakeFleet(topic_counts={"acme_a": 1})
    ctx = context(metadata, 9, fleet=fleet)
    names = ["a", *(f"new{i}" for i in range(10))]
    outcome = forwarded(asyncio.run(run(metadata, ctx, _req(9, names))))
    assert outcome.request.allow_auto_topic_creation is True
    assert fleet.lookups == [("counts", 11)]  # which of them exist: one look-up


def test_a_name_with_the_brokers_wildcard_is_refused_here() -> None:
    """`x*` is no topic name; forwarded as `acme_x*` each would cost the broker a scan of every
    topic name (its prefix look-up), so a tenant could repeat that thousands of times a request."""
    ctx = context(metadata, 9)
    outcome = forwarded(asyncio.run(run(metadata, ctx, _req(9, ["a", "x*", "*"]))))
    assert [t.name for t in outcome.request.topics] == ["acme_a"]
    shown = outcome.on_response(_answer(9, ["acme_a"]))
    assert [(t.name, t.error_code) for t in shown.topics] == [
        ("a", ErrorCode.none),
        ("x*", ErrorCode.invalid_topic_exception),
        ("*", ErrorCode.invalid_topic_exception),
    ]
