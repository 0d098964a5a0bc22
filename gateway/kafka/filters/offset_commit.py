"""OffsetCommit (key 8), versions 2-9 (CAP 9: v10 names topics by id; Pier's brokers serve 2-9):
the group id and topic names are the tenant's (RW), topics stripped in the answer and any topic
not the tenant's dropped. Kafka's ACLs: READ on the group (else every partition gets
GROUP_AUTHORIZATION_FAILED), READ on each topic (else that topic's partitions get
TOPIC_AUTHORIZATION_FAILED locally while the rest is forwarded; answers merged in request order).
A group past the tenant's `tenant.max.groups` (`coordinated_names.py`: a commit makes a group)
is refused like one without READ. A commit keeps its member alive (as it does at the coordinator)
in the tenant's member ledger (`member_ledger.py`); one of a member this gateway process did not
let through is REBALANCE_IN_PROGRESS, so the member rejoins here and is charged here, unless it is
a KIP-848 member its coordinator holds (`member_adoption.py`: then charged here as described
there). v2-4's `retention_time` (how long the group's offsets outlive it; v5 dropped it, KIP-211)
is honoured only up to `MAX_RETENTION` (7 days, Kafka's default `offsets.retention.minutes`): a
longer one is forwarded as -1, the fleet's retention, so a tenant cannot keep offsets on the
coordinators for months (one past about 2^56 ms does not decode and is refused as malformed).
Runs on the event loop.
"""

from __future__ import annotations

import datetime
from dataclasses import replace
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.coordinated_names import NameKind
from gateway.kafka.filter import FilterContext, Outcome
from gateway.kafka.filters.groups_common import commit_outcome
from gateway.kafka.filters.member_adoption import adopted

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 9
# Kafka's default `offsets.retention.minutes`: the longest a tenant may ask its offsets be kept
MAX_RETENTION = datetime.timedelta(days=7)
FLEET_RETENTION = datetime.timedelta(milliseconds=-1)  # "the broker's offsets.retention.minutes"


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    refusal = None
    if not ctx.allowed("READ", "GROUP", request.group_id):
        refusal = ErrorCode.group_authorization_failed
    else:  # a commit makes the group: too long, or one past the tenant's limit
        refusal = await ctx.name_refusal(NameKind.GROUP, request.group_id)
    if refusal is None and not await _alive(ctx, request):
        refusal = ErrorCode.rebalance_in_progress
    group = ctx.namespace.fleet(request.group_id)
    return commit_outcome(ctx, bounded(request), "OffsetCommitResponse", refusal, group_id=group)


def bounded(request: Any) -> Any:
    """`request` with a v2-4 `retention_time` past MAX_RETENTION, or negative but not -1 (the
    only negative Kafka documents), replaced by -1, the fleet's retention."""
    retention = getattr(request, "retention_time", None)
    if retention is None or retention == FLEET_RETENTION:
        return request
    if datetime.timedelta(0) <= retention <= MAX_RETENTION:
        return request
    return replace(request, retention_time=FLEET_RETENTION)


async def _alive(ctx: FilterContext, request: Any) -> bool:
    """Whether the committing member (if any) is one this gateway let through, or a KIP-848
    member its coordinator holds and this gateway now charges; refreshed."""
    members, member_id = ctx.members, request.member_id
    if members is None or not member_id or request.generation_id_or_member_epoch < 0:
        return True  # a commit of no member (a simple consumer, an admin tool)
    tenant, group = ctx.namespace.tenant_id, request.group_id
    if not members.knows(tenant, group, member_id) and not await adopted(ctx, group, member_id):
        return False
    members.seen(tenant, group, member_id)
    return True
