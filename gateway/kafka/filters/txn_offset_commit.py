"""TxnOffsetCommit (key 28), versions 0-5 (all kio 0.6.5 has; advertised within the brokers'
range, v0-4 today): the transactional id, group id and topic names are the
tenant's (RW); topics stripped in the answer, any not the tenant's dropped. Kafka's ACLs, in
Kafka's order: WRITE on the transactional id (else every partition gets
TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (GROUP_AUTHORIZATION_FAILED), READ on
each topic (TOPIC_AUTHORIZATION_FAILED for that topic's partitions, the rest forwarded). A group
past the tenant's `tenant.max.groups` (`coordinated_names.py`) is refused like one without READ.
Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.coordinated_names import NameKind
from gateway.kafka.filter import FilterContext, Outcome
from gateway.kafka.filters.groups_common import commit_outcome

API_KEY = 28
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    refusal = None
    if not ctx.allowed("WRITE", "TRANSACTIONAL_ID", request.transactional_id):
        refusal = ErrorCode.transactional_id_authorization_failed
    elif not ctx.allowed("READ", "GROUP", request.group_id):
        refusal = ErrorCode.group_authorization_failed
    else:  # a commit makes the group: too long, or one past the tenant's limit
        refusal = await ctx.name_refusal(NameKind.GROUP, request.group_id)
    return commit_outcome(
        ctx,
        request,
        "TxnOffsetCommitResponse",
        refusal,
        transactional_id=ctx.namespace.fleet(request.transactional_id),
        group_id=ctx.namespace.fleet(request.group_id),
    )
