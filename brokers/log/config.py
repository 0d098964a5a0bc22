"""Topic configuration: Kafka's topic config names, defaults, validation and broker-level synonyms.

Owns: the table of every Kafka 4.0 topic config (`TOPIC_CONFIGS`), the immutable `LogConfig` a
partition log runs with, validation of topic overrides (CreateTopics, AlterConfigs) and the
mapping from broker properties (`log.retention.hours`, ...) to topic defaults (Kafka's
`ServerTopicConfigSynonyms`, first synonym set wins). Values parse like Kafka's `ConfigDef`
(trimmed strings, Java-style integers, comma lists) and fail with Kafka's messages ("Invalid value
x for configuration segment.bytes: Not a number of type INT").

Kafka 4.0 choices mirrored (KIP-1030, KIP-724): `segment.bytes` >= 1 MiB,
`message.timestamp.after.max.ms` defaults to one hour, `message.format.version` and
`message.timestamp.difference.max.ms` are gone (unknown names). `message.downconversion.enable`
is accepted as the no-op Kafka 4.0 keeps. Tiered storage settings are validated as
Kafka's (see below).

Two broker-only Pier settings ride along in `LogConfig` (not topic configs: Kafka has no such
limits, so they are not in `TOPIC_CONFIGS` and tenants cannot alter them), caps on the work one
produced batch may cost the broker (see brokers/records/validate.py):
`pier.batch.max.decompressed.bytes` (default 64 MiB) and `pier.batch.max.records` (default
1048576); a batch past either is refused MESSAGE_TOO_LARGE.

Tiered storage (KIP-405, docs/design.md "Tiered storage"): `remote.storage.enable=true` is accepted
only when the broker sets `remote.log.storage.system.enable=true` (else refused with Kafka's
message), never with `cleanup.policy` compact, and `local.retention.ms` / `local.retention.bytes`
(-2: retention.ms / retention.bytes) must not exceed retention.ms / retention.bytes unless those
are -1, as Kafka's LogConfig.validateRemoteStorageRetention checks; turning it off again needs
`remote.log.delete.on.disable=true` (`validate_remote_storage_change`, KIP-950), which deletes the
remote data. `LogConfig.local_retention_*` give the effective local limits.

`LogConfig(...)` built directly is not validated (tests use tiny segments); `from_properties` is
the validating entry point. It hands out one shared instance per distinct configuration (interned,
at most `SHARED_CONFIGS_MAX` kept): the 10,000 logs of a topic hold one `LogConfig`, not 10,000
(~0.9 KiB each; docs/benchmarks.md, "Memory"). Immutable, so an alter builds a new one (copy on
alter) and sharing is safe. Pure apart from that cache; thread-safe (single dict operations).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from brokers.log.errors import InvalidConfigError
from brokers.records.validate import MAX_BATCH_DECOMPRESSED_BYTES, MAX_BATCH_RECORDS

_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1
_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
_COMMA_WITH_WHITESPACE = re.compile(r"\s*,\s*")
_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")
_HOUR_MS, _MINUTE_MS = 3_600_000, 60_000
DEFAULT_CONFIG = "DEFAULT_CONFIG"
STATIC_BROKER_CONFIG = "STATIC_BROKER_CONFIG"

SHARED_CONFIGS_MAX = 4096  # distinct LogConfigs interned by from_properties; more are not shared
Validator = Callable[[Any], None]  # raises RejectedValue for a parsed value that breaks a rule


class RejectedValue(ValueError):
    """Raised by validators; `value` is the offending item when it is not the whole value."""

    def __init__(self, reason: str, value: object = None) -> None:
        super().__init__(reason)
        self.value = value


@dataclass(frozen=True, slots=True)
class ConfigDef:
    """One topic config as Kafka's ConfigDef defines it; `default` is its string form."""

    name: str
    type: str  # "boolean" | "string" | "int" | "long" | "double" | "list" | "class" | "password"
    default: str | None
    validator: Validator | None
    doc: str
    broker_default_name: str | None


@dataclass(frozen=True, slots=True)
class _Synonym:
    """A broker property feeding a topic default; `scale` converts hours/minutes to ms."""

    name: str
    scale: int = 1


