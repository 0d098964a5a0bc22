"""DescribeTransactions through the gateway: ids prefixed, answers stripped, foreign ids and
topics dropped, topics the caller may not DESCRIBE removed; DESCRIBE per id, refusals merged."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import describe_transactions
from tests.unit.gateway.filters.harness import (
    FakeAccess,
    context,
    forwarded,
    replied,
    request,
    response,
    run,
    versions,
)

pytestmark = pytest.mark.unit
M = describe_transactions


def _state(version: int, txn: str, *topics: str) -> Any:
    return response(
        M,
        version,
        "TransactionState",
        error_code=ErrorCode.none,
        transactional_id=txn,
        transaction_state="Ongoing",
        transaction_timeout=timedelta(seconds=60),
        transaction_start_time=datetime(2026, 1, 1, tzinfo=UTC),
        producer_id=7,
        producer_epoch=0,
        topics=tuple(response(M, version, "TopicData", topic=t, partitions=(0,)) for t in topics),
    )


@pytest.mark.parametrize("version", list(versions(M)))
def test_ids_prefixed_stripped_and_filtered(version: int) -> None:
    access = FakeAccess(denied={("DESCRIBE", "TRANSACTIONAL_ID", "x"), ("DESCRIBE", "TOPIC", "c")})
    ctx = context(M, version, access=access)
    req = request(M, version, "DescribeTransactionsRequest", transactional_ids=("x", "tx"))
    outcome = forwarded(asyncio.run(run(M, ctx, req)))
    assert outcome.request.transactional_ids == ("acme_tx",)
    states = (
        _state(version, "bolt_tx", "bolt_a"),
        _state(version, "acme_tx", "acme_a", "bolt_b", "__consumer_offsets", "acme_c"),
    )
    answer = response(M, version, "DescribeTransactionsResponse", transaction_states=states)
    client = outcome.on_response(answer)
    assert [(s.transactional_id, s.error_code) for s in client.transaction_states] == [
        ("x", ErrorCode.transactional_id_authorization_failed),
        ("tx", ErrorCode.none),
    ]
    assert [t.topic for t in client.transaction_states[1].topics] == ["a"]


def test_all_refused_is_answered_locally() -> None:
    ctx = context(M, 0, access=FakeAccess(denied={("DESCRIBE", "TRANSACTIONAL_ID", "x")}))
    req = request(M, 0, "DescribeTransactionsRequest", transactional_ids=("x",))
    answer = replied(asyncio.run(run(M, ctx, req)))
    assert answer.transaction_states[0].error_code == (
        ErrorCode.transactional_id_authorization_failed
    )
