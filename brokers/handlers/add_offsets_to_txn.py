"""AddOffsetsToTxn (key 25, v0–4): add a group's `__consumer_offsets` partition to a transaction.

Before TxnOffsetCommit, the producer adds the partition holding the group's offsets, so the
transaction's marker reaches it and the offsets are committed or dropped with the rest
(`TransactionCoordinator.add_offsets`). PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2.
Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.services import TransactionService
from brokers.handlers.txn_codes import for_version
from brokers.server.context import RequestContext
from brokers.server.routes import Route

API_KEY = 25
FENCED_SINCE = 2


def route(transactions: TransactionService) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        error = await transactions.coordinator.add_offsets(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.group_id,
        )
        return make(
            response_module(API_KEY, ctx.api_version),
            "AddOffsetsToTxnResponse",
            throttle_time=throttle(),
            error_code=for_version(error, ctx.api_version, FENCED_SINCE),
        )

    return Route(API_KEY, 0, 4, handle, name="AddOffsetsToTxn")
