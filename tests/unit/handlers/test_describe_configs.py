from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokers.app.runtime import Broker
from brokers.handlers import describe_configs
from brokers.log.config import TOPIC_CONFIGS
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.admin_harness import call, entity, routed, standalone_broker

pytestmark = pytest.mark.unit
KEY = 32
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
PROPERTIES = {"log.retention.hours": "2", "ssl.keystore.password": "hunter2", "num.partitions": "3"}


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with standalone_broker(tmp_path, PROPERTIES) as b:
        b.topics.create_topic("plain", 1, 1, {})
        b.topics.create_topic("tuned", 1, 1, {"retention.ms": "1000", "cleanup.policy": "compact"})
        yield b


def _describe(
    broker: Broker,
    *resources: tuple[int, str, tuple[str, ...] | None],
    version: int = 4,
    **flags: bool,
) -> Any:
    wanted = tuple(
        entity(
            KEY,
            version,
            "DescribeConfigsResource",
            resource_type=t,
            resource_name=n,
            configuration_keys=k,
        )
        for t, n, k in resources
    )
    request = entity(KEY, version, "DescribeConfigsRequest", resources=wanted, **flags)
    return call(routed(broker, describe_configs.API_KEY), version, request).results


def _configs(result: Any) -> dict[str, Any]:
    assert result.error_code == ErrorCode.none
    return {c.name: c for c in result.configs}


@pytest.mark.parametrize("version", range(1, 5))
def test_every_version_lists_all_topic_configs_with_sources(broker: Broker, version: int) -> None:
    (result,) = _describe(broker, (TOPIC, "plain", None), version=version)
    configs = _configs(result)
    assert configs.keys() == TOPIC_CONFIGS.keys()
    # log.retention.hours=2 on the broker is what an un-overridden topic gets
    assert (configs["retention.ms"].value, configs["retention.ms"].config_source) == (
        "7200000",
        STATIC_BROKER_CONFIG,
    )
    assert (configs["segment.bytes"].value, configs["segment.bytes"].config_source) == (
        "1073741824",
        DEFAULT_CONFIG,
    )
    assert not any(c.read_only or c.is_sensitive or c.synonyms for c in configs.values())


def test_overrides_and_synonyms_in_kafkas_order(broker: Broker) -> None:
    (result,) = _describe(
        broker, (TOPIC, "tuned", ("retention.ms", "cleanup.policy")), include_synonyms=True
    )
    configs = _configs(result)
    assert configs.keys() == {"retention.ms", "cleanup.policy"}
    retention = configs["retention.ms"]
    assert (retention.value, retention.config_source) == ("1000", TOPIC_CONFIG)
    assert [(s.name, s.value, s.source) for s in retention.synonyms] == [
        ("retention.ms", "1000", TOPIC_CONFIG),
        ("log.retention.hours", "2", STATIC_BROKER_CONFIG),
    ]  # no DEFAULT_CONFIG synonym: Kafka's log.retention.ms defaults to null
    assert [(s.name, s.source) for s in configs["cleanup.policy"].synonyms] == [
        ("cleanup.policy", TOPIC_CONFIG),
        ("log.cleanup.policy", DEFAULT_CONFIG),
    ]


def test_documentation_and_types_from_v3(broker: Broker) -> None:
    (v4,) = _describe(
        broker,
        (TOPIC, "plain", ("retention.ms", "cleanup.policy", "preallocate")),
        include_documentation=True,
    )
    configs = _configs(v4)
    assert [configs[n].config_type for n in ("retention.ms", "cleanup.policy", "preallocate")] == [
        5,
        7,
        1,
    ]
    assert configs["retention.ms"].documentation == TOPIC_CONFIGS["retention.ms"].doc
    (undocumented,) = _describe(broker, (TOPIC, "plain", ("retention.ms",)))
    assert _configs(undocumented)["retention.ms"].documentation is None


def test_unknown_and_invalid_topics(broker: Broker) -> None:
    unknown, invalid = _describe(broker, (TOPIC, "nope", None), (TOPIC, "bad/name", None))
    assert (unknown.error_code, unknown.configs) == (ErrorCode.unknown_topic_or_partition, ())
    assert (invalid.error_code, invalid.configs) == (ErrorCode.invalid_topic_exception, ())
    assert (unknown.resource_type, unknown.resource_name) == (TOPIC, "nope")


def test_broker_resource_hides_secrets(broker: Broker) -> None:
    (result,) = _describe(broker, (BROKER, "0", None), include_synonyms=True)
    configs = _configs(result)
    secret = configs["ssl.keystore.password"]
    assert (secret.value, secret.is_sensitive, secret.config_type) == (None, True, 9)
    assert all(s.value is None for s in secret.synonyms)
    assert (configs["num.partitions"].value, configs["num.partitions"].config_source) == (
        "3",
        STATIC_BROKER_CONFIG,
    )
    assert configs["socket.request.max.bytes"].value == str(100 * 1024 * 1024)
    assert configs["socket.request.max.bytes"].config_source == DEFAULT_CONFIG
    assert configs["node.id"].value == "0"
    assert all(c.read_only for c in configs.values())


def test_other_broker_ids_and_resource_types(broker: Broker) -> None:
    other, not_int, cluster, logger, unknown = _describe(
        broker,
        (BROKER, "3", None),
        (BROKER, "x", None),
        (BROKER, "", None),
        (BROKER_LOGGER, "0", None),
        (99, "a", None),
    )
    assert other.error_code == ErrorCode.invalid_request
    assert other.error_message == "Unexpected broker id, expected 0 or empty string, but received 3"
    assert not_int.error_message == "Broker id must be an integer, but it is: x"
    assert (cluster.error_code, cluster.configs) == (ErrorCode.none, ())
    assert (logger.error_code, logger.configs) == (ErrorCode.none, ())
    assert unknown.error_code == ErrorCode.invalid_request


def test_more_than_the_request_limit(broker: Broker) -> None:
    resources = [(TOPIC, "plain", None)] * (describe_configs.MAX_RESOURCES + 1)
    results = _describe(broker, *resources)
    assert {r.error_code for r in results} == {ErrorCode.invalid_request}
