"""CreateTopics (key 19, v2–7): create topics, or with `validate_only` just check they could be.

Owns: the request-level checks Kafka's controller makes before creating (ControllerApis and
ReplicationControlManager.createTopic), in Kafka's order and with its messages: duplicate names,
topic name, existence, name collisions ('.' vs '_'), configs, then partitions / replication
factor or a manual assignment. The standalone registry places every replica on this broker, so a
manual assignment is accepted only when each partition lists exactly this broker. v5+ results
carry the partition count, replication factor and every config with its source; v7 the topic id.
The request timeout is not used: creation completes before the response. Runs on the event loop.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from brokers.common.config import BrokerConfig
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.config_entries import topic_config_entries
from brokers.handlers.errors import InvalidRequestError, error_code_for, error_message_for
from brokers.handlers.replica_assignment import manual_assignment
from brokers.handlers.services import MetadataView, TopicAdmin
from brokers.log.config import validate_topic_overrides
from brokers.log.errors import InvalidConfigError
from brokers.replication.errors import (
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    TopicExistsError,
)
from brokers.replication.metadata_cache import unified_name
from brokers.replication.topic_names import validate_topic_name
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 19
MAX_ITEMS = 10_000  # topics per request, and assignments or configs per topic


@dataclass(frozen=True, slots=True)
class _Services:
    """What this handler uses."""

    config: BrokerConfig
    metadata: MetadataView
    topics: TopicAdmin
    zookeeper_mode: bool


def route(
    config: BrokerConfig, metadata: MetadataView, topics: TopicAdmin, zookeeper_mode: bool
) -> Route:
    broker = _Services(config, metadata, topics, zookeeper_mode)

    async def handle(ctx: RequestContext, request: Any) -> Any:
        with broker.topics.batch():  # one registry write per request
            module = response_module(API_KEY, ctx.api_version)
            counts = Counter(topic.name for topic in request.topics)
            unified: dict[str, str] = {}  # this request's own creations; the cache's by index
            results: dict[str, Any] = {}
            for topic in request.topics:
                if topic.name in results:
                    continue
                if len(request.topics) > MAX_ITEMS:
                    error = InvalidRequestError(f"More than {MAX_ITEMS} topics in one request")
                    results[topic.name] = _failed(module, topic.name, error)
                elif counts[topic.name] > 1:
                    error = InvalidRequestError("Duplicate topic name.")
                    results[topic.name] = _failed(module, topic.name, error)
                else:
                    results[topic.name] = await _create(
                        module, broker, topic, request.validate_only, unified
                    )
            response = make(
                module,
                "CreateTopicsResponse",
                throttle_time=throttle(),
                topics=tuple(results.values()),
            )
        await broker.topics.flushed()  # the registry on disk before the answer
        return response

    return Route(API_KEY, 2, 7, handle, name="CreateTopics")


async def _create(
    module: ModuleType, broker: _Services, topic: Any, validate_only: bool, unified: dict[str, str]
) -> Any:
    properties = broker.config.properties
    try:
        _check_name(broker, topic.name, unified)
        overrides = _overrides(topic.configs, properties)
        manual = _manual_placement(broker, topic) if topic.assignments else None
        partitions, factor = _placement(broker, topic, manual)
        created = await broker.topics.create_topic_async(
            topic.name,
            partitions,
            factor,
            overrides,
            validate_only=validate_only,
            assignment=manual,
        )
    except Exception as exc:
        return _failed(module, topic.name, exc)
    if created is not None:
        unified[unified_name(topic.name)] = topic.name
    configs = _config_entries(module, overrides, properties)
    return make(
        module,
        "CreatableTopicResult",
        name=topic.name,
        topic_id=created.topic_id if created is not None else None,
        error_code=ErrorCode.none,
        error_message=None,
        num_partitions=partitions,
        replication_factor=factor,
        configs=configs,
    )


def _config_entries(
    module: ModuleType, overrides: Mapping[str, str], properties: Mapping[str, str]
) -> tuple[Any, ...]:
    if not hasattr(module, "CreatableTopicConfigs"):  # v5+ only
        return ()
    return tuple(
        make(
            module,
            "CreatableTopicConfigs",
            name=entry.name,
            value=entry.value,
            read_only=entry.read_only,
            config_source=entry.source,
            is_sensitive=entry.sensitive,
        )
        for entry in topic_config_entries(overrides, properties)
    )


def _check_name(broker: _Services, name: str, unified: Mapping[str, str]) -> None:
    validate_topic_name(name)
    if broker.metadata.topic(name) is not None:
        raise TopicExistsError(f"Topic '{name}' already exists.")
    existing = unified.get(unified_name(name)) or broker.metadata.topic_name_like(name)
    if existing is not None:
        raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {existing}")


def _overrides(configs: Sequence[Any], properties: Mapping[str, str]) -> dict[str, str]:
    if len(configs) > MAX_ITEMS:
        raise InvalidRequestError(f"More than {MAX_ITEMS} configs for one topic")
    nulls = [config.name for config in configs if config.value is None]
    if nulls:
        raise _null_configs(nulls)
    return validate_topic_overrides({c.name: c.value for c in configs}, properties)


def _null_configs(names: Iterable[str]) -> InvalidConfigError:
    joined = ",".join(names)
    return InvalidConfigError(joined, f"Null value not supported for topic configs: {joined}")


def _placement(
    broker: _Services, topic: Any, manual: dict[int, list[int]] | None
) -> tuple[int, int]:
    """(partitions, replication factor) with -1 resolved to the broker defaults."""
    if manual is not None:
        return len(manual), len(manual[0])
    if topic.replication_factor < -1 or topic.replication_factor == 0:
        raise InvalidReplicationFactorError(
            "Replication factor must be larger than 0, or -1 to use the default value."
        )
    if topic.num_partitions < -1 or topic.num_partitions == 0:
        raise InvalidPartitionsError(
            "Number of partitions was set to an invalid non-positive value."
        )
    properties = broker.config.properties
    partitions = topic.num_partitions
    factor = topic.replication_factor
    if partitions == -1:
        partitions = int(properties.get("num.partitions", "1"))
    if factor == -1:
        factor = int(properties.get("default.replication.factor", "1"))
    return partitions, factor


def _manual_placement(broker: _Services, topic: Any) -> dict[int, list[int]]:
    if topic.replication_factor != -1:
        raise InvalidRequestError(
            "A manual partition assignment was specified, but replication factor was not set to -1."
        )
    if topic.num_partitions != -1:
        raise InvalidRequestError(
            "A manual partition assignment was specified, but numPartitions was not set to -1."
        )
    if len(topic.assignments) > MAX_ITEMS:
        raise InvalidRequestError(f"More than {MAX_ITEMS} partition assignments for one topic")
    return manual_assignment(broker, topic.assignments)


def _failed(module: ModuleType, name: str, exc: Exception) -> Any:
    return make(
        module,
        "CreatableTopicResult",
        name=name,
        topic_id=None,
        error_code=error_code_for(exc),
        error_message=error_message_for(exc),
        num_partitions=-1,
        replication_factor=-1,
        configs=(),
    )
