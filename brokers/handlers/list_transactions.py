"""ListTransactions (key 66, v0–2, KIP-664): the transactional ids this broker coordinates.

Filters by state names (unknown ones are echoed in `unknown_state_filters`), producer ids,
(v1) how long the transaction has run and (v2, KIP-1152) a regular expression the whole id must
match (empty or null: all; RE2 as Kafka's RE2/J, `brokers.wire.request_patterns`; one that does
not compile, or is too long, is INVALID_REGULAR_EXPRESSION); COORDINATOR_LOAD_IN_PROGRESS while a partition loads
(`TransactionCoordinator.list_transactions`). The admin client asks every broker and merges. A
request header's name scope (`brokers.wire.headers.NAME_SCOPE_TAG`, the gateway's tenant
prefix) lists only the ids that start with it.
Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from brokers.handlers.build import make, response_module, throttle
from brokers.handlers.services import TransactionService
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode
from brokers.wire.request_patterns import RefusedPattern, compile_request_pattern

API_KEY = 66


def route(transactions: TransactionService) -> Route:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        module = response_module(API_KEY, ctx.api_version)
        pattern = compile_request_pattern(getattr(request, "transactional_id_pattern", None))
        if isinstance(pattern, RefusedPattern):
            return make(
                module,
                "ListTransactionsResponse",
                throttle_time=throttle(),
                error_code=ErrorCode.invalid_regular_expression,
                unknown_state_filters=(),
                transaction_states=(),
            )
        listing = transactions.coordinator.list_transactions(
            states=tuple(request.state_filters),
            producer_ids=frozenset(request.producer_id_filters),
            duration_filter_ms=getattr(request, "duration_filter", -1),
            prefix=ctx.header.name_scope or "",
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
                if pattern is None or pattern.matches(t.transactional_id)
            ),
        )

    return Route(API_KEY, 0, 2, handle, name="ListTransactions")
