"""ListTransactions (key 66), versions 0-2: the state and producer filters carry no names and
pass; the answer keeps only the tenant's transactional ids, stripped, and of those only the ones
the caller may DESCRIBE (Kafka's ACL: transactions are filtered by DESCRIBE on each id). v2's
`transactional_id_pattern` (KIP-1152) is a regular expression over the tenant's own ids: it is
never sent to the brokers (there it would run over every tenant's prefixed ids); the gateway asks
without it and matches the stripped ids itself, whole-id, with RE2 as Kafka's RE2/J does (linear
time, so no pattern can stall the gateway: `brokers.wire.request_patterns`); a pattern RE2 refuses,
or a too long one, is INVALID_REGULAR_EXPRESSION from the gateway. The request goes upstream with
the tenant's prefix as the header's name scope (`brokers.wire.headers`; every version is
flexible), so a broker builds the tenant's ids only, not every tenant's. Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from brokers.wire.errors import ErrorCode
from brokers.wire.request_patterns import RefusedPattern, compile_request_pattern
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import response
from gateway.kafka.filters.groups_common import stripped

API_KEY = 66
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    pattern = compile_request_pattern(getattr(request, "transactional_id_pattern", None))
    if isinstance(pattern, RefusedPattern):
        return Reply(
            response(
                ctx,
                "ListTransactionsResponse",
                error_code=ErrorCode.invalid_regular_expression,
                unknown_state_filters=(),
                transaction_states=(),
            )
        )
    upstream = request
    if any(f.name == "transactional_id_pattern" for f in fields(request)):
        upstream = replace(request, transactional_id_pattern=None)

    def on_response(answer: Any) -> Any:
        states = tuple(
            s
            for s in stripped(ctx, answer.transaction_states, "transactional_id")
            if ctx.allowed("DESCRIBE", "TRANSACTIONAL_ID", s.transactional_id)
            and (pattern is None or pattern.matches(s.transactional_id))
        )
        return replace(answer, transaction_states=states)

    return Forward(upstream, on_response, name_scope=ctx.namespace.prefix)
