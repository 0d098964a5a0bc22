"""DescribeTopicPartitions (KIP-966) on a real standalone broker: paging by partition limit and
cursor as Kafka 4.1 pages, errors per topic and for the whole request, empty ELR lists."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokers.app.runtime import Broker
from brokers.handlers import describe_topic_partitions as dtp
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.admin_harness import call, entity, routed, standalone_broker

pytestmark = pytest.mark.unit
KEY = 75
TOPICS = {"alpha": 3, "bravo": 1, "charlie": 2}
ALL_TOPIC_OPERATIONS = {3, 4, 5, 6, 7, 8, 10, 11}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with standalone_broker(tmp_path) as b:
        for name, partitions in TOPICS.items():
            b.topics.create_topic(name, partitions, 1, {})
        yield b


def describe(
    broker: Broker,
    names: list[str] | None = None,
    limit: int = 2000,
    cursor: tuple[str, int] | None = None,
) -> Any:
    request = entity(
        KEY,
        0,
        "DescribeTopicPartitionsRequest",
        topics=tuple(entity(KEY, 0, "TopicRequest", name=n) for n in names or ()),
        response_partition_limit=limit,
        cursor=None
        if cursor is None
        else entity(KEY, 0, "Cursor", topic_name=cursor[0], partition_index=cursor[1]),
    )
    return call(routed(broker, dtp.API_KEY), 0, request)


def shown(response: Any) -> list[tuple[str, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics]


def cursor_of(response: Any) -> tuple[str, int] | None:
    c = response.next_cursor
    return None if c is None else (c.topic_name, c.partition_index)


def test_all_topics_one_page_with_partition_details(broker: Broker) -> None:
    response = describe(broker)
    assert shown(response) == [("alpha", [0, 1, 2]), ("bravo", [0]), ("charlie", [0, 1])]
    assert response.next_cursor is None
    topic = response.topics[0]
    assert topic.error_code == ErrorCode.none and not topic.is_internal
    assert topic.topic_id == broker.metadata.topics["alpha"].topic_id
    assert {b for b in range(32) if topic.topic_authorized_operations >> b & 1} == (
        ALL_TOPIC_OPERATIONS
    )
    p = topic.partitions[1]
    assert (p.error_code, p.leader_id, p.replica_nodes, p.isr_nodes) == (
        ErrorCode.none,
        0,
        (0,),
        (0,),
    )
    assert (p.eligible_leader_replicas, p.last_known_elr, p.offline_replicas) == ((), (), ())


def test_limit_one_walks_every_partition_one_page_at_a_time(broker: Broker) -> None:
    pages, cursor = [], None
    for _ in range(10):
        response = describe(broker, limit=1, cursor=cursor)
        pages.append(shown(response))
        cursor = cursor_of(response)
        if cursor is None:
            break
    assert pages == [
        [("alpha", [0])], [("alpha", [1])], [("alpha", [2])], [("bravo", [0])],
        [("charlie", [0])], [("charlie", [1])],
    ]  # fmt: skip


def test_a_full_page_points_at_the_next_topics_first_partition(broker: Broker) -> None:
    response = describe(broker, limit=3)
    assert shown(response) == [("alpha", [0, 1, 2])]
    assert cursor_of(response) == ("bravo", 0)


def test_cursor_mid_topic(broker: Broker) -> None:
    response = describe(broker, limit=3, cursor=("alpha", 1))
    assert shown(response) == [("alpha", [1, 2]), ("bravo", [0])]
    assert cursor_of(response) == ("charlie", 0)
    named = describe(broker, ["charlie", "alpha"], limit=2, cursor=("alpha", 2))
    assert shown(named) == [("alpha", [2]), ("charlie", [0])]
    assert cursor_of(named) == ("charlie", 1)


def test_cursor_at_a_deleted_topic(broker: Broker) -> None:
    first = describe(broker, limit=3)
    assert cursor_of(first) == ("bravo", 0)
    broker.topics.delete_topic("bravo")
    rest = describe(broker, limit=3, cursor=("bravo", 0))
    assert shown(rest) == [("charlie", [0, 1])] and rest.next_cursor is None
    named = describe(broker, ["bravo", "charlie"], limit=3, cursor=("bravo", 0))
    assert [(t.name, t.error_code) for t in named.topics] == [
        ("bravo", ErrorCode.unknown_topic_or_partition),
        ("charlie", ErrorCode.none),
    ]


def test_limit_is_capped_and_at_least_one(broker: Broker) -> None:
    assert shown(describe(broker, limit=0)) == [("alpha", [0])]
    assert shown(describe(broker, limit=-5)) == [("alpha", [0])]


def test_named_topics_errors_and_sorted_unique_order(broker: Broker) -> None:
    response = describe(broker, ["charlie", "nope", "bad name", "alpha", "charlie"])
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("alpha", ErrorCode.none),
        ("bad name", ErrorCode.invalid_topic_exception),
        ("charlie", ErrorCode.none),
        ("nope", ErrorCode.unknown_topic_or_partition),
    ]
    missing = response.topics[3]
    assert missing.partitions == () and (missing.topic_id is None or missing.topic_id.int == 0)


def test_a_cursor_outside_the_named_topics_refuses_the_request(broker: Broker) -> None:
    response = describe(broker, ["alpha", "bravo"], cursor=("charlie", 0))
    assert [(t.name, t.error_code, t.partitions) for t in response.topics] == [
        ("alpha", ErrorCode.invalid_request, ()),
        ("bravo", ErrorCode.invalid_request, ()),
    ]


def test_a_negative_cursor_partition_refuses_the_request(broker: Broker) -> None:
    response = describe(broker, ["alpha"], cursor=("alpha", -1))
    assert [(t.name, t.error_code) for t in response.topics] == [
        ("alpha", ErrorCode.invalid_request)
    ]
    assert describe(broker, cursor=("alpha", -1)).topics == ()


def test_cursor_past_the_last_partition_shows_the_topic_empty(broker: Broker) -> None:
    response = describe(broker, ["bravo"], cursor=("bravo", 5))
    assert shown(response) == [("bravo", [])] and response.next_cursor is None


def test_configured_cap(tmp_path: Path) -> None:
    with standalone_broker(tmp_path, {dtp.PARTITION_LIMIT_KEY: "2"}) as b:
        b.topics.create_topic("many", 5, 1, {})
        response = describe(b, ["many"], limit=100)
        assert shown(response) == [("many", [0, 1])] and cursor_of(response) == ("many", 2)


def test_a_name_scope_walks_only_the_names_under_it(broker: Broker) -> None:
    """The gateway's all-topics form carries the tenant's prefix as the header's name scope:
    the page holds that tenant's topics and ends after its last, without a cursor."""
    looked_up: list[str] = []
    metadata = broker.metadata
    real = metadata.topic

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(metadata, name)

        def topic(self, name: str) -> Any:
            looked_up.append(name)
            return real(name)

    def page(scope: str, limit: int = 2000, cursor: tuple[str, int] | None = None) -> Any:
        request = entity(
            KEY, 0, "DescribeTopicPartitionsRequest", topics=(), response_partition_limit=limit,
            cursor=None if cursor is None
            else entity(KEY, 0, "Cursor", topic_name=cursor[0], partition_index=cursor[1]),
        )  # fmt: skip
        return dtp.describe(Counting(), request, 2000, scope)  # type: ignore[arg-type]

    only_b = page("b")
    assert [(n, shown) for n, _m, shown, _e in only_b.topics] == [("bravo", [0])]
    assert only_b.next_cursor is None and looked_up == ["bravo"]
    first = page("a", limit=2)
    assert [(n, shown) for n, _m, shown, _e in first.topics] == [("alpha", [0, 1])]
    assert first.next_cursor == ("alpha", 2)
    rest = page("a", cursor=("alpha", 2))
    assert [(n, shown) for n, _m, shown, _e in rest.topics] == [("alpha", [2])]
    assert rest.next_cursor is None, "bravo is not under the scope: the walk stops"
    assert [n for n, *_ in page("").topics] == ["alpha", "bravo", "charlie"]
