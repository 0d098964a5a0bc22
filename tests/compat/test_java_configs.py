"""`kafka-configs.sh` (kafka.admin.ConfigCommand, in kafka_2.13 4.1.1) against Pier and against
Apache Kafka 4.1.1: topic configs described, added, deleted and refused, broker configs
described; dynamic broker configs, which Pier does not have on purpose, are held to their row of
docs/compatibility.md (D1). Known differences are xfail(strict) tests naming their row."""

from __future__ import annotations

import pytest

from tests.compat import data
from tests.compat.side_by_side import Ran, SideBySide, assert_same, error_lines

pytestmark = [pytest.mark.compat]

CONFIGS = "kafka.admin.ConfigCommand"


def configs(pair: SideBySide, *args: str) -> tuple[Ran, Ran]:
    return pair.run("server-tool", CONFIGS, "--bootstrap-server", "{bootstrap}", *args)


def test_topic_configs_alter_delete_describe(side_by_side: SideBySide, topic_name: str) -> None:
    names = {topic_name: "<T>"}
    for target in data.targets(side_by_side):
        data.create_topic(target, topic_name, 1)
    topic = ("--entity-type", "topics", "--entity-name", topic_name)
    added = configs(
        side_by_side,
        *topic,
        "--alter",
        "--add-config",
        "retention.ms=5000,max.message.bytes=2000000",
    )
    assert assert_same(*added, names) == "Completed updating config for topic <T>."
    deleted = configs(side_by_side, *topic, "--alter", "--delete-config", "retention.ms")
    assert_same(*deleted, names)
    described = assert_same(*configs(side_by_side, *topic, "--describe"), names)
    assert described.splitlines() == [
        "Dynamic configs for topic <T> are:",
        "  max.message.bytes=2000000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "max.message.bytes=2000000, DEFAULT_CONFIG:message.max.bytes=1048588}",
    ]
    refused = configs(side_by_side, *topic, "--alter", "--add-config", "retention.ms=abc")
    assert refused[0].returncode == refused[1].returncode == 1
    assert error_lines(refused[0], names) == error_lines(refused[1], names)
    assert any("Invalid value abc for configuration retention.ms" in line
               for line in error_lines(refused[0], names))  # fmt: skip


def test_topic_config_synonyms(side_by_side: SideBySide, topic_name: str) -> None:
    names = {topic_name: "<T>"}
    for target in data.targets(side_by_side):
        data.create_topic(target, topic_name, 1)
    topic = ("--entity-type", "topics", "--entity-name", topic_name)
    assert_same(
        *configs(side_by_side, *topic, "--alter", "--add-config", "retention.ms=123456"), names
    )
    assert_same(*configs(side_by_side, *topic, "--describe"), names)


def test_broker_configs_describe(side_by_side: SideBySide) -> None:
    broker = assert_same(
        *configs(side_by_side, "--entity-type", "brokers", "--entity-name", "0", "--describe"), {}
    )
    assert broker == "Dynamic configs for broker 0 are:"


def test_dynamic_broker_config_is_refused_on_purpose(side_by_side: SideBySide) -> None:
    """D1: Pier reads broker settings from its properties file only; Kafka applies them live."""
    pier, kafka = configs(
        side_by_side, "--entity-type", "brokers", "--entity-name", "0", "--alter",
        "--add-config", "log.cleaner.threads=1",
    )  # fmt: skip
    assert (
        kafka.returncode == 0 and kafka.stdout.strip() == "Completed updating config for broker 0."
    )
    assert pier.returncode == 1
    assert (
        "Caused by: org.apache.kafka.common.errors.InvalidRequestException: Cannot update these"
        " configs dynamically: log.cleaner.threads. Pier has no dynamic broker configs: broker"
        " settings are read from its properties file at start-up."
    ) in error_lines(pier, {})
