"""DescribeTopicPartitions (KIP-966) through the gateway, on a real broker: two tenants with
overlapping topic names page through their topics one partition at a time and each sees exactly
its own partitions, in order, and no cursor past them; a named look-up of the other tenant's topic
is UNKNOWN_TOPIC_OR_PARTITION; a cursor spelled like the other tenant's fleet name stays in the
caller's namespace. The gateway advertises the API at v0 (what the broker serves)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.schema.describe_topic_partitions.v0 import request as dtp_request
from kio.schema.describe_topic_partitions.v0.request import DescribeTopicPartitionsRequest
from kio.schema.describe_topic_partitions.v0.response import DescribeTopicPartitionsResponse
from kio.schema.types import TopicName
from kio.static.primitive import i32

from brokers.wire.errors import ErrorCode
from tests.e2e.gateway.sasl_wire import advertised_ranges, login
from tests.e2e.raw_wire import RawConnection
from tests.gateway_stack import GatewayStack

pytestmark = pytest.mark.e2e
TIMEOUT_S = 30.0
TOPICS = {"acme": {"a1": 3, "a2": 1, "shared": 2}, "bolt": {"b1": 2, "shared": 1}}
MAX_PAGES = 20


@pytest.fixture(scope="module")
def topics(gateway_stack: GatewayStack) -> GatewayStack:
    for tenant, wanted in TOPICS.items():
        admin = AdminClient(gateway_stack.client_config(tenant))
        futures = admin.create_topics([NewTopic(n, p, 1) for n, p in wanted.items()])
        for future in futures.values():
            future.result(TIMEOUT_S)
    return gateway_stack


def describe(
    connection: RawConnection,
    names: tuple[str, ...] = (),
    limit: int = 2000,
    cursor: tuple[str, int] | None = None,
) -> Any:
    request = DescribeTopicPartitionsRequest(
        topics=tuple(dtp_request.TopicRequest(name=TopicName(n)) for n in names),
        response_partition_limit=i32(limit),
        cursor=None
        if cursor is None
        else dtp_request.Cursor(topic_name=TopicName(cursor[0]), partition_index=i32(cursor[1])),
    )
    return connection.call(request, DescribeTopicPartitionsResponse, timeout=TIMEOUT_S)


def walk(connection: RawConnection, start: tuple[str, int] | None = None) -> list[tuple[str, int]]:
    """Every (topic, partition) of the all-topics form, one partition per page."""
    seen: list[tuple[str, int]] = []
    cursor = start
    for _ in range(MAX_PAGES):
        page = describe(connection, limit=1, cursor=cursor)
        assert all(t.error_code == ErrorCode.none for t in page.topics), page
        seen += [(t.name, p.partition_index) for t in page.topics for p in t.partitions]
        if page.next_cursor is None:
            return seen
        cursor = (page.next_cursor.topic_name, page.next_cursor.partition_index)
    raise AssertionError(f"no last page after {MAX_PAGES}: {seen}")


@pytest.mark.parametrize("tenant", sorted(TOPICS))
def test_paging_one_partition_at_a_time_stays_in_the_tenants_topics(
    topics: GatewayStack, tenant: str
) -> None:
    expected = [(n, i) for n, count in sorted(TOPICS[tenant].items()) for i in range(count)]
    with login(topics, tenant) as connection:
        assert advertised_ranges(connection)[75] == (0, 0)
        assert walk(connection) == expected
        whole = describe(connection)
    assert [(t.name, len(t.partitions)) for t in whole.topics] == sorted(TOPICS[tenant].items())
    assert whole.next_cursor is None
    for topic in whole.topics:
        assert not topic.is_internal and topic.topic_id is not None
        for p in topic.partitions:
            assert p.error_code == ErrorCode.none and p.leader_id >= 0 and p.isr_nodes
            assert (p.eligible_leader_replicas, p.last_known_elr) == ((), ())


def test_named_lookups_never_reach_the_other_tenant(topics: GatewayStack) -> None:
    with login(topics, "acme") as connection:
        page = describe(connection, ("shared", "b1"), limit=1, cursor=("b1", 0))
        assert [(t.name, t.error_code, len(t.partitions)) for t in page.topics] == [
            ("b1", ErrorCode.unknown_topic_or_partition, 0),
            ("shared", ErrorCode.none, 1),
        ]
        assert (page.next_cursor.topic_name, page.next_cursor.partition_index) == ("shared", 1)
        rest = describe(connection, ("shared", "b1"), limit=1, cursor=("shared", 1))
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in rest.topics] == [
            ("shared", [1])
        ]
        assert rest.next_cursor is None


def test_a_cursor_spelled_as_another_tenants_fleet_name_stays_home(topics: GatewayStack) -> None:
    with login(topics, "acme") as connection:
        # "acme_bolt_b1" sorts before acme's "shared": the page starts there, in acme's names
        assert walk(connection, start=("bolt_b1", 0)) == [("shared", 0), ("shared", 1)]
        assert walk(connection, start=("zzz", 0)) == []
