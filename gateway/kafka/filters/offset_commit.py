"""OffsetCommit (key 8), versions 2-9 (CAP 9: v10 names topics by id; Pier's brokers serve 2-9):
the group id and topic names are the tenant's (RW), topics stripped in the answer and any topic
not the tenant's dropped. Kafka's ACLs: READ on the group (else every partition gets
GROUP_AUTHORIZATION_FAILED), READ on each topic (else that topic's partitions get
TOPIC_AUTHORIZATION_FAILED locally while the rest is forwarded; answers merged in request order).
A group past the tenant's `tenant.max.groups` (`coordinated_names.py`: a commit makes a group)
is refused like one without READ. Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.coordinated_names import NameKind
from gateway.kafka.filter import FilterContext, Outcome
from gateway.kafka.filters.groups_common import commit_outcome

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 9


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    refusal = None
    if not ctx.allowed("READ", "GROUP", request.group_id):
        refusal = ErrorCode.group_authorization_failed
    else:  # a commit makes the group: too long, or one past the tenant's limit
        refusal = await ctx.name_refusal(NameKind.GROUP, request.group_id)
    group = ctx.namespace.fleet(request.group_id)
    return commit_outcome(ctx, request, "OffsetCommitResponse", refusal, group_id=group)
