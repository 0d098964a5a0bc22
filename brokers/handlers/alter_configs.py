"""AlterConfigs (key 33, v0–2): the legacy API that replaces a topic's overrides wholesale.

Owns: the legacy replacement semantics (names not in the request lose their override, as in
Kafka's legacyAlterConfigResource) and the checks both AlterConfigs flavours share, in Kafka's
order and words (ConfigAdminManager.preprocess): a resource named twice, a config key named twice
in one resource, null values, resource types. BROKER resources must name this broker (or be
empty) and may not change anything: Pier's broker settings are static (read from its properties
file at start-up) and it has no dynamic broker configs, so a change is INVALID_REQUEST, the code
Kafka gives for a broker setting that cannot be updated dynamically; an incremental DELETE is a
no-op and accepted (there is never a dynamic value to delete). `validate_only` checks
without applying. Runs on the event loop.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from brokers.common.config import BrokerConfig
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.config_entries import BROKER, BROKER_LOGGER, TOPIC, check_own_broker
from brokers.handlers.errors import InvalidRequestError, error_code_for, error_message_for
from brokers.handlers.services import MetadataView, TopicAdmin
from brokers.replication.errors import UnknownTopicOrPartitionError
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 33
MAX_ITEMS = 10_000  # resources per request, and configs per resource

# Applies one resource's changes; raises a domain error to refuse them.
ResourceChange = Callable[[Any, bool], None]


@dataclass(frozen=True, slots=True)
class _Services:
    """What this handler uses."""

    config: BrokerConfig
    metadata: MetadataView
    topics: TopicAdmin


class ConfigTarget(Protocol):
    """What `alter_resources` reads (shared with IncrementalAlterConfigs)."""

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def metadata(self) -> MetadataView: ...

    @property
    def topics(self) -> TopicAdmin: ...


def route(config: BrokerConfig, metadata: MetadataView, topics: TopicAdmin) -> Route:
    broker = _Services(config, metadata, topics)

    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        responses = alter_resources(module, broker, request, _replacement(broker))
        return make(module, "AlterConfigsResponse", throttle_time=throttle(), responses=responses)

    return Route(API_KEY, 0, 2, handle, name="AlterConfigs")


def alter_resources(
    module: ModuleType,
    broker: ConfigTarget,
    request: Any,
    change: ResourceChange,
    *,
    null_allowed: Callable[[Any], bool] | None = None,
) -> tuple[Any, ...]:
    """One response per resource: shared checks first, then `change(resource, validate_only)`
    for TOPIC resources; a failure of one resource never affects the others."""
    keys = Counter((r.resource_type, r.resource_name) for r in request.resources)
    responses = []
    for resource in request.resources:
        try:
            if len(request.resources) > MAX_ITEMS:
                raise InvalidRequestError(f"More than {MAX_ITEMS} resources in one request")
            if keys[(resource.resource_type, resource.resource_name)] > 1:
                raise InvalidRequestError("Each resource must appear at most once.")
            check_configs(resource.configs, null_allowed)
            _apply(broker, resource, request.validate_only, change, null_allowed)
        except Exception as exc:
            responses.append(_response(module, resource, exc))
            continue
        responses.append(_response(module, resource, None))
    return tuple(responses)


def check_configs(
    configs: Sequence[Any], null_allowed: Callable[[Any], bool] | None = None
) -> None:
    if len(configs) > MAX_ITEMS:
        raise InvalidRequestError(f"More than {MAX_ITEMS} configs for one resource")
    names = [config.name for config in configs]
    if len(set(names)) != len(names):
        raise InvalidRequestError("Error due to duplicate config keys")
    nulls = [c.name for c in configs if c.value is None and not (null_allowed and null_allowed(c))]
    if nulls:
        raise InvalidRequestError(f"Null value not supported for : {', '.join(nulls)}")


def _apply(
    broker: ConfigTarget,
    resource: Any,
    validate_only: bool,
    change: ResourceChange,
    is_delete: Callable[[Any], bool] | None,
) -> None:
    if resource.resource_type == TOPIC:
        if not resource.resource_name:
            raise InvalidRequestError("Default topic resources are not allowed.")
        if broker.metadata.topic(resource.resource_name) is None:
            raise UnknownTopicOrPartitionError(
                f"The topic '{resource.resource_name}' does not exist."
            )
        change(resource, validate_only)
    elif resource.resource_type == BROKER:
        if resource.resource_name:
            check_own_broker(resource.resource_name, broker.config.node_id)
        # Deleting a dynamic broker config is a no-op (none is ever set): kafka-reassign-partitions
        # --verify clears its throttles that way on every broker.
        changes = [c for c in resource.configs if not (is_delete and is_delete(c))]
        if changes:
            names = ", ".join(sorted(c.name for c in changes))
            raise InvalidRequestError(
                f"Cannot update these configs dynamically: {names}. Pier has no dynamic broker "
                "configs: broker settings are read from its properties file at start-up."
            )
    elif resource.resource_type == BROKER_LOGGER:
        raise InvalidRequestError("Broker log levels (BROKER_LOGGER) cannot be changed on Pier.")
    else:
        raise InvalidRequestError(f"Unknown resource type {resource.resource_type}")


def _replacement(broker: _Services) -> ResourceChange:
    def replace(resource: Any, validate_only: bool) -> None:
        configs = {config.name: config.value for config in resource.configs}
        broker.topics.set_topic_configs(
            resource.resource_name, configs, validate_only=validate_only
        )

    return replace


def _response(module: ModuleType, resource: Any, exc: Exception | None) -> Any:
    return make(
        module,
        "AlterConfigsResourceResponse",
        error_code=ErrorCode.none if exc is None else error_code_for(exc),
        error_message=None if exc is None else error_message_for(exc),
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )
