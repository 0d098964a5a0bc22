"""EndTxn (key 26), versions 0-5 (all kio 0.6.5 has; advertised within the brokers' range,
v0-4 today): the transactional id is the tenant's (RW); the answer carries
no names. Kafka's ACL: WRITE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import response, unchanged

API_KEY = 26
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    if not ctx.allowed("WRITE", "TRANSACTIONAL_ID", request.transactional_id):
        return Reply(
            response(
                ctx,
                "EndTxnResponse",
                error_code=ErrorCode.transactional_id_authorization_failed,
                producer_id=-1,
                producer_epoch=-1,
            )
        )
    fleet_id = ctx.namespace.fleet(request.transactional_id)
    return Forward(replace(request, transactional_id=fleet_id), unchanged)
