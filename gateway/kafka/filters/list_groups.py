"""ListGroups (key 16), versions 0-5 (Pier's brokers serve 0-5): the state and type filters carry
no names and pass as they are; the answer keeps only the tenant's groups, stripped, and of those
only the groups the caller may DESCRIBE (Kafka's ACL: without DESCRIBE on the cluster, groups are
filtered by DESCRIBE on each; the tenant has no cluster-wide view). Flexible versions (v3+) go
upstream with the tenant's prefix as the header's name scope (`brokers.wire.headers`), so a
broker builds the tenant's groups only, not every tenant's (10,000 groups on a broker: 53.6 ms of
its CPU per listing whole, 1.2 ms scoped; `infra/bench/fleet_listings.py`); v0-2 headers carry no
tags, so those listings are whole and only filtered here. Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gateway.kafka.filter import FilterContext, Forward, Outcome
from gateway.kafka.filters.groups_common import stripped

API_KEY = 16
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    def on_response(answer: Any) -> Any:
        groups = tuple(
            g
            for g in stripped(ctx, answer.groups, "group_id")
            if ctx.allowed("DESCRIBE", "GROUP", g.group_id)
        )
        return replace(answer, groups=groups)

    return Forward(request, on_response, name_scope=ctx.namespace.prefix)
