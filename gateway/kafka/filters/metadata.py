"""Metadata (key 3, v0–13): topic names RW, every answer filtered to the tenant's topics (internal
topics never shown), brokers and cluster id rewritten (EP), auto-creation within the tenant's
ACLs and partition limit.

ACL (Kafka's KafkaApis.handleTopicMetadataRequest): DESCRIBE on each topic; a topic named in the
request without it is TOPIC_AUTHORIZATION_FAILED, one from an all-topics answer is left out.
Auto-creation is forwarded only when the caller may CREATE (on the cluster, or on every topic
named) and the partitions of the named topics the fleet does not have (`default_partitions`
each; at most `MAX_AUTO_CREATE` names are looked up, a longer request creates nothing) are
RESERVED in the tenant store first (`partition_limit`, as CreateTopics), settled with the topics
the answer shows when it comes (or, when it never comes, with those the fleet shows a few seconds
later: `partition_limit.settle_on_failure`). v0–3 cannot turn
auto-creation off, so there the gateway asks for all topics instead and answers missing ones
with UNKNOWN_TOPIC_OR_PARTITION. Topic ids (v10+, KIP-516): Pier's brokers assign real ids and a
tenant's own topics show theirs; a v12 look-up by id is resolved to the fleet topic with that id
and forwarded by name only when that topic is in the tenant's namespace (then DESCRIBE applies:
TOPIC_AUTHORIZATION_FAILED without the name), else UNKNOWN_TOPIC_ID, as for an id nobody has
(`topics_common.tenant_topics_by_id`). Each id an answer shows is handed to the fleet view
(`remember_topic_id`), so a Produce v13 or Fetch v13+ naming it right after is resolved on the
hot path without a refresh. v13 adds only a top-level error code, passed on. A named topic
containing `*` is INVALID_TOPIC_EXCEPTION here: the brokers read `<prefix>*` as a prefix look-up,
which only the gateway's own all-topics request may ask for.
Runs on the event loop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable
from typing import Any

from brokers.wire.entities import make, request_module
from brokers.wire.errors import ErrorCode
from brokers.wire.metadata_response import PREFIX_WILDCARD
from gateway.kafka.filter import FilterContext, Forward, Outcome
from gateway.kafka.filters.cluster_view import (
    CLUSTER_NAME,
    OPERATIONS_OMITTED,
    TOPIC_OPERATIONS,
    authorized_operations,
    brokers,
    cluster_operations,
)
from gateway.kafka.filters.common import entity
from gateway.kafka.filters.partition_limit import grace_s, reserve, settle, settle_on_failure
from gateway.kafka.filters.topics_common import (
    Batch,
    stripped,
    tenant_topics_by_id,
    topic_partition_counts,
)
from tenancy.reservations import PartitionGrant

API_KEY = 3
MIN_VERSION = 0
MAX_VERSION = 13
FIRST_WITH_AUTO_CREATE_FLAG = 4
FIRST_NULLABLE_NAME_VERSION = 12
MAX_AUTO_CREATE = 16  # topics one Metadata request may auto-create (each is looked up first)


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    explicit = request.topics is not None and (ctx.api_version > 0 or bool(request.topics))
    if not explicit:
        upstream = dataclasses.replace(request, topics=_all_of_tenant(ctx))
        return Forward(upstream, lambda answer: _answer(ctx, request, answer, None))
    batch, names = Batch(), []
    by_id = [t.topic_id for t in request.topics if _names_by_id(t)]
    resolved = await tenant_topics_by_id(ctx, by_id) if by_id else {}
    for topic in request.topics:
        name = topic.name
        if _names_by_id(topic):
            name = resolved.get(topic.topic_id)
            if name is None:
                refused = _topic(ctx, None, ErrorCode.unknown_topic_id, topic)
                batch.refuse(("id", topic.topic_id), refused)
                continue
            if not ctx.allowed("DESCRIBE", "TOPIC", name):  # the name is not shown
                refused = _topic(ctx, None, ErrorCode.topic_authorization_failed, topic)
                batch.refuse(("id", topic.topic_id), refused)
                continue
        if PREFIX_WILDCARD in name:  # never a topic; forwarded, it would be a broker-side scan
            batch.refuse(name, _topic(ctx, name, ErrorCode.invalid_topic_exception))
        elif not ctx.allowed("DESCRIBE", "TOPIC", name):
            batch.refuse(name, _topic(ctx, name, ErrorCode.topic_authorization_failed))
        else:
            batch.forward(name)
            names.append(name)
    grant, missing = await _may_create(ctx, request, names)
    create = grant is not None
    sent = tuple(_by_name(request.topics[0], ctx.namespace.fleet(n)) for n in dict.fromkeys(names))
    if ctx.api_version < FIRST_WITH_AUTO_CREATE_FLAG and not create:
        # All the tenant's topics: a name pattern creates nothing.
        upstream = dataclasses.replace(request, topics=_all_of_tenant(ctx))
    else:
        upstream = dataclasses.replace(request, topics=sent)
        if ctx.api_version >= FIRST_WITH_AUTO_CREATE_FLAG:
            upstream = dataclasses.replace(upstream, allow_auto_topic_creation=create)
    if grant is None:
        return Forward(upstream, lambda answer: _answer(ctx, request, answer, batch))

    def created(answer: Any) -> Any:
        made = {t.name for t in answer.topics if t.error_code == ErrorCode.none and t.partitions}
        count = sum(ctx.fleet.default_partitions for n in missing if ctx.namespace.fleet(n) in made)
        settle(ctx, grant, count)
        return _answer(ctx, request, answer, batch)

    async def made_now() -> int:  # the answer never came: the topics the fleet shows
        counts = await topic_partition_counts(ctx, [ctx.namespace.fleet(n) for n in missing])
        return sum(ctx.fleet.default_partitions for count in counts.values() if count is not None)

    return Forward(upstream, created, settle_on_failure(ctx, grant, made_now, grace_s(None)))


def _all_of_tenant(ctx: FilterContext) -> tuple[Any, ...]:
    """The request's topics for "every topic of the tenant": its prefix and the brokers' wildcard
    (`brokers/handlers/metadata.py`), so neither a broker nor this gateway reads the fleet's."""
    module = request_module(API_KEY, ctx.api_version)
    pattern = ctx.namespace.fleet(PREFIX_WILDCARD)
    return (make(module, "MetadataRequestTopic", name=pattern, topic_id=None),)


