"""DescribeTransactions (key 65), version 0 (all there is; advertised as the brokers serve
it): transactional ids are the tenant's (RW); the answer's
states not the tenant's are dropped, the others stripped, and within each the topics not the
tenant's dropped and the rest stripped. Kafka's ACLs: DESCRIBE on each transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED locally, the rest forwarded, merged in request order);
topics the caller may not DESCRIBE are removed from the answer, as Kafka does.
Runs on the event loop.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Forward, Outcome, Reply
from gateway.kafka.filters.common import entity, response
from gateway.kafka.filters.groups_common import in_request_order, stripped

API_KEY = 65
MIN_VERSION = 0
MAX_VERSION = 0
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    ids = request.transactional_ids
    allowed = [t for t in ids if ctx.allowed("DESCRIBE", "TRANSACTIONAL_ID", t)]
    refused = [_refused(ctx, t) for t in ids if t not in allowed]
    if not allowed:
        return Reply(
            response(ctx, "DescribeTransactionsResponse", transaction_states=tuple(refused))
        )

    def on_response(answer: Any) -> Any:
        states = [
            replace(s, topics=_topics(ctx, s.topics))
            for s in stripped(ctx, answer.transaction_states, "transactional_id")
            if s.transactional_id in allowed
        ]
        ordered = in_request_order(states + refused, list(ids), "transactional_id")
        return replace(answer, transaction_states=ordered)

    fleet_ids = tuple(ctx.namespace.fleet(t) for t in allowed)
    return Forward(replace(request, transactional_ids=fleet_ids), on_response)


def _topics(ctx: FilterContext, topics: Any) -> tuple[Any, ...]:
    return tuple(
        t for t in stripped(ctx, topics, "topic") if ctx.allowed("DESCRIBE", "TOPIC", t.topic)
    )


def _refused(ctx: FilterContext, transactional_id: str) -> Any:
    return entity(
        ctx,
        "TransactionState",
        error_code=ErrorCode.transactional_id_authorization_failed,
        transactional_id=transactional_id,
        transaction_state="",
        transaction_timeout=timedelta(0),
        transaction_start_time=EPOCH,
        producer_id=-1,
        producer_epoch=-1,
        topics=(),
    )