def at_least(low: float) -> Validator:
    def check(value: Any) -> None:
        if value < low:
            raise RejectedValue(f"Value must be at least {low}")

    return check


def between(low: float, high: float) -> Validator:
    def check(value: Any) -> None:
        if value < low:
            raise RejectedValue(f"Value must be at least {low}")
        if value > high:
            raise RejectedValue(f"Value must be no more than {high}")

    return check


def one_of(*allowed: str) -> Validator:
    def check(value: Any) -> None:
        items = value if isinstance(value, list) else [value]
        for item in items:
            if item not in allowed:
                raise RejectedValue(f"String must be one of: {', '.join(allowed)}", item)

    return check


def _gzip_level(value: Any) -> None:
    # Kafka accepts zlib's 1..9 or -1 (Deflater.DEFAULT_COMPRESSION), KIP-390.
    if value > 9 or (value < 1 and value != -1):
        raise RejectedValue("Value must be between 1 and 9 or equal to -1")


def _throttled_replicas(value: Any) -> None:
    # '*' or "partition:broker" pairs, as Kafka's ThrottledReplicaListValidator.
    if not (all(_REPLICA.fullmatch(s) for s in value) or "".join(value) == "*"):
        raise RejectedValue(
            "must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
        )


def _d(
    name: str, type_: str, default: str, validator: Validator | None, doc: str, *synonyms: _Synonym
) -> tuple[str, ConfigDef, tuple[_Synonym, ...]]:
    broker_name = synonyms[0].name if synonyms else None
    return name, ConfigDef(name, type_, default, validator, doc, broker_name), synonyms


def _log(suffix: str, scale: int = 1) -> _Synonym:
    return _Synonym("log." + suffix, scale)


