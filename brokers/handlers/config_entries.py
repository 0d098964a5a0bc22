"""Config entries as DescribeConfigs and CreateTopics (v5+) report them: value, source, synonyms.

Owns: the ids Kafka puts on the wire for config resources (ConfigResource.Type), config sources
(DescribeConfigsResponse.ConfigSource) and config types (ConfigType), and building the entries of
a topic (`topic_config_entries`) and of this broker (`broker_config_entries`). Synonyms follow
Kafka's ConfigHelper: most specific first (topic override, then broker settings, then defaults).
Sensitive settings (password type, or a name containing "password"/"secret") never show a value.
Pure; thread-safe.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from brokers.common.config import BrokerConfig
from brokers.handlers.errors import InvalidRequestError
from brokers.log.config import BROKER_SYNONYMS, TOPIC_CONFIGS, broker_default_value

# ConfigResource.Type ids
TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
# DescribeConfigsResponse.ConfigSource ids
TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 1, 2, 3
STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 4, 5
_SOURCE_IDS = {"STATIC_BROKER_CONFIG": STATIC_BROKER_CONFIG, "DEFAULT_CONFIG": DEFAULT_CONFIG}
# DescribeConfigsResponse.ConfigType ids (0 = UNKNOWN)
CONFIG_TYPE_IDS = {
    "boolean": 1,
    "string": 2,
    "int": 3,
    "short": 4,
    "long": 5,
    "double": 6,
    "list": 7,
    "class": 8,
    "password": 9,
}
# Broker settings BrokerConfig interprets itself: name -> (attribute, Kafka type).
_BROKER_SETTINGS = {
    "socket.request.max.bytes": ("socket_request_max_bytes", "int"),
    "connections.max.idle.ms": ("connections_max_idle_ms", "long"),
    "queued.max.request.bytes": ("queued_max_request_bytes", "long"),
    "max.connections": ("max_connections", "int"),
    "max.connections.per.ip": ("max_connections_per_ip", "int"),
    "log.retention.check.interval.ms": ("retention_check_interval_ms", "long"),
    "log.flush.scheduler.interval.ms": ("flush_scheduler_interval_ms", "long"),
    "log.flush.offset.checkpoint.interval.ms": ("checkpoint_interval_ms", "int"),
    "auto.create.topics.enable": ("auto_create_topics", "boolean"),
    "fetch.max.bytes": ("fetch_max_bytes", "int"),
}
_PLACEMENT_DEFAULTS = {"num.partitions": "1", "default.replication.factor": "1"}

Synonym = tuple[str, str | None, int]


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    source: int
    sensitive: bool
    read_only: bool
    type_id: int
    doc: str | None
    synonyms: tuple[Synonym, ...]


def is_sensitive(name: str, type_: str | None) -> bool:
    lowered = name.lower()
    return type_ == "password" or "password" in lowered or "secret" in lowered


def check_own_broker(name: str, node_id: int) -> None:
    """A BROKER/BROKER_LOGGER resource must name this broker (Kafka's messages)."""
    try:
        requested = int(name)
    except ValueError:
        raise InvalidRequestError(f"Broker id must be an integer, but it is: {name}") from None
    if requested != node_id:
        raise InvalidRequestError(
            f"Unexpected broker id, expected {node_id} or empty string, but received {name}"
        )


def topic_config_entries(
    overrides: Mapping[str, str], broker_properties: Mapping[str, str]
) -> list[ConfigEntry]:
    """Every topic config with its effective value, sorted by name (as Kafka's controller does)."""
    return [_topic_entry(name, overrides, broker_properties) for name in sorted(TOPIC_CONFIGS)]


# Broker properties whose Kafka default is null (the topic default comes from a coarser unit, e.g.
# log.retention.hours): Kafka lists no DEFAULT_CONFIG synonym for them in a topic's entry.
_NULL_IN_KAFKA = frozenset(
    {"log.retention.ms", "log.roll.ms", "log.roll.jitter.ms", "log.flush.interval.ms"}
)


def _topic_entry(
    name: str, overrides: Mapping[str, str], broker_properties: Mapping[str, str]
) -> ConfigEntry:
    definition = TOPIC_CONFIGS[name]
    synonyms: list[Synonym] = [
        (s.name, broker_properties[s.name], STATIC_BROKER_CONFIG)
        for s in BROKER_SYNONYMS.get(name, ())
        if s.name in broker_properties
    ]
    default_name = definition.broker_default_name
    if default_name is not None and default_name not in _NULL_IN_KAFKA:
        synonyms.append((default_name, definition.default, DEFAULT_CONFIG))
    if name in overrides:
        value: str | None = overrides[name]
        source = TOPIC_CONFIG
        synonyms.insert(0, (name, value, TOPIC_CONFIG))
    else:
        value, source_name = broker_default_value(name, broker_properties)
        source = _SOURCE_IDS[source_name]
    return _entry(name, value, source, definition.type, definition.doc, synonyms, read_only=False)


def broker_config_entries(config: BrokerConfig) -> list[ConfigEntry]:
    """This broker's settings: those set in its properties plus the defaults Pier knows."""
    types, docs, defaults = _known_broker_settings(config)
    static = {"node.id": str(config.node_id), "broker.id": str(config.node_id)}
    static["log.dirs"] = str(config.data_dir)
    if config.rack is not None:
        static["broker.rack"] = config.rack
    static.update(config.properties)
    entries = []
    for name in sorted(static.keys() | defaults.keys()):
        synonyms: list[Synonym] = []
        if name in static:
            synonyms.append((name, static[name], STATIC_BROKER_CONFIG))
        if name in defaults:
            synonyms.append((name, defaults[name], DEFAULT_CONFIG))
        value, source = synonyms[0][1], synonyms[0][2]
        entry = _entry(name, value, source, types.get(name), docs.get(name), synonyms, True)
        entries.append(entry)
    return entries


def _known_broker_settings(
    config: BrokerConfig,
) -> tuple[dict[str, str], dict[str, str], dict[str, str | None]]:
    """(type, documentation, default) of the broker settings Pier knows about."""
    types = {"node.id": "int", "broker.id": "int", "log.dirs": "string", "broker.rack": "string"}
    docs: dict[str, str] = {}
    defaults: dict[str, str | None] = dict(_PLACEMENT_DEFAULTS)
    types.update(dict.fromkeys(_PLACEMENT_DEFAULTS, "int"))
    for name, definition in TOPIC_CONFIGS.items():
        for synonym in BROKER_SYNONYMS.get(name, ()):
            types[synonym.name] = "int" if synonym.scale > 1 else definition.type
            docs[synonym.name] = definition.doc
        if definition.broker_default_name is not None:
            defaults[definition.broker_default_name] = definition.default
    unset = dataclasses.replace(config, properties={})  # BrokerConfig's own defaults
    for name, (attribute, type_) in _BROKER_SETTINGS.items():
        value = getattr(unset, attribute)
        defaults[name] = str(value).lower() if isinstance(value, bool) else str(value)
        types[name] = type_
    return types, docs, defaults


def _entry(
    name: str,
    value: str | None,
    source: int,
    type_: str | None,
    doc: str | None,
    synonyms: list[Synonym],
    read_only: bool,
) -> ConfigEntry:
    sensitive = is_sensitive(name, type_)
    if sensitive:
        value = None
        synonyms = [(n, None, s) for n, _, s in synonyms]
        type_ = "password"
    return ConfigEntry(
        name=name,
        value=value,
        source=source,
        sensitive=sensitive,
        read_only=read_only,
        type_id=CONFIG_TYPE_IDS.get(type_ or "", 0),
        doc=doc,
        synonyms=tuple(synonyms),
    )
