"""ListTransactions through the gateway: only the tenant's ids, stripped, DESCRIBE-filtered."""

from __future__ import annotations

import asyncio

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import list_transactions
from tests.unit.gateway.filters.harness import (
    FakeAccess,
    context,
    forwarded,
    request,
    response,
    run,
    versions,
)

pytestmark = pytest.mark.unit
M = list_transactions


@pytest.mark.parametrize("version", list(versions(M)))
def test_only_the_tenants_describable_ids(version: int) -> None:
    ctx = context(M, version, access=FakeAccess(denied={("DESCRIBE", "TRANSACTIONAL_ID", "no")}))
    req = request(
        M,
        version,
        "ListTransactionsRequest",
        state_filters=(),
        producer_id_filters=(),
        duration_filter=-1,
    )
    outcome = forwarded(asyncio.run(run(M, ctx, req)))
    assert outcome.request == req
    states = tuple(
        response(
            M,
            version,
            "TransactionState",
            transactional_id=t,
            producer_id=1,
            transaction_state="Ongoing",
        )
        for t in ("acme_tx", "bolt_tx", "acme_no", "__consumer_offsets")
    )
    answer = response(
        M,
        version,
        "ListTransactionsResponse",
        error_code=ErrorCode.none,
        unknown_state_filters=(),
        transaction_states=states,
    )
    assert [s.transactional_id for s in outcome.on_response(answer).transaction_states] == ["tx"]