_LONG_MAX_S = str(_LONG_MAX)
_COMPRESSION = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_DEFINITIONS = (
    _d("cleanup.policy", "list", "delete", one_of("compact", "delete"),
       "Retention policy for old segments: delete, compact, or both.", _log("cleanup.policy")),
    _d("compression.type", "string", "producer", one_of(*_COMPRESSION),
       "Codec the broker stores batches with; 'producer' keeps the producer's codec.",
       _Synonym("compression.type")),
    _d("compression.gzip.level", "int", "-1", _gzip_level,
       "gzip level used when compression.type is gzip.", _Synonym("compression.gzip.level")),
    _d("compression.lz4.level", "int", "9", between(1, 17),
       "lz4 level used when compression.type is lz4.", _Synonym("compression.lz4.level")),
    _d("compression.zstd.level", "int", "3", between(-131072, 22),
       "zstd level used when compression.type is zstd.", _Synonym("compression.zstd.level")),
    _d("delete.retention.ms", "long", "86400000", at_least(0),
       "How long tombstones stay readable in a compacted topic.",
       _log("cleaner.delete.retention.ms")),
    _d("file.delete.delay.ms", "long", "60000", at_least(0),
       "Delay before a deleted segment's files are removed from disk.",
       _log("segment.delete.delay.ms")),
    _d("flush.messages", "long", _LONG_MAX_S, at_least(1),
       "Force an fsync after this many messages.", _log("flush.interval.messages")),
    _d("flush.ms", "long", _LONG_MAX_S, at_least(0),
       "Force an fsync when data is older than this.",
       _log("flush.interval.ms"), _log("flush.scheduler.interval.ms")),
    _d("follower.replication.throttled.replicas", "list", "", _throttled_replicas,
       "Replicas throttled on the follower side ('*' for all)."),
    _d("index.interval.bytes", "int", "4096", at_least(0),
       "Bytes of log between two offset index entries.", _log("index.interval.bytes")),
    _d("leader.replication.throttled.replicas", "list", "", _throttled_replicas,
       "Replicas throttled on the leader side ('*' for all)."),
    _d("local.retention.bytes", "long", "-2", at_least(-2),
       "Bytes kept on broker disk when remote.storage.enable; -2 means retention.bytes.",
       _log("local.retention.bytes")),
    _d("local.retention.ms", "long", "-2", at_least(-2),
       "Age kept on broker disk when remote.storage.enable; -2 means retention.ms.",
       _log("local.retention.ms")),
    _d("max.compaction.lag.ms", "long", _LONG_MAX_S, at_least(1),
       "Longest a record may stay uncompacted.", _log("cleaner.max.compaction.lag.ms")),
    _d("max.message.bytes", "int", "1048588", at_least(0),
       "Largest record batch the topic accepts.", _Synonym("message.max.bytes")),
    _d("message.downconversion.enable", "boolean", "true", None,
       "No-op since Kafka 4.0 (no down-conversion); accepted for compatibility.",
       _log("message.downconversion.enable")),
    _d("message.timestamp.after.max.ms", "long", "3600000", at_least(0),
       "How far in the future a CreateTime timestamp may be.",
       _log("message.timestamp.after.max.ms")),
    _d("message.timestamp.before.max.ms", "long", _LONG_MAX_S, at_least(0),
       "How far in the past a CreateTime timestamp may be.",
       _log("message.timestamp.before.max.ms")),
    _d("message.timestamp.type", "string", "CreateTime", one_of("CreateTime", "LogAppendTime"),
       "Whether stored timestamps are the producer's or the broker's.",
       _log("message.timestamp.type")),
    _d("min.cleanable.dirty.ratio", "double", "0.5", between(0, 1),
       "Dirty fraction of the log that makes it eligible for compaction.",
       _log("cleaner.min.cleanable.ratio")),
    _d("min.compaction.lag.ms", "long", "0", at_least(0),
       "Shortest time a record stays uncompacted.", _log("cleaner.min.compaction.lag.ms")),
    _d("min.insync.replicas", "int", "1", at_least(1),
       "In-sync replicas an acks=all write needs.", _Synonym("min.insync.replicas")),
    _d("preallocate", "boolean", "false", None,
       "Preallocate segment files on creation.", _log("preallocate")),
    _d("remote.log.copy.disable", "boolean", "false", None,
       "Stop copying segments to the remote tier (reads and remote retention go on)."),
    _d("remote.log.delete.on.disable", "boolean", "false", None,
       "Turning remote.storage.enable off deletes the remote data (else it is refused)."),
    _d("remote.storage.enable", "boolean", "false", None,
       "Copy closed segments to the remote tier (needs remote.log.storage.system.enable)."),
    _d("retention.bytes", "long", "-1", None,
       "Size a partition may grow to before old segments go; -1 for no limit.",
       _log("retention.bytes")),
    _d("retention.ms", "long", "604800000", at_least(-1),
       "Age after which old segments go; -1 for no limit.",
       _log("retention.ms"), _log("retention.minutes", _MINUTE_MS),
       _log("retention.hours", _HOUR_MS)),
    _d("segment.bytes", "int", "1073741824", at_least(1048576),
       "Segment file size that forces a roll.", _log("segment.bytes")),
    _d("segment.index.bytes", "int", "10485760", at_least(4),
       "Size of the offset and time index files of a segment.",
       _log("index.size.max.bytes")),
    _d("segment.jitter.ms", "long", "0", at_least(0),
       "Random jitter subtracted from segment.ms.",
       _log("roll.jitter.ms"), _log("roll.jitter.hours", _HOUR_MS)),
    _d("segment.ms", "long", "604800000", at_least(1),
       "Age of a segment that forces a roll.",
       _log("roll.ms"), _log("roll.hours", _HOUR_MS)),
    _d("unclean.leader.election.enable", "boolean", "false", None,
       "Allow an out-of-sync replica to become leader.",
       _Synonym("unclean.leader.election.enable")),
)  # fmt: skip

TOPIC_CONFIGS: Mapping[str, ConfigDef] = MappingProxyType({n: d for n, d, _ in _DEFINITIONS})
# Broker properties with no topic config: name -> (LogConfig field, default). INT, at least 1.
PIER_BATCH_LIMITS: Mapping[str, tuple[str, int]] = MappingProxyType(
    {
        "pier.batch.max.decompressed.bytes": (
            "batch_max_decompressed_bytes",
            MAX_BATCH_DECOMPRESSED_BYTES,
        ),
        "pier.batch.max.records": ("batch_max_records", MAX_BATCH_RECORDS),
    }
)
BROKER_SYNONYMS: Mapping[str, tuple[_Synonym, ...]] = MappingProxyType(
    {n: s for n, _, s in _DEFINITIONS if s}
)


