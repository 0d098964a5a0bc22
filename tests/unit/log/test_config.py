"""Topic configuration: Kafka 4.0 names and defaults, parsing, validation, broker synonyms."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.log.config import (
    TOPIC_CONFIGS,
    LogConfig,
    broker_default_value,
    validate_topic_overrides,
)
from brokers.log.errors import InvalidConfigError, LogError

pytestmark = pytest.mark.unit

KAFKA_40_TOPIC_CONFIGS = {
    "cleanup.policy", "compression.gzip.level", "compression.lz4.level", "compression.type",
    "compression.zstd.level", "delete.retention.ms", "file.delete.delay.ms", "flush.messages",
    "flush.ms", "follower.replication.throttled.replicas", "index.interval.bytes",
    "leader.replication.throttled.replicas", "local.retention.bytes", "local.retention.ms",
    "max.compaction.lag.ms", "max.message.bytes", "message.downconversion.enable",
    "message.timestamp.after.max.ms", "message.timestamp.before.max.ms", "message.timestamp.type",
    "min.cleanable.dirty.ratio", "min.compaction.lag.ms", "min.insync.replicas", "preallocate",
    "remote.log.copy.disable", "remote.log.delete.on.disable", "remote.storage.enable",
    "retention.bytes", "retention.ms", "segment.bytes", "segment.index.bytes", "segment.jitter.ms",
    "segment.ms", "unclean.leader.election.enable",
}  # fmt: skip


def rejected(overrides: dict[str, str | None]) -> InvalidConfigError:
    with pytest.raises(InvalidConfigError) as info:
        validate_topic_overrides(overrides)
    return info.value


# -- the table and defaults -------------------------------------------------------------------


def test_table_lists_exactly_kafka_40_topic_configs() -> None:
    assert set(TOPIC_CONFIGS) == KAFKA_40_TOPIC_CONFIGS
    for name, definition in TOPIC_CONFIGS.items():
        assert definition.name == name
        assert definition.doc


def test_no_overrides_gives_kafka_defaults() -> None:
    config = LogConfig.from_properties({})
    assert config == LogConfig()
    assert config.segment_bytes == 1024**3
    assert config.retention_ms == 7 * 24 * 3600 * 1000
    assert config.max_message_bytes == 1024 * 1024 + 12
    assert config.message_timestamp_after_max_ms == 3600000  # KIP-1030 (Kafka 4.0)
    assert config.cleanup_policy == frozenset({"delete"})
    assert config.compression_type == "producer"


def test_table_defaults_agree_with_the_dataclass() -> None:
    fields = {f.name: f.default for f in dataclasses.fields(LogConfig)}
    checked = 0
    for name, definition in TOPIC_CONFIGS.items():
        field = name.replace(".", "_")
        if field not in fields:
            continue
        single = LogConfig.from_properties({name: definition.default or ""})
        assert getattr(single, field) == fields[field], name
        checked += 1
    assert checked >= 25


def test_broker_synonym_names_follow_kafka() -> None:
    expected = {
        "segment.bytes": "log.segment.bytes",
        "segment.ms": "log.roll.ms",
        "segment.jitter.ms": "log.roll.jitter.ms",
        "segment.index.bytes": "log.index.size.max.bytes",
        "retention.ms": "log.retention.ms",
        "max.message.bytes": "message.max.bytes",
        "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
        "file.delete.delay.ms": "log.segment.delete.delay.ms",
        "flush.messages": "log.flush.interval.messages",
        "delete.retention.ms": "log.cleaner.delete.retention.ms",
        "min.insync.replicas": "min.insync.replicas",
        "remote.storage.enable": None,
    }
    for topic_name, broker_name in expected.items():
        assert TOPIC_CONFIGS[topic_name].broker_default_name == broker_name


# -- parsing ----------------------------------------------------------------------------------


def test_overrides_are_parsed_by_type() -> None:
    config = LogConfig.from_properties(
        {
            "segment.bytes": " 2097152 ",
            "retention.ms": "-1",
            "cleanup.policy": "compact , delete",
            "unclean.leader.election.enable": "TRUE",
            "min.cleanable.dirty.ratio": "0.25",
            "message.timestamp.type": "LogAppendTime",
            "compression.type": "zstd",
            "compression.zstd.level": "-5",
            "leader.replication.throttled.replicas": "0:1, 1:2",
            "flush.messages": "+10",
        }
    )
    assert config.segment_bytes == 2097152
    assert config.retention_ms == -1
    assert config.cleanup_policy == frozenset({"compact", "delete"})
    assert config.compact and config.delete
    assert config.unclean_leader_election_enable is True
    assert config.min_cleanable_dirty_ratio == 0.25
    assert config.message_timestamp_type == "LogAppendTime"
    assert config.compression_zstd_level == -5
    assert config.leader_replication_throttled_replicas == ("0:1", "1:2")
    assert config.flush_messages == 10


def test_empty_cleanup_policy_is_an_empty_set() -> None:
    assert LogConfig.from_properties({"cleanup.policy": ""}).cleanup_policy == frozenset()


def test_validate_returns_normalised_overrides_only() -> None:
    normalised = validate_topic_overrides(
        {
            "preallocate": " True ",
            "cleanup.policy": "compact ,delete",
            "min.cleanable.dirty.ratio": "1",
            "retention.ms": "+5",
            "follower.replication.throttled.replicas": " * ",
        }
    )
    assert normalised == {
        "preallocate": "true",
        "cleanup.policy": "compact,delete",
        "min.cleanable.dirty.ratio": "1.0",
        "retention.ms": "5",
        "follower.replication.throttled.replicas": "*",
    }


def test_compacted_topic_rolls_by_max_compaction_lag() -> None:
    config = LogConfig(cleanup_policy=frozenset({"compact"}), max_compaction_lag_ms=1000)
    assert config.max_segment_ms == 1000
    assert LogConfig(max_compaction_lag_ms=1000).max_segment_ms == LogConfig().segment_ms


# -- every kind of error ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("segment.bytes", "abc", "Not a number of type INT"),
        ("segment.bytes", "2147483648", "Not a number of type INT"),  # int32 overflow
        ("segment.bytes", "1_048_576", "Not a number of type INT"),  # Java has no underscores
        ("retention.ms", "1.5", "Not a number of type LONG"),
        ("retention.ms", "9223372036854775808", "Not a number of type LONG"),
        ("min.cleanable.dirty.ratio", "half", "Not a number of type DOUBLE"),
        ("min.cleanable.dirty.ratio", "nan", "Not a number of type DOUBLE"),
        ("preallocate", "yes", "Expected value to be either true or false"),
        ("segment.bytes", "1048575", "Value must be at least 1048576"),  # Kafka 4.0 minimum
        ("retention.ms", "-2", "Value must be at least -1"),
        ("min.insync.replicas", "0", "Value must be at least 1"),
        ("segment.ms", "0", "Value must be at least 1"),
        ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
        ("min.cleanable.dirty.ratio", "-0.1", "Value must be at least 0"),
        ("compression.lz4.level", "18", "Value must be no more than 17"),
        ("compression.zstd.level", "23", "Value must be no more than 22"),
        ("compression.gzip.level", "0", "Value must be between 1 and 9 or equal to -1"),
        (
            "message.timestamp.type",
            "createtime",
            "String must be one of: CreateTime, LogAppendTime",
        ),
        ("compression.type", "brotli", "String must be one of: uncompressed, zstd, lz4"),
        ("cleanup.policy", "delete,archive", "String must be one of: compact, delete"),
        ("leader.replication.throttled.replicas", "0-1", "must be the literal '*'"),
        ("remote.storage.enable", "true", "Tiered Storage functionality is disabled"),
    ],
)
def test_invalid_values_are_refused_with_kafkas_message(
    name: str, value: str, message: str
) -> None:
    error = rejected({name: value})
    assert error.name == name
    assert message in str(error)
    assert isinstance(error, LogError)
    with pytest.raises(InvalidConfigError):
        LogConfig.from_properties({name: value})


def test_message_names_the_value_and_config_like_kafka() -> None:
    error = rejected({"segment.bytes": "x"})
    assert str(error) == "Invalid value x for configuration segment.bytes: Not a number of type INT"
    error = rejected({"cleanup.policy": "delete,archive"})
    assert str(error).startswith("Invalid value archive for configuration cleanup.policy")


@pytest.mark.parametrize(
    "name", ["no.such.config", "message.format.version", "message.timestamp.difference.max.ms"]
)
def test_unknown_and_removed_names_are_refused(name: str) -> None:
    error = rejected({name: "1"})
    assert error.name == name
    assert str(error) == f"Unknown topic config name: {name}"
    with pytest.raises(InvalidConfigError):
        broker_default_value(name, {})


def test_null_value_is_refused() -> None:
    error = rejected({"retention.ms": None})
    assert "Null value not supported for topic configs: retention.ms" in str(error)


def test_min_compaction_lag_above_max_is_refused() -> None:
    error = rejected({"min.compaction.lag.ms": "5000", "max.compaction.lag.ms": "4000"})
    assert "min.compaction.lag.ms (5000) > max.compaction.lag.ms (4000)" in str(error)
    validate_topic_overrides({"min.compaction.lag.ms": "4000", "max.compaction.lag.ms": "4000"})
    with pytest.raises(InvalidConfigError):  # the broker default of the other side counts too
        validate_topic_overrides(
            {"min.compaction.lag.ms": "5000"}, {"log.cleaner.max.compaction.lag.ms": "4000"}
        )


def test_tiered_storage_names_are_accepted_when_off() -> None:
    normalised = validate_topic_overrides(
        {
            "remote.storage.enable": "false",
            "local.retention.ms": "-2",
            "local.retention.bytes": "10",
        }
    )
    assert normalised["remote.storage.enable"] == "false"


# -- broker-level defaults --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("broker", "expected_ms"),
    [
        ({}, 168 * 3600_000),
        ({"log.retention.hours": "2"}, 2 * 3600_000),
        ({"log.retention.minutes": "3", "log.retention.hours": "2"}, 3 * 60_000),
        (
            {"log.retention.ms": "1234", "log.retention.minutes": "3", "log.retention.hours": "2"},
            1234,
        ),
        ({"log.retention.ms": "1234", "log.retention.hours": "2"}, 1234),
        ({"log.retention.hours": "-1"}, -1),  # negative broker retention means unlimited
        ({"log.retention.minutes": "-5"}, -1),
    ],
)
def test_retention_ms_precedence_ms_over_minutes_over_hours(
    broker: dict[str, str], expected_ms: int
) -> None:
    assert LogConfig.from_properties({}, broker).retention_ms == expected_ms


def test_roll_and_jitter_synonyms() -> None:
    config = LogConfig.from_properties({}, {"log.roll.hours": "1", "log.roll.jitter.hours": "2"})
    assert (config.segment_ms, config.segment_jitter_ms) == (3600_000, 7200_000)
    config = LogConfig.from_properties({}, {"log.roll.ms": "500", "log.roll.hours": "1"})
    assert config.segment_ms == 500


def test_other_broker_synonyms_feed_topic_defaults() -> None:
    broker = {
        "log.segment.bytes": "2097152",
        "message.max.bytes": "2000000",
        "log.cleanup.policy": "compact",
        "log.flush.scheduler.interval.ms": "700",
        "log.index.interval.bytes": "100",
        "log.index.size.max.bytes": "4096",
        "log.cleaner.min.cleanable.ratio": "0.1",
        "min.insync.replicas": "2",
        "unclean.leader.election.enable": "true",
        "log.message.timestamp.type": "LogAppendTime",
        "log.preallocate": "true",
        "num.partitions": "7",  # broker settings with no topic synonym are ignored
    }
    config = LogConfig.from_properties({}, broker)
    assert config.segment_bytes == 2097152
    assert config.max_message_bytes == 2000000
    assert config.cleanup_policy == frozenset({"compact"})
    assert config.flush_ms == 700  # second synonym, log.flush.interval.ms unset
    assert config.index_interval_bytes == 100
    assert config.segment_index_bytes == 4096
    assert config.min_cleanable_dirty_ratio == 0.1
    assert config.min_insync_replicas == 2
    assert config.unclean_leader_election_enable is True
    assert config.message_timestamp_type == "LogAppendTime"
    assert config.preallocate is True
    both = {"log.flush.interval.ms": "5", "log.flush.scheduler.interval.ms": "700"}
    assert LogConfig.from_properties({}, both).flush_ms == 5


def test_topic_override_beats_broker_default() -> None:
    config = LogConfig.from_properties({"retention.ms": "10"}, {"log.retention.ms": "20"})
    assert config.retention_ms == 10


def test_invalid_broker_value_names_the_broker_property() -> None:
    with pytest.raises(InvalidConfigError) as info:
        LogConfig.from_properties({}, {"log.retention.hours": "soon"})
    assert info.value.name == "log.retention.hours"
    assert "Not a number of type INT" in str(info.value)
    with pytest.raises(InvalidConfigError) as info:
        LogConfig.from_properties({}, {"log.roll.hours": "0"})
    assert str(info.value) == (
        "Invalid value 0 for configuration log.roll.hours: Value must be at least 1"
    )


def test_broker_default_value_and_source() -> None:
    assert broker_default_value("retention.ms", {}) == ("604800000", "DEFAULT_CONFIG")
    assert broker_default_value("retention.ms", {"log.retention.minutes": "1"}) == (
        "60000",
        "STATIC_BROKER_CONFIG",
    )
    assert broker_default_value("cleanup.policy", {"log.cleanup.policy": "compact, delete"}) == (
        "compact,delete",
        "STATIC_BROKER_CONFIG",
    )
    assert broker_default_value("remote.storage.enable", {}) == ("false", "DEFAULT_CONFIG")
    assert broker_default_value("message.timestamp.after.max.ms", {}) == (
        "3600000",
        "DEFAULT_CONFIG",
    )


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_segment_bytes_accepts_exactly_the_kafka_range(value: int) -> None:
    if value >= 1048576:
        assert validate_topic_overrides({"segment.bytes": str(value)}) == {
            "segment.bytes": str(value)
        }
    else:
        assert "at least 1048576" in str(rejected({"segment.bytes": str(value)}))
