"""Topic administration: create and delete topics, describe topic and broker configs.

Owns: `NewTopic`, `create_topics`, `delete_topics`, `ConfigEntry`, `describe_configs`. Create and
delete go to the controller (Kafka answers NOT_CONTROLLER elsewhere); results are per topic, and
one topic failing does not fail the others. DeleteTopics v6 names topics in `DeleteTopicState`
entries (KIP-516), earlier versions in a string array. Runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from brokers.client.cluster import Cluster
from brokers.client.errors import BrokerResponseError, ClientError, InvalidArgumentError, check
from brokers.client.messages import has_field, make, millis, request_module
from brokers.client.versions import ApiKey
from brokers.wire.errors import ErrorCode

TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4  # ConfigResource.Type
BROKER_DEFAULT = -1  # num_partitions / replication_factor: use the broker's default (KIP-464)


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int = BROKER_DEFAULT
    replication_factor: int = BROKER_DEFAULT
    configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    value: str | None
    source: int
    read_only: bool
    is_sensitive: bool


def _outcome(code: int, context: str, message: str | None) -> ClientError | None:
    if code == ErrorCode.none:
        return None
    return BrokerResponseError(ErrorCode(code), context, message)


async def create_topics(
    cluster: Cluster, topics: Sequence[NewTopic], *, timeout_s: float = 30.0
) -> dict[str, ClientError | None]:
    async def attempt() -> dict[str, ClientError | None]:
        connection = await cluster.controller()
        module = request_module(ApiKey.CREATE_TOPICS, connection.version(ApiKey.CREATE_TOPICS))
        request = make(
            module,
            "CreateTopicsRequest",
            topics=tuple(_creatable(module, t) for t in topics),
            timeout=millis(timeout_s),
            validate_only=False,
        )
        response = await connection.send(
            request, timeout_s=timeout_s + cluster.config.request_timeout_s
        )
        return {
            t.name: _outcome(t.error_code, t.name, getattr(t, "error_message", None))
            for t in response.topics
        }

    results = await cluster.call(attempt)
    await cluster.metadata(refresh=True)
    return results


def _creatable(module: Any, topic: NewTopic) -> Any:
    configs = tuple(
        make(module, "CreatableTopicConfig", name=k, value=v) for k, v in topic.configs.items()
    )
    return make(
        module,
        "CreatableTopic",
        name=topic.name,
        num_partitions=topic.num_partitions,
        replication_factor=topic.replication_factor,
        assignments=(),
        configs=configs,
    )


async def delete_topics(
    cluster: Cluster, names: Sequence[str], *, timeout_s: float = 30.0
) -> dict[str, ClientError | None]:
    async def attempt() -> dict[str, ClientError | None]:
        connection = await cluster.controller()
        module = request_module(ApiKey.DELETE_TOPICS, connection.version(ApiKey.DELETE_TOPICS))
        if has_field(module, "DeleteTopicsRequest", "topics"):
            states = tuple(make(module, "DeleteTopicState", name=n, topic_id=None) for n in names)
            request = make(module, "DeleteTopicsRequest", topics=states, timeout=millis(timeout_s))
        else:
            request = make(
                module, "DeleteTopicsRequest", topic_names=tuple(names), timeout=millis(timeout_s)
            )
        response = await connection.send(
            request, timeout_s=timeout_s + cluster.config.request_timeout_s
        )
        return {
            r.name: _outcome(r.error_code, r.name, getattr(r, "error_message", None))
            for r in response.responses
            if r.name is not None
        }

    results = await cluster.call(attempt)
    await cluster.metadata(refresh=True)
    return results


async def describe_configs(
    cluster: Cluster, resource_type: int, name: str, keys: Sequence[str] | None = None
) -> dict[str, ConfigEntry]:
    """Configs of one topic (TOPIC_RESOURCE) or broker (BROKER_RESOURCE, name = its id)."""

    async def attempt() -> dict[str, ConfigEntry]:
        if resource_type == BROKER_RESOURCE:
            if not name.isdigit():
                raise InvalidArgumentError(f"broker resource name {name!r} is not a broker id")
            connection = await cluster.node(int(name))
        else:
            connection = await cluster.any_connection()
        version = connection.version(ApiKey.DESCRIBE_CONFIGS)
        module = request_module(ApiKey.DESCRIBE_CONFIGS, version)
        resource = make(
            module,
            "DescribeConfigsResource",
            resource_type=resource_type,
            resource_name=name,
            configuration_keys=None if keys is None else tuple(keys),
        )
        response = await connection.send(
            make(module, "DescribeConfigsRequest", resources=(resource,))
        )
        (result,) = response.results
        check(result.error_code, name, result.error_message)
        return {
            c.name: ConfigEntry(
                c.value, int(getattr(c, "config_source", -1)), c.read_only, c.is_sensitive
            )
            for c in result.configs
        }

    return await cluster.call(attempt)
