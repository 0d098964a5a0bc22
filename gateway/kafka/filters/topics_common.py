"""Per-entry refusals and merges shared by the gateway's multi-entry filters (topics, coordinator
keys, config resources), and the name rewrites every one of them does.

Owns: `Batch` (which request entries were refused locally, with their results, and the request
order, so `merge` puts the local results back among the brokers' answers), `strip` (a response
entry with the tenant's prefix removed, or None when it is not the tenant's: fail closed) and
`safe_message` (an error message that names nothing outside the tenant's namespace),
`MUTATIONS_EXCEEDED` (the message of a topic the mutation budget refused); `split_topics`
and `outcome` for the common shape "refuse the topics the caller may not touch, forward the rest";
`tenant_topics_by_id` (KIP-516 topic ids: a tenant sees the brokers' ids of its own topics; an id
resolves to the tenant's name only when the fleet topic with that id is in the tenant's
namespace, so another tenant's id is as unknown as one nobody has: fail closed).
Pure; runs on the event loop.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import response

# A topic refused THROTTLING_QUOTA_EXCEEDED by the request's mutation budget (KIP-599's quota and
# the tenant's partition pacing), whichever it was.
MUTATIONS_EXCEEDED = (
    "The controller mutation quota or the tenant's partition pacing is exceeded: retry after "
    "the throttle time."
)


def safe_message(ctx: FilterContext, message: str | None, generic: str | None = None) -> str | None:
    """`message` with the tenant's prefix removed; `generic` when it names an internal topic or
    anything that looks like another tenant's resource (`<id>_<name>`)."""
    if message is None:
        return None
    scrubbed = ctx.namespace.scrub(message)
    return generic if scrubbed is None else scrubbed


def strip(ctx: FilterContext, entry: Any, name_field: str = "name") -> Any | None:
    """`entry` with its fleet name replaced by the tenant's and its error message made safe;
    None when the name is not the tenant's (another tenant's, internal, unprefixed or null)."""
    fleet_name = getattr(entry, name_field)
    local = None if fleet_name is None else ctx.namespace.local(fleet_name)
    if local is None:
        return None
    changes: dict[str, Any] = {name_field: local}
    if any(f.name == "error_message" for f in dataclasses.fields(entry)):
        changes["error_message"] = safe_message(ctx, entry.error_message)
    return dataclasses.replace(entry, **changes)


@dataclass
class Batch:
    """The entries of one multi-entry request, by key (usually the tenant's name), in request
    order: each is either refused here (its result built locally) or forwarded."""

    order: list[Hashable] = field(default_factory=list)
    refused: dict[Hashable, Any] = field(default_factory=dict)
    forwarded: int = 0

    def refuse(self, key: Hashable, result: Any) -> None:
        self._note(key)
        self.refused.setdefault(key, result)

    def forward(self, key: Hashable) -> None:
        self._note(key)
        self.forwarded += 1

    def _note(self, key: Hashable) -> None:
        if key not in self.order:
            self.order.append(key)

    def merge(
        self,
        answered: Iterable[tuple[Hashable, Any]],
        missing: Callable[[Hashable], Any] | None = None,
    ) -> tuple[Any, ...]:
        """Results in request order: local refusals, then the brokers' (already stripped)
        answers by key. A key nobody answered gets `missing(key)` or is left out; answers for
        keys the request did not hold are dropped."""
        by_key: dict[Hashable, Any] = {}
        for key, entry in answered:
            by_key.setdefault(key, entry)
        results = []
        for key in self.order:
            result = self.refused.get(key, by_key.get(key))
            if result is None and missing is not None:
                result = missing(key)
            if result is not None:
                results.append(result)
        return tuple(results)


def stripped(
    ctx: FilterContext, entries: Iterable[Any], name_field: str = "name"
) -> Iterable[tuple[Hashable, Any]]:
    """(tenant name, stripped entry) for each of the tenant's entries; others are dropped."""
    for entry in entries:
        local = strip(ctx, entry, name_field)
        if local is not None:
            yield getattr(local, name_field), local


def split_topics(
    ctx: FilterContext,
    topics: Iterable[Any],
    operation: str,
    refused: Callable[[Any, ErrorCode], Any],
    name_field: str = "name",
) -> tuple[Batch, tuple[Any, ...]]:
    """Topics the caller may not do `operation` on get `refused(topic, TOPIC_AUTHORIZATION_FAILED)`;
    the rest are returned prefixed, to forward."""
    batch, sent = Batch(), []
    for topic in topics:
        name = getattr(topic, name_field)
        if ctx.allowed(operation, "TOPIC", name):
            batch.forward(name)
            fleet_name = ctx.namespace.fleet(name)
            sent.append(dataclasses.replace(topic, **{name_field: fleet_name}))
        else:
            batch.refuse(name, refused(topic, ErrorCode.topic_authorization_failed))
    return batch, tuple(sent)


def outcome(
    ctx: FilterContext,
    request: Any,
    batch: Batch,
    sent: tuple[Any, ...],
    response_name: str,
    field_name: str,
    name_field: str = "name",
) -> Outcome:
    """Forward `sent` as the request's `field_name` and merge the answer's `field_name` with the
    local refusals; when nothing is left to forward, answer with the refusals alone."""
    if not batch.forwarded:
        return Reply(response(ctx, response_name, **{field_name: batch.merge(())}))

    def on_response(answer: Any) -> Any:
        answered = stripped(ctx, getattr(answer, field_name), name_field)
        return dataclasses.replace(answer, **{field_name: batch.merge(answered)})

    return Forward(dataclasses.replace(request, **{field_name: sent}), on_response)


async def tenant_topics_by_id(
    ctx: FilterContext, topic_ids: Iterable[uuid.UUID | None]
) -> dict[uuid.UUID, str | None]:
    """The tenant's name of the topic with each id, or None (no such topic, or not the tenant's:
    the caller answers UNKNOWN_TOPIC_ID either way, telling nothing of other tenants); one
    look-up of the fleet for every id of a request."""
    wanted = [topic_id for topic_id in topic_ids if topic_id is not None]
    names = await ctx.fleet.topic_names(wanted) if wanted else {}
    return {
        topic_id: None if fleet_name is None else ctx.namespace.local(fleet_name)
        for topic_id, fleet_name in names.items()
    }


async def topic_partition_counts(
    ctx: FilterContext, fleet_topics: Iterable[str]
) -> dict[str, int | None]:
    """Each fleet topic's partition count, None when unknown (callers then assume the worst:
    fail closed); one look-up of the fleet for every topic of a request."""
    return await ctx.fleet.partition_counts(fleet_topics)


def over_limit(ctx: FilterContext, in_use: int, requested: int) -> str | None:
    """The POLICY_VIOLATION message when `requested` more partitions exceed the tenant's limit."""
    limit = ctx.limits.max_partitions
    if in_use + requested <= limit:
        return None
    return f"tenant partition limit {limit} reached: {in_use} in use, {requested} requested"