def _names_by_id(topic: Any) -> bool:
    """v12: a topic named by its id (a null name; Java leaves the name "")."""
    by_id = getattr(topic, "topic_id", None) is not None and topic.topic_id.int != 0
    return topic.name is None or (not topic.name and by_id)


def _by_name(template: Any, fleet_name: str) -> Any:
    """A request topic naming `fleet_name` (v10+: with no id, so the broker looks up the name)."""
    if any(f.name == "topic_id" for f in dataclasses.fields(template)):
        return dataclasses.replace(template, name=fleet_name, topic_id=None)
    return dataclasses.replace(template, name=fleet_name)


async def _may_create(
    ctx: FilterContext, request: Any, names: list[str]
) -> tuple[PartitionGrant | None, list[str]]:
    """A grant for the partitions of the named topics the fleet lacks, and their names; (None,
    []) when nothing may (or need) be created."""
    if not names or not getattr(request, "allow_auto_topic_creation", True):
        return None, []
    if not ctx.allowed("CREATE", "CLUSTER", CLUSTER_NAME) and not all(
        ctx.allowed("CREATE", "TOPIC", name) for name in names
    ):
        return None, []
    if len(names) > MAX_AUTO_CREATE:
        return None, []
    counts = await topic_partition_counts(ctx, [ctx.namespace.fleet(n) for n in names])
    missing = [n for n in names if counts[ctx.namespace.fleet(n)] is None]
    if not missing:
        return None, []
    grant = await reserve(ctx, [len(missing) * ctx.fleet.default_partitions])
    if grant is None or not all(grant.granted):
        return None, []
    return grant, missing


def _answer(ctx: FilterContext, request: Any, answer: Any, batch: Batch | None) -> Any:
    wants_ops = bool(getattr(request, "include_topic_authorized_operations", False))
    shown = [
        (name, _shown(ctx, topic, wants_ops))
        for name, topic in stripped(ctx, answer.topics)
        if ctx.allowed("DESCRIBE", "TOPIC", str(name)) and not str(name).endswith(PREFIX_WILDCARD)
    ]
    for name, topic in shown:
        if getattr(topic, "topic_id", None) is not None:
            ctx.fleet.remember_topic_id(ctx.namespace.fleet(str(name)), topic.topic_id)
    if batch is None:
        topics = tuple(topic for _, topic in shown)
    else:
        topics = batch.merge(shown, lambda key: _missing(ctx, key))
    changes: dict[str, Any] = {"topics": topics, "brokers": brokers(ctx, answer.brokers)}
    names = {f.name for f in dataclasses.fields(answer)}
    if "cluster_id" in names:
        changes["cluster_id"] = ctx.fleet.cluster_id(ctx.namespace.tenant_id)
    if "cluster_authorized_operations" in names:
        wanted = bool(getattr(request, "include_cluster_authorized_operations", False))
        changes["cluster_authorized_operations"] = cluster_operations(ctx, wanted)
    return dataclasses.replace(answer, **changes)


def _shown(ctx: FilterContext, topic: Any, wants_ops: bool) -> Any:
    changes: dict[str, Any] = {}
    names = {f.name for f in dataclasses.fields(topic)}
    if "is_internal" in names:
        changes["is_internal"] = False
    if "topic_authorized_operations" in names:
        changes["topic_authorized_operations"] = (
            authorized_operations(ctx, "TOPIC", topic.name, TOPIC_OPERATIONS)
            if wants_ops
            else OPERATIONS_OMITTED
        )
    return dataclasses.replace(topic, **changes)


def _missing(ctx: FilterContext, key: Hashable) -> Any:
    # Only the v0–3 all-topics substitute leaves a requested name unanswered: it does not exist.
    return _topic(ctx, key, ErrorCode.unknown_topic_or_partition) if isinstance(key, str) else None


def _topic(ctx: FilterContext, name: str | None, error: ErrorCode, wanted: Any = None) -> Any:
    if name is None and ctx.api_version < FIRST_NULLABLE_NAME_VERSION:
        name = ""  # v10-11 look up by id but cannot answer a null name
    return entity(
        ctx,
        "MetadataResponseTopic",
        error_code=error,
        name=name,
        topic_id=getattr(wanted, "topic_id", None),
        is_internal=False,
        partitions=(),
        topic_authorized_operations=OPERATIONS_OMITTED,
    )
