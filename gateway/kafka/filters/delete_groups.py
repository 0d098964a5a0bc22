"""DeleteGroups (key 42), versions 0-2 (Pier's brokers serve 0-2): group ids are the tenant's
(RW); results stripped, any not the tenant's dropped. Kafka's ACL: DELETE on each group, else
that group's result is GROUP_AUTHORIZATION_FAILED, answered locally while the rest is forwarded
(merged in request order). A deleted group frees its place under the tenant's `tenant.max.groups`
(`coordinated_names.py`). Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.coordinated_names import NameKind
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import entity, response
from gateway.kafka.filters.groups_common import in_request_order, stripped

API_KEY = 42
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    allowed = [g for g in request.groups_names if ctx.allowed("DELETE", "GROUP", g)]
    refused = [
        entity(
            ctx, "DeletableGroupResult", group_id=g, error_code=ErrorCode.group_authorization_failed
        )
        for g in request.groups_names
        if g not in allowed
    ]
    if not allowed:
        return Reply(response(ctx, "DeleteGroupsResponse", results=tuple(refused)))
    order = list(request.groups_names)

    def on_response(answer: Any) -> Any:
        results = [r for r in stripped(ctx, answer.results, "group_id") if r.group_id in allowed]
        if ctx.names is not None:  # deleted groups free their places under the tenant's limit
            gone = [ctx.namespace.fleet(r.group_id) for r in results if r.error_code == 0]
            ctx.names.forget(NameKind.GROUP, ctx.namespace.tenant_id, gone)
        return replace(answer, results=in_request_order(results + refused, order, "group_id"))

    fleet_groups = tuple(ctx.namespace.fleet(g) for g in allowed)
    return Forward(replace(request, groups_names=fleet_groups), on_response)
