"""DescribeConfigs (key 32, v1–4): the effective configs of topics and of this broker.

Owns: answering DescribeConfigs and the config entries CreateTopics v5+ also returns
(`topic_config_entries`). Resource types are Kafka's ConfigResource.Type ids: TOPIC 2, BROKER 4,
BROKER_LOGGER 8. A topic entry's synonyms follow Kafka's ConfigHelper order: the topic override,
then every broker property feeding it that is set (STATIC_BROKER_CONFIG), then the default.
Kafka names that default after the broker property holding it (`log.retention.hours=168`); we
name it after the first broker synonym with the topic's default value (`log.retention.ms=
604800000`), the same setting in one unit. Pier has no dynamic broker configs, so broker entries
are read-only and the cluster-default resource (empty name) is empty. BROKER_LOGGER resources are
checked like Kafka's and answered with no loggers: Python logging levels are not adjustable here.
In ZooKeeper mode a topic's overrides are read from `/config/topics/<t>` on each request (Kafka's
ZkConfigRepository), so every broker answers the same: each topic named once, the reads awaited
`READS_IN_FLIGHT` at a time (they were blocking reads on the loop, one per resource: a request
of 10,000 resources held the broker for seconds). Runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from brokers.common.config import BrokerConfig
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.config_entries import (
    BROKER,
    BROKER_LOGGER,
    TOPIC,
    ConfigEntry,
    broker_config_entries,
    check_own_broker,
    topic_config_entries,
)
from brokers.handlers.errors import InvalidRequestError, error_code_for, error_message_for
from brokers.handlers.services import MetadataView, TopicAdmin
from brokers.replication.errors import UnknownTopicOrPartitionError
from brokers.replication.metadata_cache import TopicMetadata
from brokers.replication.topic_names import validate_topic_name
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode
from brokers.zk.topics import ZkTopicAdmin

API_KEY = 32
MAX_RESOURCES = 10_000
READS_IN_FLIGHT = 256  # ZooKeeper reads of one request awaited at once
Overrides = Mapping[str, dict[str, str] | Exception]  # ZooKeeper's, by topic


@dataclass(frozen=True, slots=True)
class _Services:
    """What this handler uses."""

    config: BrokerConfig
    metadata: MetadataView
    topics: TopicAdmin


def route(config: BrokerConfig, metadata: MetadataView, topics: TopicAdmin) -> Route:
    broker = _Services(config, metadata, topics)

    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        too_many = len(request.resources) > MAX_RESOURCES
        read = {} if too_many else await _zookeeper_overrides(broker, request.resources)
        results = tuple(
            _result(module, broker, request, resource, too_many, read)
            for resource in request.resources
        )
        return make(module, "DescribeConfigsResponse", throttle_time=throttle(), results=results)

    return Route(API_KEY, 1, 4, handle, name="DescribeConfigs")


async def _zookeeper_overrides(broker: _Services, resources: Iterable[Any]) -> Overrides:
    """In ZooKeeper mode, the overrides of every known topic the request names (once each)."""
    topics = broker.topics
    if not isinstance(topics, ZkTopicAdmin):
        return {}
    names = {
        r.resource_name
        for r in resources
        if r.resource_type == TOPIC and broker.metadata.topic(r.resource_name) is not None
    }
    return await topics.read_overrides(sorted(names), READS_IN_FLIGHT)


def _result(
    module: ModuleType,
    broker: _Services,
    request: Any,
    resource: Any,
    too_many: bool,
    read: Overrides,
) -> Any:
    try:
        if too_many:
            raise InvalidRequestError(f"More than {MAX_RESOURCES} resources in one request")
        entries = _entries(broker, resource.resource_type, resource.resource_name, read)
    except Exception as exc:
        return _described(module, resource, error_code_for(exc), error_message_for(exc), ())
    wanted = set(resource.configuration_keys or ())  # null or empty: every config
    configs = tuple(
        _config(module, entry, request) for entry in entries if not wanted or entry.name in wanted
    )
    return _described(module, resource, ErrorCode.none, None, configs)


def _entries(
    broker: _Services, resource_type: int, name: str, read: Overrides
) -> list[ConfigEntry]:
    if resource_type == TOPIC:
        validate_topic_name(name)
        topic = broker.metadata.topic(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
        overrides = read.get(name)
        if isinstance(overrides, Exception):
            raise overrides
        if overrides is None:  # standalone, or a topic that came after the reads
            overrides = current_overrides(broker.topics, topic)
        return topic_config_entries(overrides, broker.config.properties)
    if resource_type == BROKER:
        if not name:  # cluster-wide dynamic defaults: Pier has none
            return []
        check_own_broker(name, broker.config.node_id)
        return broker_config_entries(broker.config)
    if resource_type == BROKER_LOGGER:
        if not name:
            raise InvalidRequestError("Broker id must not be empty")
        check_own_broker(name, broker.config.node_id)
        return []
    raise InvalidRequestError(f"Unsupported resource type: {resource_type}")


def current_overrides(topics: TopicAdmin, topic: TopicMetadata) -> dict[str, str]:
    """The topic's overrides: ZooKeeper's in cluster mode, else the standalone registry's."""
    if isinstance(topics, ZkTopicAdmin):
        return topics.topic_overrides(topic.name)
    return dict(topic.configs)


def _config(module: ModuleType, entry: ConfigEntry, request: Any) -> Any:
    synonyms = ()
    if getattr(request, "include_synonyms", False):
        synonyms = tuple(
            make(module, "DescribeConfigsSynonym", name=name, value=value, source=source)
            for name, value, source in entry.synonyms
        )
    documented = getattr(request, "include_documentation", False)
    return make(
        module,
        "DescribeConfigsResourceResult",
        name=entry.name,
        value=entry.value,
        read_only=entry.read_only,
        config_source=entry.source,
        is_sensitive=entry.sensitive,
        synonyms=synonyms,
        config_type=entry.type_id,
        documentation=entry.doc if documented else None,
    )


def _described(
    module: ModuleType,
    resource: Any,
    code: ErrorCode,
    message: str | None,
    configs: tuple[Any, ...],
) -> Any:
    return make(
        module,
        "DescribeConfigsResult",
        error_code=code,
        error_message=message,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
        configs=configs,
    )
