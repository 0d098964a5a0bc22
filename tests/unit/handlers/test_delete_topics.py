import datetime
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokers.app.runtime import Broker
from brokers.handlers import delete_topics
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.admin_harness import call, entity, routed, standalone_broker

pytestmark = pytest.mark.unit
KEY = 20
TIMEOUT = datetime.timedelta(seconds=5)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with standalone_broker(tmp_path) as b:
        for name in ("a", "b", "__consumer_offsets"):
            b.topics.create_topic(name, 2, 1, {})
        yield b


def _by_name(broker: Broker, version: int, *names: str) -> Any:
    if version >= 6:
        topics = tuple(entity(KEY, 6, "DeleteTopicState", name=n, topic_id=None) for n in names)
        request = entity(KEY, 6, "DeleteTopicsRequest", topics=topics, timeout=TIMEOUT)
    else:
        request = entity(KEY, version, "DeleteTopicsRequest", topic_names=names, timeout=TIMEOUT)
    return call(routed(broker, delete_topics.API_KEY), version, request).responses


def _by_state(broker: Broker, *states: tuple[str | None, uuid.UUID | None]) -> Any:
    topics = tuple(entity(KEY, 6, "DeleteTopicState", name=n, topic_id=i) for n, i in states)
    request = entity(KEY, 6, "DeleteTopicsRequest", topics=topics, timeout=TIMEOUT)
    return call(routed(broker, delete_topics.API_KEY), 6, request).responses


@pytest.mark.parametrize("version", range(1, 7))
def test_every_version_deletes_by_name(broker: Broker, version: int) -> None:
    topic_id = broker.metadata.topics["a"].topic_id
    (result,) = _by_name(broker, version, "a")
    assert (result.name, result.error_code) == ("a", ErrorCode.none)
    assert "a" not in broker.metadata.topics
    assert broker.replicas.find("a", 0) is None and broker.replicas.find("a", 1) is None
    if version >= 6:
        assert result.topic_id == topic_id


def test_unknown_name_and_internal_topic_are_refused(broker: Broker) -> None:
    results = _by_name(broker, 5, "nope", "__consumer_offsets", "b")
    assert [(r.name, r.error_code) for r in results] == [
        ("nope", ErrorCode.unknown_topic_or_partition),
        ("__consumer_offsets", ErrorCode.topic_authorization_failed),
        ("b", ErrorCode.none),
    ]
    assert "__consumer_offsets" in broker.metadata.topics


def test_only_kafkas_internal_topics_are_internal(broker: Broker) -> None:
    """A `__` prefix alone does not make a topic internal (Kafka's `Topic.isInternal`)."""
    for name in ("__audit", "__usage", "__transaction_state"):
        broker.topics.create_topic(name, 1, 1, {})
    internal = {n for n, t in broker.metadata.topics.items() if t.is_internal}
    assert internal == {"__consumer_offsets", "__transaction_state"}
    results = _by_name(broker, 6, "__audit", "__usage", "__transaction_state")
    assert [(r.name, r.error_code) for r in results] == [
        ("__audit", ErrorCode.none),
        ("__usage", ErrorCode.none),
        ("__transaction_state", ErrorCode.topic_authorization_failed),
    ]


def test_delete_by_topic_id(broker: Broker) -> None:
    topic_id = broker.metadata.topics["b"].topic_id
    unknown = uuid.uuid4()
    results = _by_state(broker, (None, topic_id), (None, unknown))
    assert [(r.name, r.topic_id, r.error_code) for r in results] == [
        ("b", topic_id, ErrorCode.none),
        (None, unknown, ErrorCode.unknown_topic_id),
    ]
    assert "b" not in broker.metadata.topics


def test_ambiguous_and_duplicate_entries_are_invalid(broker: Broker) -> None:
    topic_id = broker.metadata.topics["a"].topic_id
    results = _by_state(
        broker,
        ("a", topic_id),
        (None, None),
        ("b", None),
        ("b", None),
        (None, topic_id),
        (None, topic_id),
    )
    messages = [(r.error_code, r.error_message) for r in results]
    assert messages == [
        (ErrorCode.invalid_request, "You may not specify both topic name and topic id."),
        (ErrorCode.invalid_request, "Neither topic name nor id were specified."),
        (ErrorCode.invalid_request, "Duplicate topic name."),
        (ErrorCode.invalid_request, "Duplicate topic name."),
        (ErrorCode.invalid_request, "Duplicate topic id."),
        (ErrorCode.invalid_request, "Duplicate topic id."),
    ]
    assert {"a", "b"} <= broker.metadata.topics.keys()


@pytest.mark.parametrize(
    ("version", "code"), [(2, ErrorCode.invalid_request), (6, ErrorCode.topic_deletion_disabled)]
)
def test_deletion_disabled_by_broker_config(tmp_path: Path, version: int, code: ErrorCode) -> None:
    with standalone_broker(tmp_path, {"delete.topic.enable": "false"}) as broker:
        broker.topics.create_topic("keep", 1, 1, {})
        (result,) = _by_name(broker, version, "keep")
        assert result.error_code == code
        assert "keep" in broker.metadata.topics


def test_more_than_the_request_limit_deletes_nothing(broker: Broker) -> None:
    names = ["a"] + [f"x{i}" for i in range(delete_topics.MAX_ITEMS)]
    results = _by_name(broker, 5, *names)
    assert {r.error_code for r in results} == {ErrorCode.invalid_request}
    assert "a" in broker.metadata.topics
