"""AddOffsetsToTxn (key 25), versions 0-4 (all kio 0.6.5 has; advertised within the
brokers' range): the transactional id and group id are the tenant's
(RW); the answer carries no names. Kafka's ACLs, in Kafka's order: WRITE on the transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED), READ on the group (GROUP_AUTHORIZATION_FAILED).
Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import response, unchanged

API_KEY = 25
MIN_VERSION = 0
MAX_VERSION = 4


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    code = None
    if not ctx.allowed("WRITE", "TRANSACTIONAL_ID", request.transactional_id):
        code = ErrorCode.transactional_id_authorization_failed
    elif not ctx.allowed("READ", "GROUP", request.group_id):
        code = ErrorCode.group_authorization_failed
    if code is not None:
        return Reply(response(ctx, "AddOffsetsToTxnResponse", error_code=code))
    forwarded = replace(
        request,
        transactional_id=ctx.namespace.fleet(request.transactional_id),
        group_id=ctx.namespace.fleet(request.group_id),
    )
    return Forward(forwarded, unchanged)
