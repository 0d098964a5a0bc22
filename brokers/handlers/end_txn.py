"""EndTxn (key 26, v0–5): commit or abort a producer's transaction.

The answer comes once PrepareCommit/PrepareAbort is committed to `__transaction_state`; the
markers and the completion follow in the background (`TransactionCoordinator.end_transaction`).
v5 is KIP-890 part 2 (`transaction.version` 2): the coordinator bumps the producer epoch with
every EndTxn, writes the markers with the bumped epoch and answers the producer id and epoch the
client continues with (a new producer id at epoch 0 once the epochs ran out). Clients only send
v5 when ApiVersions finalizes `transaction.version` 2 (`brokers.handlers.api_versions`).
PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2. Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.coordinator.transactions.metadata import TV_2
from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.services import TransactionService
from brokers.handlers.txn_codes import for_version
from brokers.server.context import RequestContext
from brokers.server.routes import Route

API_KEY = 26
FENCED_SINCE = 2
EPOCH_BUMP_SINCE = 5  # KIP-890 part 2


def client_transaction_version(api_version: int) -> int:
    """The transaction version an EndTxn of `api_version` implies (Kafka's
    TransactionVersion.transactionVersionForEndTxn)."""
    return TV_2 if api_version >= EPOCH_BUMP_SINCE else 0


def route(transactions: TransactionService) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        error, producer_id, epoch = await transactions.coordinator.end_transaction(
            request.transactional_id,
            request.producer_id,
            request.producer_epoch,
            request.committed,
            client_transaction_version(ctx.api_version),
        )
        module = response_module(API_KEY, ctx.api_version)
        code = for_version(error, ctx.api_version, FENCED_SINCE)
        if ctx.api_version < EPOCH_BUMP_SINCE:
            return make(module, "EndTxnResponse", throttle_time=throttle(), error_code=code)
        return make(
            module,
            "EndTxnResponse",
            throttle_time=throttle(),
            error_code=code,
            producer_id=producer_id,
            producer_epoch=epoch,
        )

    return Route(API_KEY, 0, 5, handle, name="EndTxn")
