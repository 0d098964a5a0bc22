"""IncrementalAlterConfigs (key 44, v0–1, KIP-339): change some of a topic's overrides.

Owns: applying the operations to a topic's current overrides and handing the merged set to the
registry (`set_topic_configs`), which validates it as a whole. Operations are Kafka's
AlterConfigOp.OpType ids: SET 0, DELETE 1, APPEND 2, SUBTRACT 3. APPEND/SUBTRACT work on
list-typed configs only (e.g. cleanup.policy); an unset config starts from its Kafka default, as
in Kafka's ConfigurationControlManager; APPEND skips items already present. Resource checks
(duplicates, null values — allowed for DELETE only —, BROKER resources) are shared with
AlterConfigs. The current overrides are ZooKeeper's in cluster mode (`current_overrides`), so a
broker that did not create the topic merges with what is really set. Runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from brokers.common.config import BrokerConfig
from brokers.handlers.alter_configs import ResourceChange, alter_resources
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.describe_configs import current_overrides
from brokers.handlers.errors import InvalidRequestError
from brokers.handlers.services import MetadataView, TopicAdmin
from brokers.log.config import TOPIC_CONFIGS
from brokers.log.errors import InvalidConfigError
from brokers.server.context import RequestContext
from brokers.server.routes import Route

API_KEY = 44
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


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
        responses = alter_resources(
            module, broker, request, _incremental(broker), null_allowed=_is_delete
        )
        return make(
            module,
            "IncrementalAlterConfigsResponse",
            throttle_time=throttle(),
            responses=responses,
        )

    return Route(API_KEY, 0, 1, handle, name="IncrementalAlterConfigs")


def _is_delete(operation: Any) -> bool:
    return bool(operation.config_operation == DELETE)


def _incremental(broker: _Services) -> ResourceChange:
    def change(resource: Any, validate_only: bool) -> None:
        topic = broker.metadata.topic(resource.resource_name)
        current = current_overrides(broker.topics, topic) if topic is not None else {}
        merged = apply_operations(current, resource.configs)
        broker.topics.set_topic_configs(resource.resource_name, merged, validate_only=validate_only)

    return change


def apply_operations(current: dict[str, str], operations: Sequence[Any]) -> dict[str, str]:
    """The overrides after `operations`; raises InvalidRequestError / InvalidConfigError."""
    merged = dict(current)
    for operation in operations:
        name, op, value = operation.name, operation.config_operation, operation.value
        if op == SET:
            merged[name] = value
        elif op == DELETE:
            merged.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            merged[name] = _list_operation(name, op, merged.get(name), value)
        else:
            raise InvalidRequestError(f"Unknown operations type {op}")
    return merged


def _list_operation(name: str, op: int, current: str | None, value: str) -> str:
    definition = TOPIC_CONFIGS.get(name)
    if definition is None or definition.type != "list":
        raise InvalidConfigError(
            name, f"Can't {_OP_NAMES[op]} to key {name} because its type is not LIST."
        )
    base = current if current is not None else definition.default or ""
    items = [item for item in base.split(",") if item]
    if op == APPEND:
        items += [item for item in dict.fromkeys(value.split(",")) if item and item not in items]
    else:
        removed = set(value.split(","))
        items = [item for item in items if item not in removed]
    return ",".join(items)
