"""ListTransactions (key 66, v0–1, KIP-664): the transactional ids this broker coordinates.

Filters by state names (unknown ones are echoed in `unknown_state_filters`), producer ids and
(v1) how long the transaction has run; COORDINATOR_LOAD_IN_PROGRESS while a partition loads
(`TransactionCoordinator.list_transactions`). The admin client asks every broker and merges.
Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.services import TransactionService
from brokers.server.context import RequestContext
from brokers.server.routes import Route

API_KEY = 66


def route(transactions: TransactionService) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        listing = transactions.coordinator.list_transactions(
            states=tuple(request.state_filters),
            producer_ids=frozenset(request.producer_id_filters),
            duration_filter_ms=getattr(request, "duration_filter", -1),
        )
        return make(
            module,
            "ListTransactionsResponse",
            throttle_time=throttle(),
            error_code=listing.error,
            unknown_state_filters=listing.unknown_state_filters,
            transaction_states=tuple(
                make(
                    module,
                    "TransactionState",
                    transactional_id=t.transactional_id,
                    producer_id=t.producer_id,
                    transaction_state=t.state,
                )
                for t in listing.transactions
            ),
        )

    return Route(API_KEY, 0, 1, handle, name="ListTransactions")
