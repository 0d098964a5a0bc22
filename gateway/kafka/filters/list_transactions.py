"""ListTransactions (key 66), versions 0-1 (CAP 1: v2's `TransactionalIdPattern` is a regex over
every id in the fleet, which the gateway would have to anchor to the tenant's prefix): the
state and producer filters carry no names and pass; the answer keeps only the tenant's
transactional ids, stripped, and of those only the ones the caller may DESCRIBE (Kafka's ACL:
transactions are filtered by DESCRIBE on each id). Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gateway.kafka.filter import FilterContext, Forward, Outcome
from gateway.kafka.filters.groups_common import stripped

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 1


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    def on_response(answer: Any) -> Any:
        states = tuple(
            s
            for s in stripped(ctx, answer.transaction_states, "transactional_id")
            if ctx.allowed("DESCRIBE", "TRANSACTIONAL_ID", s.transactional_id)
        )
        return replace(answer, transaction_states=states)

    return Forward(request, on_response)
