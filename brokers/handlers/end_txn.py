"""EndTxn (key 26, v0–4): commit or abort a producer's transaction.

The answer comes once PrepareCommit/PrepareAbort is committed to `__transaction_state`; the
markers and the completion follow in the background (`TransactionCoordinator.end_txn`). v5
(KIP-890 part 2: an epoch bump per transaction) is not served, so clients keep one epoch across
transactions. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2. Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.services import TransactionService
from brokers.handlers.txn_codes import for_version
from brokers.server.context import RequestContext
from brokers.server.routes import Route

API_KEY = 26
FENCED_SINCE = 2


def route(transactions: TransactionService) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        error = await transactions.coordinator.end_txn(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
        )
        return make(
            response_module(API_KEY, ctx.api_version),
            "EndTxnResponse",
            throttle_time=throttle(),
            error_code=for_version(error, ctx.api_version, FENCED_SINCE),
        )

    return Route(API_KEY, 0, 4, handle, name="EndTxn")
