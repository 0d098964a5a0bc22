"""Config resources of DescribeConfigs, AlterConfigs and IncrementalAlterConfigs: which a tenant
may name, and the refuse-locally / forward / merge flow they share.

Owns: TOPIC (2) and GROUP (32) resources are the tenant's (names RW; the ACL operation on that
resource, else TOPIC_/GROUP_AUTHORIZATION_FAILED, as Kafka's ConfigAdminManager); every other type
(BROKER, BROKER_LOGGER, CLIENT_METRICS, …) holds fleet settings and is answered here with
CLUSTER_AUTHORIZATION_FAILED, never forwarded; a default (empty-named) resource is INVALID_REQUEST.
Alters also pass the topic config allowlist (`topic_configs.refusal`), and each topic change is
paced (`gateway.quotas.tenant_pacing`, through the request's mutation budget). Results keep
request order, keyed by (type, name). Runs on the event loop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import entity, response
from gateway.kafka.filters.topic_configs import refusal
from gateway.kafka.filters.topics_common import Batch, strip

TOPIC, GROUP = 2, 32
_TENANT_RESOURCES = {
    TOPIC: ("TOPIC", ErrorCode.topic_authorization_failed),
    GROUP: ("GROUP", ErrorCode.group_authorization_failed),
}
Refused = Callable[[Any, ErrorCode, str | None], Any]
Configs = Callable[[Any], Iterable[tuple[str, str | None]]]


def _refusal(
    ctx: FilterContext, resource: Any, operation: str, configs: Configs | None
) -> tuple[ErrorCode, str | None] | None:
    kind = _TENANT_RESOURCES.get(resource.resource_type)
    if kind is None:
        return ErrorCode.cluster_authorization_failed, "Only TOPIC and GROUP resources are served."
    if not resource.resource_name:
        return ErrorCode.invalid_request, "Default resources are not allowed."
    resource_type, denied = kind
    if not ctx.allowed(operation, resource_type, resource.resource_name):
        return denied, None
    return None if configs is None else refusal(configs(resource), ctx.limits)


def split_resources(
    ctx: FilterContext,
    resources: Iterable[Any],
    operation: str,
    refused: Refused,
    configs: Configs | None = None,
    *,
    paced: bool = False,
) -> tuple[Batch, tuple[Any, ...]]:
    """The resources refused here and those forwarded; `paced`: each topic resource forwarded
    is a config change charged to the request's budget (`ctx.mutations`), refused
    THROTTLING_QUOTA_EXCEEDED when the tenant is past its pacing."""
    batch, sent = Batch(), []
    for resource in resources:
        key = (resource.resource_type, resource.resource_name)
        problem = _refusal(ctx, resource, operation, configs)
        if problem is None and paced and resource.resource_type == TOPIC:
            problem = _paced(ctx)
        if problem is not None:
            batch.refuse(key, refused(resource, *problem))
            continue
        batch.forward(key)
        fleet_name = ctx.namespace.fleet(resource.resource_name)
        sent.append(dataclasses.replace(resource, resource_name=fleet_name))
    return batch, tuple(sent)


PACED = "config changes past the tenant's tenant.config.changes.per.second: retry later"


def _paced(ctx: FilterContext) -> tuple[ErrorCode, str | None] | None:
    """A topic config change charged to the request's budget, or why it may not be made now."""
    if ctx.mutations.exceeded():
        return ErrorCode.throttling_quota_exceeded, PACED
    ctx.mutations.record(1)
    return None


def _answered(
    ctx: FilterContext, entries: Iterable[Any], shown: Callable[[Any], Any]
) -> Iterable[tuple[Hashable, Any]]:
    for entry in entries:
        local = strip(ctx, entry, "resource_name")
        if local is not None and local.resource_type in _TENANT_RESOURCES:
            yield (local.resource_type, local.resource_name), shown(local)


def config_outcome(
    ctx: FilterContext,
    request: Any,
    split: tuple[Batch, tuple[Any, ...]],
    response_name: str,
    field_name: str,
    shown: Callable[[Any], Any] = lambda entry: entry,
) -> Outcome:
    batch, sent = split
    if not batch.forwarded:
        return Reply(response(ctx, response_name, **{field_name: batch.merge(())}))

    def on_response(answer: Any) -> Any:
        merged = batch.merge(_answered(ctx, getattr(answer, field_name), shown))
        return dataclasses.replace(answer, **{field_name: merged})

    return Forward(dataclasses.replace(request, resources=sent), on_response)


def split_alters(
    ctx: FilterContext, request: Any, configs: Configs
) -> tuple[Batch, tuple[Any, ...]]:
    """`split_resources` of an AlterConfigs or IncrementalAlterConfigs: ALTER_CONFIGS, the
    allowlist, and each topic change paced unless `validate_only`."""
    return split_resources(
        ctx,
        request.resources,
        "ALTER_CONFIGS",
        alter_refusal(ctx),
        configs,
        paced=not request.validate_only,
    )


def alter_refusal(ctx: FilterContext) -> Callable[[Any, ErrorCode, str | None], Any]:
    """The per-resource refusal of AlterConfigs and IncrementalAlterConfigs (same entity)."""

    def refused(resource: Any, error: ErrorCode, message: str | None) -> Any:
        return entity(
            ctx,
            "AlterConfigsResourceResponse",
            error_code=error,
            error_message=message,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )

    return refused