def parse_value(definition: ConfigDef, raw: str) -> Any:
    """Parse and validate `raw` like Kafka's ConfigDef; raises InvalidConfigError."""
    value = _parse_type(definition.name, raw, definition.type)
    _validate(definition, raw, value)
    return value


def render_value(definition: ConfigDef, value: Any) -> str:
    """The canonical string form of a parsed value (what DescribeConfigs shows)."""
    if definition.type == "boolean":
        return "true" if value else "false"
    if definition.type == "list":
        return ",".join(value)
    return str(value)


def _invalid(name: str, raw: object, reason: str) -> InvalidConfigError:
    return InvalidConfigError(name, f"Invalid value {raw} for configuration {name}: {reason}")


def _validate(definition: ConfigDef, raw: object, value: Any) -> None:
    if definition.validator is None:
        return
    try:
        definition.validator(value)
    except RejectedValue as exc:
        reason = str(exc)
        if definition.validator is _throttled_replicas:
            reason = f"{definition.name} {reason}"
        shown = raw if exc.value is None else exc.value
        raise _invalid(definition.name, shown, reason) from None


def _parse_type(name: str, raw: str, type_: str) -> Any:
    trimmed = raw.strip()
    if type_ == "boolean":
        if trimmed.lower() in ("true", "false"):
            return trimmed.lower() == "true"
        raise _invalid(name, raw, "Expected value to be either true or false")
    if type_ in ("int", "long"):
        low, high = (_INT_MIN, _INT_MAX) if type_ == "int" else (_LONG_MIN, _LONG_MAX)
        if _JAVA_INTEGER.fullmatch(trimmed) and low <= int(trimmed) <= high:
            return int(trimmed)
        raise _invalid(name, raw, f"Not a number of type {type_.upper()}")
    if type_ == "double":
        return _parse_double(name, raw, trimmed)
    if type_ == "list":
        return _COMMA_WITH_WHITESPACE.split(trimmed) if trimmed else []
    return trimmed


def _parse_double(name: str, raw: str, trimmed: str) -> float:
    try:
        value = float(trimmed)
    except ValueError:
        value = math.nan
    # Python's float() also takes "nan"/"inf"; a ratio must be a finite number.
    if not math.isfinite(value) or "_" in trimmed:
        raise _invalid(name, raw, "Not a number of type DOUBLE")
    return value


