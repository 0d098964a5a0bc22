"""EndTxn through the gateway: the transactional id is prefixed; WRITE on it is required."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import end_txn
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
M = end_txn


def _end(version: int) -> Any:
    return request(
        M,
        version,
        "EndTxnRequest",
        transactional_id="tx",
        producer_id=7,
        producer_epoch=0,
        committed=True,
    )


@pytest.mark.parametrize("version", list(versions(M)))
def test_transactional_id_is_prefixed(version: int) -> None:
    outcome = forwarded(asyncio.run(run(M, context(M, version), _end(version))))
    assert outcome.request.transactional_id == "acme_tx"
    answer = response(
        M, version, "EndTxnResponse", error_code=ErrorCode.none, producer_id=7, producer_epoch=1
    )
    assert outcome.on_response(answer) == answer


@pytest.mark.parametrize("version", [0, 5])
def test_denied_transactional_id(version: int) -> None:
    ctx = context(M, version, access=FakeAccess(denied={("WRITE", "TRANSACTIONAL_ID", "tx")}))
    answer = replied(asyncio.run(run(M, ctx, _end(version))))
    assert answer.error_code == ErrorCode.transactional_id_authorization_failed
