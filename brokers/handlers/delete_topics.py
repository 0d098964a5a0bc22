"""DeleteTopics (key 20, v1–6): delete topics by name, or (v6, KIP-516) by topic id.

Owns: Kafka's request checks (ControllerApis.deleteTopics): a name given twice, an id given
twice, both or neither of name and id are INVALID_REQUEST; an unknown id is UNKNOWN_TOPIC_ID, an
unknown name UNKNOWN_TOPIC_OR_PARTITION; `delete.topic.enable=false` refuses every topic
(INVALID_REQUEST before v3, TOPIC_DELETION_DISABLED after).

Internal topics (`__` prefix: `__consumer_offsets`, `__transaction_state`, `__usage`): a Kafka
broker leaves them to ACLs, and only `kafka-topics.sh` refuses them client-side. Pier has no
authorizer on this path and its coordinators and billing depend on those topics, so the broker
refuses them itself with TOPIC_AUTHORIZATION_FAILED, the code an ACL denial would give.
Results come back in request order (Kafka shuffles them only to hide ACL decisions).
Runs on the event loop.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from brokers.common.config import BrokerConfig
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import (
    InvalidRequestError,
    TopicAuthorizationError,
    TopicDeletionDisabledError,
    UnknownTopicIdError,
    error_code_for,
    error_message_for,
)
from brokers.handlers.services import MetadataView, TopicAdmin
from brokers.replication.errors import UnknownTopicOrPartitionError
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 20
MAX_ITEMS = 10_000
FIRST_VERSION_WITH_DELETION_DISABLED = 3

Wanted = tuple[str | None, uuid.UUID | None]


@dataclass(frozen=True, slots=True)
class _Services:
    """What this handler uses."""

    config: BrokerConfig
    metadata: MetadataView
    topics: TopicAdmin


def route(config: BrokerConfig, metadata: MetadataView, topics: TopicAdmin) -> Route:
    broker = _Services(config, metadata, topics)

    async def handle(ctx: RequestContext, request: Any) -> Any:
        with broker.topics.batch():  # one registry write per request
            module = response_module(API_KEY, ctx.api_version)
            wanted = _wanted(request)
            names = Counter(name for name, topic_id in wanted if topic_id is None)
            ids = Counter(topic_id for name, topic_id in wanted if name is None)
            refusal = _request_refusal(broker, ctx.api_version, len(wanted))
            results = [_outcome(module, broker, item, names, ids, refusal) for item in wanted]
            response = make(
                module, "DeleteTopicsResponse", throttle_time=throttle(), responses=tuple(results)
            )
        await broker.topics.flushed()  # the registry on disk before the answer
        return response

    return Route(API_KEY, 1, 6, handle, name="DeleteTopics")


def _wanted(request: Any) -> list[Wanted]:
    """(name, id) per requested topic; v1–5 name topics only, v6 either way."""
    wanted: list[Wanted] = [(name, None) for name in getattr(request, "topic_names", ())]
    wanted += [(t.name, t.topic_id) for t in getattr(request, "topics", ())]
    return wanted


def _outcome(
    module: ModuleType,
    broker: _Services,
    item: Wanted,
    names: Counter[str | None],
    ids: Counter[uuid.UUID | None],
    refusal: Exception | None,
) -> Any:
    name, topic_id = item
    try:
        if refusal is not None:
            raise refusal
        _check(name, topic_id, names, ids)
        deleted_name, deleted_id = _delete(broker, name, topic_id)
    except Exception as exc:
        return _result(module, name, topic_id, exc)
    return _result(module, deleted_name, deleted_id, None)


def _request_refusal(broker: _Services, version: int, count: int) -> Exception | None:
    if count > MAX_ITEMS:
        return InvalidRequestError(f"More than {MAX_ITEMS} topics in one request")
    enabled = broker.config.properties.get("delete.topic.enable", "true").strip().lower()
    if enabled != "false":
        return None
    if version < FIRST_VERSION_WITH_DELETION_DISABLED:
        return InvalidRequestError("Topic deletion is disabled.")
    return TopicDeletionDisabledError("Topic deletion is disabled.")


def _check(
    name: str | None,
    topic_id: uuid.UUID | None,
    names: Counter[str | None],
    ids: Counter[uuid.UUID | None],
) -> None:
    if name is None and topic_id is None:
        raise InvalidRequestError("Neither topic name nor id were specified.")
    if name is not None and topic_id is not None:
        raise InvalidRequestError("You may not specify both topic name and topic id.")
    if topic_id is None and names[name] > 1:
        raise InvalidRequestError("Duplicate topic name.")
    if name is None and ids[topic_id] > 1:
        raise InvalidRequestError("Duplicate topic id.")


def _delete(broker: _Services, name: str | None, topic_id: uuid.UUID | None) -> Wanted:
    """Delete one topic; returns its name and id (the one not given is resolved)."""
    if topic_id is not None:
        topic = broker.metadata.topic_by_id(topic_id)
        if topic is None:
            raise UnknownTopicIdError(f"Topic id {topic_id} does not exist.")
    else:
        topic = broker.metadata.topic(name or "")
        if topic is None:
            raise UnknownTopicOrPartitionError(f"Topic '{name}' does not exist.")
    if topic.is_internal:
        raise TopicAuthorizationError(f"Topic {topic.name} is internal and cannot be deleted.")
    broker.topics.delete_topic(topic.name)
    return topic.name, topic.topic_id


def _result(
    module: ModuleType, name: str | None, topic_id: uuid.UUID | None, exc: Exception | None
) -> Any:
    code = ErrorCode.none if exc is None else error_code_for(exc)
    message = None if exc is None else error_message_for(exc)
    return make(
        module,
        "DeletableTopicResult",
        name=name,
        topic_id=topic_id,
        error_code=code,
        error_message=message,
    )
