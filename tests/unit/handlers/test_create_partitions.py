import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokers.app.runtime import Broker
from brokers.handlers import create_partitions
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.admin_harness import call, entity, routed, standalone_broker

pytestmark = pytest.mark.unit
KEY = 37


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with standalone_broker(tmp_path) as b:
        b.topics.create_topic("t", 1, 1, {"retention.ms": "5000"})
        yield b


def _topic(version: int, name: str, count: int, assignments: list[list[int]] | None = None) -> Any:
    wanted = None
    if assignments is not None:
        wanted = tuple(
            entity(KEY, version, "CreatePartitionsAssignment", broker_ids=ids)
            for ids in assignments
        )
    return entity(KEY, version, "CreatePartitionsTopic", name=name, count=count, assignments=wanted)


def _grow(broker: Broker, *topics: Any, version: int = 3, validate_only: bool = False) -> Any:
    request = entity(
        KEY,
        version,
        "CreatePartitionsRequest",
        topics=topics,
        timeout=datetime.timedelta(seconds=5),
        validate_only=validate_only,
    )
    return call(routed(broker, create_partitions.API_KEY), version, request).results


@pytest.mark.parametrize("version", range(4))
def test_every_version_grows_the_topic(broker: Broker, version: int) -> None:
    (result,) = _grow(broker, _topic(version, "t", 3), version=version)
    assert (result.name, result.error_code) == ("t", ErrorCode.none)
    assert set(broker.metadata.topics["t"].partitions) == {0, 1, 2}
    # new partitions run with the topic's overrides
    assert broker.replicas.get("t", 2).log.config.retention_ms == 5000


def test_count_must_increase(broker: Broker) -> None:
    (same,) = _grow(broker, _topic(3, "t", 1))
    assert same.error_code == ErrorCode.invalid_partitions
    assert same.error_message == "Topic already has 1 partition(s)."
    broker.topics.create_topic("u", 3, 1, {})
    (fewer,) = _grow(broker, _topic(3, "u", 2))
    assert fewer.error_code == ErrorCode.invalid_partitions
    assert len(broker.metadata.topics["u"].partitions) == 3


def test_unknown_and_duplicate_topics(broker: Broker) -> None:
    results = _grow(broker, _topic(3, "nope", 2), _topic(3, "t", 2), _topic(3, "t", 3))
    assert [r.error_code for r in results] == [
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.invalid_request,
        ErrorCode.invalid_request,
    ]
    assert results[1].error_message == "Duplicate topic name."
    assert len(broker.metadata.topics["t"].partitions) == 1


def test_validate_only_changes_nothing(broker: Broker) -> None:
    (result,) = _grow(broker, _topic(3, "t", 4), validate_only=True)
    assert result.error_code == ErrorCode.none
    assert len(broker.metadata.topics["t"].partitions) == 1
    assert broker.replicas.find("t", 1) is None


def test_explicit_assignments(broker: Broker) -> None:
    (ok,) = _grow(broker, _topic(3, "t", 3, [[0], [0]]))
    assert ok.error_code == ErrorCode.none
    assert len(broker.metadata.topics["t"].partitions) == 3
    short, elsewhere, double = (
        _grow(broker, _topic(3, "t", 6, [[0]]))[0],
        _grow(broker, _topic(3, "t", 4, [[7]]))[0],
        _grow(broker, _topic(3, "t", 4, [[0, 0]]))[0],
    )
    assert short.error_code == ErrorCode.invalid_replica_assignment
    assert short.error_message == (
        "Attempted to add 3 additional partition(s), but only 1 assignment(s) were specified."
    )
    assert elsewhere.error_code == ErrorCode.invalid_replica_assignment
    assert double.error_code == ErrorCode.invalid_replica_assignment
    assert len(broker.metadata.topics["t"].partitions) == 3
