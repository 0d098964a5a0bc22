"""DescribeTopicPartitions (key 75, v0, KIP-966): topics' partitions, paged by a cursor.

Owns: answering as Kafka 4.1's DescribeTopicPartitionsRequestHandler and its metadata cache's
`describeTopicResponse` do. The topics are those named (or, when none is named, every topic),
from the cursor's topic on, in name order; at most `response_partition_limit` partitions (capped
by `max.request.partition.size.limit`, default 2000, and at least 1) are described, and
`next_cursor` names the topic and partition the next page starts at. A named topic that does not
exist is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION when its name is illegal); in the
all-topics form missing topics are simply absent. A cursor whose topic is not among the named
ones, or whose partition is negative, makes the whole request INVALID_REQUEST (each named topic
answered with it), as Kafka's `getErrorResponse` does. Pier keeps no eligible leader replicas,
so every partition shows empty ELR and last-known-ELR lists, as Kafka does with ELR off. With no
authorizer, each topic's authorized operations are every operation Kafka defines for topics.
The all-topics form bisects the metadata cache's ordered names to the cursor and, given a request
header's name scope (`brokers.wire.headers.NAME_SCOPE_TAG`, the gateway's tenant prefix), stops
at the last name under it. Runs on the event loop.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from brokers.common.config import BrokerConfig, BrokerConfigError, int_setting
from brokers.common.internal_topics import is_internal
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.errors import error_code_for
from brokers.handlers.metadata import ALL_TOPIC_OPERATIONS, partition_state
from brokers.handlers.services import MetadataView
from brokers.replication.metadata_cache import TopicMetadata
from brokers.replication.topic_names import validate_topic_name
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode

API_KEY = 75
PARTITION_LIMIT_KEY = "max.request.partition.size.limit"
DEFAULT_PARTITION_LIMIT = 2000


class _InvalidRequest(Exception):
    """The request as a whole is refused (Kafka's InvalidRequestException)."""


@dataclass(frozen=True, slots=True)
class Page:
    """One page: per topic (name, its metadata or None, the partitions described, its error),
    and where the next page starts (topic, partition), or None."""

    topics: list[tuple[str, TopicMetadata | None, list[int], ErrorCode]]
    next_cursor: tuple[str, int] | None


def route(config: BrokerConfig, metadata: MetadataView) -> Route:
    cap = int_setting(
        config.properties, PARTITION_LIMIT_KEY, DEFAULT_PARTITION_LIMIT, 1, BrokerConfigError
    )

    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        try:
            page = describe(metadata, request, cap, ctx.header.name_scope or "")
        except _InvalidRequest:
            return _refused(module, request)
        cursor = None
        if page.next_cursor is not None:
            topic, partition = page.next_cursor
            cursor = make(module, "Cursor", topic_name=topic, partition_index=partition)
        return make(
            module,
            "DescribeTopicPartitionsResponse",
            throttle_time=throttle(),
            topics=tuple(_topic(module, metadata, *entry) for entry in page.topics),
            next_cursor=cursor,
        )

    return Route(API_KEY, 0, 0, handle, name="DescribeTopicPartitions")


def describe(metadata: MetadataView, request: Any, cap: int, scope: str = "") -> Page:
    """The page `request` asks for (raises _InvalidRequest for a cursor Kafka refuses); the
    all-topics form walks the cache's ordered names from the cursor on, and only those starting
    with `scope` (the header's name scope), never every topic of the fleet."""
    cursor = request.cursor
    start_topic = cursor.topic_name if cursor is not None else ""
    fetch_all = not request.topics
    names: Iterable[str]
    if fetch_all:
        names = _ordered_from(metadata.sorted_topic_names(), max(start_topic, scope), scope)
    else:
        names = named = sorted({t.name for t in request.topics if t.name >= start_topic})
        if cursor is not None and cursor.topic_name not in named:
            raise _InvalidRequest("the topic list must contain the cursor's topic")
    if cursor is not None and cursor.partition_index < 0:
        raise _InvalidRequest("the cursor's partition must not be negative")
    remaining = max(min(cap, int(request.response_partition_limit)), 1)
    topics: list[tuple[str, TopicMetadata | None, list[int], ErrorCode]] = []
    for name in names:
        if remaining == 0:
            # The previous topics filled the page: the next one starts at its first partition.
            return Page(topics, (name, 0))
        meta = metadata.topic(name)
        if meta is None:
            if not fetch_all:
                topics.append((name, None, [], _missing_error(name)))
            continue
        start = cursor.partition_index if cursor is not None and name == start_topic else 0
        upper = min(len(meta.partitions), start + remaining)
        shown = [index for index in range(start, upper) if index in meta.partitions]
        topics.append((name, meta, shown, ErrorCode.none))
        if upper < len(meta.partitions):
            return Page(topics, (name, upper))
        remaining -= len(shown)
    return Page(topics, None)


def _ordered_from(ordered: Sequence[str], first: str, scope: str) -> Iterator[str]:
    """The names of `ordered` from `first` on, while they start with `scope`."""
    at = bisect.bisect_left(ordered, first)
    while at < len(ordered) and ordered[at].startswith(scope):
        yield ordered[at]
        at += 1


def _missing_error(name: str) -> ErrorCode:
    try:
        validate_topic_name(name)
    except Exception as exc:
        return error_code_for(exc)
    return ErrorCode.unknown_topic_or_partition


def _topic(
    module: ModuleType,
    metadata: MetadataView,
    name: str,
    meta: TopicMetadata | None,
    shown: list[int],
    error: ErrorCode,
) -> Any:
    partitions = ()
    if meta is not None:
        live = metadata.brokers
        partitions = tuple(
            make(
                module,
                "DescribeTopicPartitionsResponsePartition",
                **partition_state(p, live),  # as Metadata answers it
                eligible_leader_replicas=(),  # no ELR in Pier: empty, as Kafka with ELR off
                last_known_elr=(),
            )
            for p in (meta.partitions[index] for index in shown)
        )
    return make(
        module,
        "DescribeTopicPartitionsResponseTopic",
        error_code=error,
        name=name,
        topic_id=meta.topic_id if meta else None,
        is_internal=is_internal(name),
        partitions=partitions,
        topic_authorized_operations=ALL_TOPIC_OPERATIONS,
    )


def _refused(module: ModuleType, request: Any) -> Any:
    """Kafka's error response: every named topic INVALID_REQUEST, no partitions, zero id."""
    topics = tuple(
        make(
            module,
            "DescribeTopicPartitionsResponseTopic",
            error_code=ErrorCode.invalid_request,
            name=topic.name,
            topic_id=None,
            is_internal=False,
            partitions=(),
        )
        for topic in request.topics
    )
    return make(module, "DescribeTopicPartitionsResponse", throttle_time=throttle(), topics=topics)
