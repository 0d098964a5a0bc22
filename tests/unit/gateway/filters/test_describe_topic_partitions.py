"""DescribeTopicPartitions through the gateway: names and cursor prefixed on the way in and
stripped on the way out, paging kept in the tenant's namespace (a next cursor past it is
dropped, one on a hidden topic never names it), DESCRIBE per topic, Kafka's cursor checks."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.wire.errors import ErrorCode
from gateway.kafka.api_table import advertised
from gateway.kafka.filters import describe_topic_partitions as dtp
from tests.unit.gateway.filters.harness import (
    FakeAccess,
    context,
    forwarded,
    replied,
    request,
    response,
    run,
)

pytestmark = pytest.mark.unit
ALL_TOPIC_OPS = sum(1 << b for b in (3, 4, 5, 6, 7, 8, 10, 11))


def ask(names: list[str], cursor: tuple[str, int] | None = None, limit: int = 2000) -> Any:
    return request(
        dtp,
        0,
        "DescribeTopicPartitionsRequest",
        topics=tuple(request(dtp, 0, "TopicRequest", name=n) for n in names),
        response_partition_limit=limit,
        cursor=None
        if cursor is None
        else request(dtp, 0, "Cursor", topic_name=cursor[0], partition_index=cursor[1]),
    )


def fleet_topic(name: str, partitions: int = 1, error: ErrorCode = ErrorCode.none) -> Any:
    parts = tuple(
        response(
            dtp,
            0,
            "DescribeTopicPartitionsResponsePartition",
            error_code=ErrorCode.none,
            partition_index=i,
            leader_id=1,
            leader_epoch=0,
            replica_nodes=(1,),
            isr_nodes=(1,),
            eligible_leader_replicas=(),
            last_known_elr=(),
            offline_replicas=(),
        )
        for i in range(partitions)
    )
    return response(
        dtp,
        0,
        "DescribeTopicPartitionsResponseTopic",
        error_code=error,
        name=name,
        topic_id=uuid.uuid4(),
        is_internal=name.startswith("__"),
        partitions=parts if error == ErrorCode.none else (),
        topic_authorized_operations=ALL_TOPIC_OPS,
    )


def answer(topics: list[Any], cursor: tuple[str, int] | None = None) -> Any:
    return response(
        dtp,
        0,
        "DescribeTopicPartitionsResponse",
        topics=tuple(topics),
        next_cursor=None
        if cursor is None
        else response(dtp, 0, "Cursor", topic_name=cursor[0], partition_index=cursor[1]),
    )


def cursor_of(entity: Any) -> tuple[str, int] | None:
    c = entity.cursor if hasattr(entity, "cursor") else entity.next_cursor
    return None if c is None else (c.topic_name, c.partition_index)


def test_named_topics_go_prefixed_sorted_once_and_come_back_stripped() -> None:
    ctx = context(dtp, 0)
    outcome = forwarded(asyncio.run(run(dtp, ctx, ask(["b", "a", "b"], cursor=("a", 1)))))
    assert [t.name for t in outcome.request.topics] == ["acme_a", "acme_b"]
    assert cursor_of(outcome.request) == ("acme_a", 1)
    shown = outcome.on_response(
        answer(
            [fleet_topic("acme_a", 2), fleet_topic("bolt_a"), fleet_topic("__consumer_offsets")],
            ("acme_b", 0),
        )
    )
    assert [t.name for t in shown.topics] == ["a"]
    assert cursor_of(shown) == ("b", 0)
    assert shown.topics[0].topic_authorized_operations == ALL_TOPIC_OPS
    assert not shown.topics[0].is_internal


def test_names_before_the_cursor_are_not_asked_for() -> None:
    ctx = context(dtp, 0)
    outcome = forwarded(asyncio.run(run(dtp, ctx, ask(["a", "c", "b"], cursor=("b", 0)))))
    assert [t.name for t in outcome.request.topics] == ["acme_b", "acme_c"]


def test_a_topic_without_describe_is_refused_here_and_never_forwarded() -> None:
    ctx = context(dtp, 0, access=FakeAccess(denied={("DESCRIBE", "TOPIC", "secret")}))
    outcome = forwarded(asyncio.run(run(dtp, ctx, ask(["secret", "open"], cursor=("open", 0)))))
    assert [t.name for t in outcome.request.topics] == ["acme_open"]
    shown = outcome.on_response(answer([fleet_topic("acme_open")]))
    assert [(t.name, t.error_code, len(t.partitions)) for t in shown.topics] == [
        ("open", ErrorCode.none, 1),
        ("secret", ErrorCode.topic_authorization_failed, 0),
    ]
    assert shown.topics[1].topic_id is None


def test_a_refused_cursor_topic_is_not_sent_as_the_cursor() -> None:
    ctx = context(dtp, 0, access=FakeAccess(denied={("DESCRIBE", "TOPIC", "a")}))
    outcome = forwarded(asyncio.run(run(dtp, ctx, ask(["a", "b"], cursor=("a", 3)))))
    assert [t.name for t in outcome.request.topics] == ["acme_b"]
    assert outcome.request.cursor is None


def test_only_refused_topics_are_answered_here() -> None:
    ctx = context(dtp, 0, access=FakeAccess(denied={("DESCRIBE", "TOPIC", "a")}))
    shown = replied(asyncio.run(run(dtp, ctx, ask(["a"]))))
    assert [(t.name, t.error_code) for t in shown.topics] == [
        ("a", ErrorCode.topic_authorization_failed)
    ]


@pytest.mark.parametrize("cursor", [("zzz", 0), ("a", -1)])
def test_a_cursor_kafka_refuses_is_invalid_request_for_every_named_topic(
    cursor: tuple[str, int],
) -> None:
    shown = replied(asyncio.run(run(dtp, context(dtp, 0), ask(["a", "b"], cursor=cursor))))
    assert [(t.name, t.error_code) for t in shown.topics] == [
        ("a", ErrorCode.invalid_request),
        ("b", ErrorCode.invalid_request),
    ]


def test_all_topics_with_a_negative_cursor_partition_is_answered_empty() -> None:
    shown = replied(asyncio.run(run(dtp, context(dtp, 0), ask([], cursor=("a", -1)))))
    assert shown.topics == ()


def test_all_topics_start_at_the_tenants_prefix_or_its_cursor() -> None:
    ctx = context(dtp, 0)
    plain = forwarded(asyncio.run(run(dtp, ctx, ask([], limit=5))))
    assert (plain.request.topics, cursor_of(plain.request)) == ((), ("acme_", 0))
    assert plain.request.response_partition_limit == 5
    assert plain.name_scope == "acme_", "the broker walks the tenant's names only"
    resumed = forwarded(asyncio.run(run(dtp, ctx, ask([], cursor=("bolt_x", 2)))))
    assert cursor_of(resumed.request) == ("acme_bolt_x", 2)  # never another tenant's name


def test_all_topics_page_ends_where_the_tenants_names_end() -> None:
    ctx = context(dtp, 0)
    outcome = forwarded(asyncio.run(run(dtp, ctx, ask([]))))
    shown = outcome.on_response(
        answer([fleet_topic("acme_z", 2), fleet_topic("bolt_a", 3)], cursor=("bolt_b", 1))
    )
    assert [t.name for t in shown.topics] == ["z"]
    assert shown.next_cursor is None


def test_all_topics_cursor_on_a_hidden_topic_never_names_it() -> None:
    ctx = context(dtp, 0, access=FakeAccess(denied={("DESCRIBE", "TOPIC", "hidden")}))
    outcome = forwarded(asyncio.run(run(dtp, ctx, ask([]))))
    shown = outcome.on_response(
        answer([fleet_topic("acme_a"), fleet_topic("acme_hidden", 4)], cursor=("acme_hidden", 2))
    )
    assert [t.name for t in shown.topics] == ["a"]
    assert cursor_of(shown) == ("hidden\0", 0)
    again = forwarded(asyncio.run(run(dtp, ctx, ask([], cursor=cursor_of(shown)))))
    assert cursor_of(again.request) == ("acme_hidden\0", 0)


def test_an_unknown_name_the_tenant_may_not_use_is_invalid_topic() -> None:
    outcome = forwarded(asyncio.run(run(dtp, context(dtp, 0), ask(["", "ok"]))))
    shown = outcome.on_response(
        answer(
            [
                fleet_topic("acme_", error=ErrorCode.unknown_topic_or_partition),
                fleet_topic("acme_ok", error=ErrorCode.unknown_topic_or_partition),
            ]
        )
    )
    assert [(t.name, t.error_code) for t in shown.topics] == [
        ("", ErrorCode.invalid_topic_exception),
        ("ok", ErrorCode.unknown_topic_or_partition),
    ]


def test_authorized_operations_are_the_callers() -> None:
    ctx = context(dtp, 0, access=FakeAccess(denied={("WRITE", "TOPIC", "a")}))
    outcome = forwarded(asyncio.run(run(dtp, ctx, ask(["a"]))))
    shown = outcome.on_response(answer([fleet_topic("acme_a")]))
    assert shown.topics[0].topic_authorized_operations == ALL_TOPIC_OPS & ~(1 << 4)


fleet_names = st.lists(
    st.one_of(
        st.from_regex(r"acme_[a-z0-9.-]{1,6}", fullmatch=True),
        st.from_regex(r"bolt_[a-z0-9.-]{1,6}", fullmatch=True),
        st.sampled_from(["__consumer_offsets", "__transaction_state", "plain"]),
    ),
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(
    names=fleet_names,
    cursor=st.one_of(st.none(), fleet_names.filter(bool).map(lambda n: n[0])),
    asked=st.lists(st.from_regex(r"[a-z0-9._-]{1,8}", fullmatch=True), max_size=3),
)
def test_isolation_property(names: list[str], cursor: str | None, asked: list[str]) -> None:
    ctx = context(dtp, 0)
    outcome = asyncio.run(run(dtp, ctx, ask(asked)))
    if not hasattr(outcome, "on_response"):
        return
    sent = forwarded(outcome)
    assert all(t.name.startswith("acme_") for t in sent.request.topics)
    if sent.request.cursor is not None:
        assert sent.request.cursor.topic_name.startswith("acme_")
    shown = sent.on_response(
        answer([fleet_topic(n) for n in names], None if cursor is None else (cursor, 0))
    )
    visible = [t.name for t in shown.topics]
    if shown.next_cursor is not None:
        visible.append(shown.next_cursor.topic_name)
    for name in visible:
        assert not any(bad in name for bad in ("acme_", "bolt_", "__", "plain")), visible


def test_advertised_only_when_the_brokers_serve_it() -> None:
    assert advertised({75: (0, 0)})[75].max_version == 0
    assert 75 not in advertised({3: (0, 12)})  # an older fleet: never advertised, never forwarded
    assert 75 not in advertised({75: (1, 2)})  # only versions the gateway cannot rewrite
