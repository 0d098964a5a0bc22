"""OffsetDelete (key 47), version 0 (all there is; Pier's brokers serve 0): the group id and
topic names are the tenant's (RW); topics stripped in the answer, any not the tenant's dropped.
Kafka's ACLs: DELETE on the group (else a top-level GROUP_AUTHORIZATION_FAILED), READ on each
topic (else TOPIC_AUTHORIZATION_FAILED for its partitions, the rest forwarded and merged back in
request order). An empty group id is INVALID_GROUP_ID, as Kafka's coordinator answers.
Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Outcome, Reply
from gateway.kafka.filters.common import response
from gateway.kafka.filters.groups_common import commit_outcome

API_KEY = 47
MIN_VERSION = 0
MAX_VERSION = 0


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    if not ctx.allowed("DELETE", "GROUP", request.group_id):
        code = ErrorCode.group_authorization_failed
        return Reply(response(ctx, "OffsetDeleteResponse", error_code=code, topics=()))
    if not request.group_id:  # Kafka's coordinator refuses it; prefixed, the brokers would not
        code = ErrorCode.invalid_group_id
        return Reply(response(ctx, "OffsetDeleteResponse", error_code=code, topics=()))
    group = ctx.namespace.fleet(request.group_id)
    return commit_outcome(ctx, request, "OffsetDeleteResponse", None, group_id=group)
