from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokers.app.runtime import Broker
from brokers.handlers import create_topics
from brokers.log.config import TOPIC_CONFIGS
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.admin_harness import call, entity, routed, standalone_broker

pytestmark = pytest.mark.unit
KEY = 19


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with standalone_broker(tmp_path, {"num.partitions": "2"}) as b:
        yield b


def _topic(version: int, name: str, partitions: int = -1, factor: int = -1, **kw: Any) -> Any:
    configs = tuple(
        entity(KEY, version, "CreatableTopicConfig", name=k, value=v)
        for k, v in kw.pop("configs", {}).items()
    )
    assignments = tuple(
        entity(KEY, version, "CreatableReplicaAssignment", partition_index=i, broker_ids=ids)
        for i, ids in kw.pop("assignments", [])
    )
    return entity(
        KEY,
        version,
        "CreatableTopic",
        name=name,
        num_partitions=partitions,
        replication_factor=factor,
        assignments=assignments,
        configs=configs,
    )


def _create(broker: Broker, *topics: Any, version: int = 7, validate_only: bool = False) -> Any:
    request = entity(
        KEY, version, "CreateTopicsRequest", topics=topics, validate_only=validate_only
    )
    return call(routed(broker, create_topics.API_KEY), version, request).topics


@pytest.mark.parametrize("version", range(2, 8))
def test_every_version_creates_with_broker_defaults(broker: Broker, version: int) -> None:
    (result,) = _create(broker, _topic(version, "orders"), version=version)
    assert result.error_code == ErrorCode.none
    assert len(broker.metadata.topics["orders"].partitions) == 2  # num.partitions=2
    assert broker.replicas.find("orders", 1) is not None
    if version >= 5:
        assert (result.num_partitions, result.replication_factor) == (2, 1)
        assert [c.name for c in result.configs] == sorted(TOPIC_CONFIGS)
    if version >= 7:
        assert result.topic_id == broker.metadata.topics["orders"].topic_id


def test_overrides_are_stored_and_reported_with_their_source(broker: Broker) -> None:
    topic = _topic(7, "events", 3, 1, configs={"cleanup.policy": "compact", "retention.ms": "1000"})
    (result,) = _create(broker, topic)
    assert result.error_code == ErrorCode.none and result.num_partitions == 3
    assert broker.metadata.topics["events"].configs == {
        "cleanup.policy": "compact",
        "retention.ms": "1000",
    }
    configs = {c.name: c for c in result.configs}
    assert (configs["cleanup.policy"].value, configs["cleanup.policy"].config_source) == (
        "compact",
        1,
    )
    assert (configs["segment.bytes"].value, configs["segment.bytes"].config_source) == (
        "1073741824",
        5,
    )
    assert broker.replicas.get("events", 0).log.config.retention_ms == 1000


def test_existing_invalid_and_colliding_names(broker: Broker) -> None:
    _create(broker, _topic(7, "a.b"))
    results = _create(broker, _topic(7, "a.b"), _topic(7, "bad name"), _topic(7, "a_b"))
    codes = [(r.name, r.error_code) for r in results]
    assert codes == [
        ("a.b", ErrorCode.topic_already_exists),
        ("bad name", ErrorCode.invalid_topic_exception),
        ("a_b", ErrorCode.invalid_topic_exception),
    ]
    assert results[0].error_message == "Topic 'a.b' already exists."
    assert results[2].error_message == "Topic 'a_b' collides with existing topic: a.b"
    assert all(r.topic_id is None and r.num_partitions == -1 for r in results)


def test_duplicate_names_are_refused_once_and_not_created(broker: Broker) -> None:
    results = _create(broker, _topic(7, "dup"), _topic(7, "dup", 3), _topic(7, "solo"))
    assert [(r.name, r.error_code) for r in results] == [
        ("dup", ErrorCode.invalid_request),
        ("solo", ErrorCode.none),
    ]
    assert results[0].error_message == "Duplicate topic name."
    assert "dup" not in broker.metadata.topics


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"retention.ms": "soon"}, "Invalid value soon for configuration retention.ms"),
        ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
        ({"retention.ms": None}, "Null value not supported for topic configs: retention.ms"),
    ],
)
def test_invalid_configs(broker: Broker, configs: dict[str, Any], message: str) -> None:
    (result,) = _create(broker, _topic(7, "t", configs=configs))
    assert result.error_code == ErrorCode.invalid_config
    assert result.error_message is not None and result.error_message.startswith(message)
    assert "t" not in broker.metadata.topics


@pytest.mark.parametrize(
    ("partitions", "factor", "code"),
    [
        (0, 1, ErrorCode.invalid_partitions),
        (-2, 1, ErrorCode.invalid_partitions),
        (1, 0, ErrorCode.invalid_replication_factor),
        (1, 2, ErrorCode.invalid_replication_factor),  # one broker only
        (10_001, 1, ErrorCode.policy_violation),  # per-topic partition limit
    ],
)
def test_bad_partitions_or_replication_factor(
    broker: Broker, partitions: int, factor: int, code: ErrorCode
) -> None:
    (result,) = _create(broker, _topic(7, "t", partitions, factor))
    assert result.error_code == code
    assert "t" not in broker.metadata.topics


def test_validate_only_reports_without_creating(broker: Broker) -> None:
    (result,) = _create(broker, _topic(7, "dry", 4, 1), validate_only=True)
    assert result.error_code == ErrorCode.none and result.num_partitions == 4
    assert result.topic_id is None
    assert "dry" not in broker.metadata.topics and broker.replicas.find("dry", 0) is None


def test_manual_assignment_on_this_broker(broker: Broker) -> None:
    (result,) = _create(broker, _topic(7, "manual", assignments=[(1, [0]), (0, [0])]))
    assert result.error_code == ErrorCode.none and result.num_partitions == 2
    assert set(broker.metadata.topics["manual"].partitions) == {0, 1}


@pytest.mark.parametrize(
    ("assignments", "partitions", "code", "message"),
    [
        ([(0, [1])], -1, ErrorCode.invalid_replica_assignment, "includes broker 1, but no such"),
        ([(0, [0]), (2, [0])], -1, ErrorCode.invalid_replica_assignment, "consecutive 0-based"),
        ([(0, [0]), (0, [0])], -1, ErrorCode.invalid_replica_assignment, "multiple manual"),
        ([(0, [0, 0])], -1, ErrorCode.invalid_replica_assignment, "broker 0 more than once"),
        ([(0, [])], -1, ErrorCode.invalid_replica_assignment, "empty replica list"),
        ([(0, [0])], 1, ErrorCode.invalid_request, "numPartitions was not set to -1"),
    ],
)
def test_invalid_manual_assignments(
    broker: Broker, assignments: Any, partitions: int, code: ErrorCode, message: str
) -> None:
    (result,) = _create(broker, _topic(7, "m", partitions, assignments=assignments))
    assert result.error_code == code
    assert message in (result.error_message or "")
    assert "m" not in broker.metadata.topics


def test_more_than_the_request_limit_creates_nothing(broker: Broker) -> None:
    topics = [_topic(7, f"t{i}") for i in range(create_topics.MAX_ITEMS + 1)]
    results = _create(broker, *topics)
    assert len(results) == len(topics)
    assert {r.error_code for r in results} == {ErrorCode.invalid_request}
    assert not broker.metadata.topics
