from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokers.app.runtime import Broker
from brokers.handlers import alter_configs
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.admin_harness import call, entity, routed, standalone_broker

pytestmark = pytest.mark.unit
KEY = 33
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with standalone_broker(tmp_path) as b:
        b.topics.create_topic("t", 2, 1, {"retention.ms": "1000"})
        yield b


def _resource(version: int, type_: int, name: str, configs: list[tuple[str, str | None]]) -> Any:
    entries = tuple(entity(KEY, version, "AlterableConfig", name=k, value=v) for k, v in configs)
    return entity(
        KEY,
        version,
        "AlterConfigsResource",
        resource_type=type_,
        resource_name=name,
        configs=entries,
    )


def _alter(broker: Broker, *resources: Any, version: int = 2, validate_only: bool = False) -> Any:
    request = entity(
        KEY, version, "AlterConfigsRequest", resources=resources, validate_only=validate_only
    )
    return call(routed(broker, alter_configs.API_KEY), version, request).responses


@pytest.mark.parametrize("version", range(3))
def test_every_version_replaces_all_overrides(broker: Broker, version: int) -> None:
    (result,) = _alter(
        broker, _resource(version, TOPIC, "t", [("segment.ms", "60000")]), version=version
    )
    assert (result.error_code, result.resource_name) == (ErrorCode.none, "t")
    # retention.ms was not named, so its override is gone (legacy full replacement)
    assert broker.metadata.topics["t"].configs == {"segment.ms": "60000"}
    log_config = broker.replicas.get("t", 1).log.config
    assert (log_config.segment_ms, log_config.retention_ms) == (60000, 604800000)


def test_validate_only_changes_nothing(broker: Broker) -> None:
    (result,) = _alter(broker, _resource(2, TOPIC, "t", [("segment.ms", "1")]), validate_only=True)
    assert result.error_code == ErrorCode.none
    assert broker.metadata.topics["t"].configs == {"retention.ms": "1000"}


@pytest.mark.parametrize(
    ("configs", "code", "message"),
    [
        ([("retention.ms", "x")], ErrorCode.invalid_config, "Invalid value x for configuration"),
        ([("nope", "1")], ErrorCode.invalid_config, "Unknown topic config name: nope"),
        (
            [("retention.ms", None)],
            ErrorCode.invalid_request,
            "Null value not supported for : retention.ms",
        ),
        (
            [("retention.ms", "1"), ("retention.ms", "2")],
            ErrorCode.invalid_request,
            "Error due to duplicate config keys",
        ),
    ],
)
def test_invalid_changes_are_refused(
    broker: Broker, configs: list[tuple[str, str | None]], code: ErrorCode, message: str
) -> None:
    (result,) = _alter(broker, _resource(2, TOPIC, "t", configs))
    assert result.error_code == code
    assert (result.error_message or "").startswith(message)
    assert broker.metadata.topics["t"].configs == {"retention.ms": "1000"}


def test_resource_level_errors_stay_per_resource(broker: Broker) -> None:
    results = _alter(
        broker,
        _resource(2, TOPIC, "missing", [("retention.ms", "1")]),
        _resource(2, TOPIC, "t", []),
        _resource(2, TOPIC, "t", []),
        _resource(2, BROKER, "0", [("log.retention.hours", "1")]),
        _resource(2, BROKER, "", []),
        _resource(2, BROKER, "5", []),
        _resource(2, BROKER_LOGGER, "0", []),
    )
    assert [r.error_code for r in results] == [
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.invalid_request,
        ErrorCode.invalid_request,
        ErrorCode.invalid_request,
        ErrorCode.none,
        ErrorCode.invalid_request,
        ErrorCode.invalid_request,
    ]
    assert results[1].error_message == "Each resource must appear at most once."
    assert "Cannot update these configs dynamically: log.retention.hours" in (
        results[3].error_message or ""
    )
    assert broker.metadata.topics["t"].configs == {"retention.ms": "1000"}