@dataclass(frozen=True, slots=True)
class LogConfig:
    """A partition log's effective configuration; field = topic config name with dots -> '_'."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_bytes: int = -1
    retention_ms: int = 604800000
    cleanup_policy: frozenset[str] = frozenset({"delete"})
    flush_messages: int = _LONG_MAX
    flush_ms: int = _LONG_MAX
    max_message_bytes: int = 1048588
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = _LONG_MAX
    message_timestamp_after_max_ms: int = 3600000
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    compression_type: str = "producer"
    delete_retention_ms: int = 86400000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = _LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    file_delete_delay_ms: int = 60000
    preallocate: bool = False
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    leader_replication_throttled_replicas: tuple[str, ...] = ()
    follower_replication_throttled_replicas: tuple[str, ...] = ()
    batch_max_decompressed_bytes: int = MAX_BATCH_DECOMPRESSED_BYTES  # pier.batch.max.*: broker
    batch_max_records: int = MAX_BATCH_RECORDS
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def local_retention_ms_effective(self) -> int:
        """How long segments stay on broker disk: local.retention.ms, -2 meaning retention.ms."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def local_retention_bytes_effective(self) -> int:
        """local.retention.bytes, -2 meaning retention.bytes."""
        if self.local_retention_bytes == -2:
            return self.retention_bytes
        return self.local_retention_bytes

    @property
    def max_segment_ms(self) -> int:
        """Roll interval; compacted topics also roll by max.compaction.lag.ms (Kafka's maxSegmentMs)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms

    @classmethod
    def from_properties(
        cls, overrides: Mapping[str, str], broker_defaults: Mapping[str, str] = MappingProxyType({})
    ) -> LogConfig:
        """Topic overrides over broker-level synonyms over Kafka defaults; raises InvalidConfigError."""
        values = _effective_values(overrides, broker_defaults)
        fields = {f.name for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {}
        for name, value in values.items():
            field = name.replace(".", "_")
            if field == "cleanup_policy":
                kwargs[field] = frozenset(value)
            elif field in fields:
                kwargs[field] = tuple(value) if isinstance(value, list) else value
        kwargs.update(_batch_limits(broker_defaults))
        return _shared(cls(**kwargs))


_SHARED: dict[LogConfig, LogConfig] = {}


def _shared(config: LogConfig) -> LogConfig:
    """The interned instance equal to `config` (itself when new, or when the cache is full)."""
    found = _SHARED.get(config)
    if found is not None:
        return found
    if len(_SHARED) < SHARED_CONFIGS_MAX:
        return _SHARED.setdefault(config, config)
    return config


def _batch_limits(broker_config: Mapping[str, str]) -> dict[str, int]:
    limits: dict[str, int] = {}
    for name, (field, default) in PIER_BATCH_LIMITS.items():
        raw = broker_config.get(name)
        value = default if raw is None else _parse_type(name, raw, "int")
        if value < 1:
            raise _invalid(name, raw, "Value must be at least 1")
        limits[field] = value
    return limits


def validate_topic_overrides(
    overrides: Mapping[str, str | None], broker_defaults: Mapping[str, str] = MappingProxyType({})
) -> dict[str, str]:
    """Check topic overrides like Kafka's controller does; return them normalised.

    Null values are refused like Kafka's CreateTopics ("Null value not supported for topic
    configs"); an AlterConfigs DELETE should drop the name before calling this. Cross-field rules
    (min.compaction.lag.ms <= max.compaction.lag.ms) see the broker defaults too.
    """
    normalised: dict[str, str] = {}
    for name, raw in overrides.items():
        definition = _definition(name)
        if raw is None:
            raise InvalidConfigError(name, f"Null value not supported for topic configs: {name}")
        normalised[name] = render_value(definition, parse_value(definition, raw))
    _effective_values(normalised, broker_defaults)
    return normalised


DISABLE_WITHOUT_DELETE = (
    "It is invalid to disable remote storage without deleting remote data. If you want to keep "
    "the remote data and turn to read only, please set "
    "`remote.storage.enable=true,remote.log.copy.disable=true`. If you want to disable remote "
    "storage and delete all remote data, please set "
    "`remote.storage.enable=false,remote.log.delete.on.disable=true`."
)


def validate_remote_storage_change(
    previous: Mapping[str, str], overrides: Mapping[str, str],
    broker_defaults: Mapping[str, str] = MappingProxyType({}),
) -> None:  # fmt: skip
    """AlterConfigs of a topic: turning remote storage off needs remote.log.delete.on.disable
    (Kafka's LogConfig.validateTurningOffRemoteStorageWithDelete, KIP-950)."""
    try:
        was = _effective_values(previous, broker_defaults)["remote.storage.enable"]
    except InvalidConfigError:
        return  # the old settings no longer parse: nothing to compare with
    now = _effective_values(overrides, broker_defaults)
    if was and not now["remote.storage.enable"] and not now["remote.log.delete.on.disable"]:
        raise InvalidConfigError("remote.storage.enable", DISABLE_WITHOUT_DELETE)


REMOTE_LOG_STORAGE_SYSTEM_ENABLE = "remote.log.storage.system.enable"


def remote_storage_system_enabled(broker_config: Mapping[str, str]) -> bool:
    """The broker's `remote.log.storage.system.enable` (default false, as Kafka)."""
    return broker_config.get(REMOTE_LOG_STORAGE_SYSTEM_ENABLE, "false").strip().lower() == "true"


def _check_remote_storage(values: Mapping[str, Any], broker_config: Mapping[str, str]) -> None:
    """Kafka's LogConfig checks for a topic with remote.storage.enable=true."""
    if not remote_storage_system_enabled(broker_config):
        raise InvalidConfigError(
            "remote.storage.enable",
            "Tiered Storage functionality is disabled in the broker. "
            "Topic cannot be configured with remote log storage.",
        )
    if "compact" in values["cleanup.policy"]:
        raise InvalidConfigError(
            "cleanup.policy",
            "Remote log storage only supports topics with cleanup.policy=delete",
        )
    if values["remote.log.copy.disable"]:
        for unit in ("bytes", "ms"):  # nothing more is copied: local retention is the total
            local_value = values[f"local.retention.{unit}"]
            if local_value not in (-2, values[f"retention.{unit}"]):
                raise InvalidConfigError(
                    f"local.retention.{unit}",
                    f"When `remote.log.copy.disable` is set to true, the `local.retention.{unit}` "
                    f"and `retention.{unit}` must be set to the identical value because there "
                    "will be no more logs copied to the remote storage.",
                )
    for local, total in (
        ("local.retention.ms", "retention.ms"),
        ("local.retention.bytes", "retention.bytes"),
    ):
        local_value, total_value = values[local], values[total]
        if total_value == -1 or local_value == -2:
            continue
        if local_value == -1:
            reason = f"Value must not be -1 as {total} value is set as {total_value}."
        elif local_value > total_value:
            reason = f"Value must not be more than {total} property value: {total_value}"
        else:
            continue
        raise InvalidConfigError(
            local, f"Invalid value {local_value} for configuration {local}: {reason}"
        )


def broker_default_value(name: str, broker_config: Mapping[str, str]) -> tuple[str | None, str]:
    """The value a topic without an override gets, and its DescribeConfigs source."""
    definition = _definition(name)
    from_broker = _broker_value(definition, broker_config)
    if from_broker is not None:
        return render_value(definition, from_broker), STATIC_BROKER_CONFIG
    return definition.default, DEFAULT_CONFIG


def _definition(name: str) -> ConfigDef:
    definition = TOPIC_CONFIGS.get(name)
    if definition is None:
        raise InvalidConfigError(name, f"Unknown topic config name: {name}")
    return definition


def _effective_values(
    overrides: Mapping[str, str | None], broker_defaults: Mapping[str, str]
) -> dict[str, Any]:
    for name in overrides:
        _definition(name)
    values: dict[str, Any] = {}
    for name, definition in TOPIC_CONFIGS.items():
        raw = overrides.get(name)
        if raw is not None:
            values[name] = parse_value(definition, raw)
            continue
        from_broker = _broker_value(definition, broker_defaults)
        if from_broker is None:
            from_broker = parse_value(definition, definition.default or "")
        values[name] = from_broker
    _check_cross_field(values)
    if values["remote.storage.enable"]:
        _check_remote_storage(values, broker_defaults)
    return values


def _broker_value(definition: ConfigDef, broker_config: Mapping[str, str]) -> Any | None:
    """The first broker synonym that is set, converted to the topic's unit (Kafka's precedence)."""
    for synonym in BROKER_SYNONYMS.get(definition.name, ()):
        raw = broker_config.get(synonym.name)
        if raw is None:
            continue
        # log.*.hours / log.*.minutes are INT broker properties scaled to ms
        value = _parse_type(synonym.name, raw, "int" if synonym.scale > 1 else definition.type)
        if synonym.scale > 1:
            value *= synonym.scale
        if definition.name == "retention.ms" and value < 0:
            value = -1  # Kafka's logRetentionTimeMillis: any negative broker value means forever
        _validate(_renamed(definition, synonym.name), raw, value)
        return value
    return None


def _renamed(definition: ConfigDef, name: str) -> ConfigDef:
    """The definition under its broker name, so errors name the property the operator set."""
    return dataclasses.replace(definition, name=name)


def _check_cross_field(values: Mapping[str, Any]) -> None:
    min_lag, max_lag = values["min.compaction.lag.ms"], values["max.compaction.lag.ms"]
    if min_lag > max_lag:
        raise InvalidConfigError(
            "min.compaction.lag.ms",
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
            f"max.compaction.lag.ms ({max_lag})",
        )
