"""InitProducerId (key 22), versions 0-5 (CAP 5: v6 adds KIP-939 two-phase commit; Pier's
brokers serve 0-5): a transactional id is the tenant's (RW); null means an idempotent producer
and passes as null. Kafka's ACLs: a transactional id needs WRITE on it (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs IDEMPOTENT_WRITE on the
cluster or WRITE on some topic (else CLUSTER_AUTHORIZATION_FAILED). An empty transactional id is
refused with INVALID_REQUEST, as Kafka's coordinator does (prefixed, it would reach the fleet
as a valid id). A transactional id past the tenant's `tenant.max.transactional.ids`
(`coordinated_names.py`) is TRANSACTIONAL_ID_AUTHORIZATION_FAILED. The answer carries no names.
Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.coordinated_names import NameKind
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import response, unchanged
from tenancy.acls import CLUSTER_NAME

API_KEY = 22
MIN_VERSION = 0
MAX_VERSION = 5


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    txn = request.transactional_id
    if txn is None:
        idempotent = ctx.allowed("IDEMPOTENT_WRITE", "CLUSTER", CLUSTER_NAME)
        if not (idempotent or ctx.allowed_any("WRITE", "TOPIC")):
            return Reply(_error(ctx, ErrorCode.cluster_authorization_failed))
        return Forward(request, unchanged)
    if not ctx.allowed("WRITE", "TRANSACTIONAL_ID", txn):
        return Reply(_error(ctx, ErrorCode.transactional_id_authorization_failed))
    if not txn:
        return Reply(_error(ctx, ErrorCode.invalid_request))
    refused = await ctx.name_refusal(NameKind.TRANSACTIONAL_ID, txn)
    if refused is not None:  # too long, or one past the tenant's limit
        return Reply(_error(ctx, refused))
    return Forward(replace(request, transactional_id=ctx.namespace.fleet(txn)), unchanged)


def _error(ctx: FilterContext, code: ErrorCode) -> Any:
    return response(
        ctx, "InitProducerIdResponse", error_code=code, producer_id=-1, producer_epoch=-1
    )
