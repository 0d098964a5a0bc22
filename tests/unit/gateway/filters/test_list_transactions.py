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
    assert outcome.name_scope == "acme_", "the broker lists the tenant's ids only"
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


def _states(version: int, *ids: str) -> object:
    states = tuple(
        response(
            M,
            version,
            "TransactionState",
            transactional_id=t,
            producer_id=1,
            transaction_state="Ongoing",
        )
        for t in ids
    )
    return response(
        M,
        version,
        "ListTransactionsResponse",
        error_code=ErrorCode.none,
        unknown_state_filters=(),
        transaction_states=states,
    )


def test_v2_patterns_match_the_tenants_own_ids_in_the_gateway() -> None:
    """KIP-1152: the pattern never reaches the brokers (it would run over prefixed fleet ids);
    the gateway matches whole stripped ids with RE2; a bad pattern is refused here."""
    ctx = context(M, 2)

    def listed(pattern: str) -> list[str]:
        req = request(
            M, 2, "ListTransactionsRequest",
            state_filters=(), producer_id_filters=(), transactional_id_pattern=pattern,
        )  # fmt: skip
        outcome = forwarded(asyncio.run(run(M, ctx, req)))
        assert outcome.request.transactional_id_pattern is None
        answer = _states(
            2,
            "acme_orders-1",
            "acme_ord",
            "acme_pay-1",
            "bolt_orders-2",
            "acme_" + "a" * 3000 + "!",
        )
        return [s.transactional_id for s in outcome.on_response(answer).transaction_states]

    assert listed("orders-.*") == ["orders-1"]  # whole-id match: not "ord", not bolt's
    assert listed("acme_.*") == []  # the prefix is not the tenant's to see or match
    assert listed("") == ["orders-1", "ord", "pay-1", "a" * 3000 + "!"]
    assert listed("(a+)+$") == []  # RE2: linear time, no catastrophic backtracking
    refused = asyncio.run(run(M, ctx, request(
        M, 2, "ListTransactionsRequest",
        state_filters=(), producer_id_filters=(), transactional_id_pattern="([",
    )))  # fmt: skip
    assert refused.response.error_code == ErrorCode.invalid_regular_expression  # type: ignore[union-attr]
