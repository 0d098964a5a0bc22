"""InitProducerId through the gateway: a transactional id is prefixed and needs WRITE on it; null
(idempotent) passes and needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import init_producer_id
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
M = init_producer_id


def _init(version: int, txn: str | None) -> Any:
    return request(
        M,
        version,
        "InitProducerIdRequest",
        transactional_id=txn,
        transaction_timeout=timedelta(seconds=60),
        producer_id=-1,
        producer_epoch=-1,
    )


@pytest.mark.parametrize("version", list(versions(M)))
def test_transactional_id_is_prefixed(version: int) -> None:
    outcome = forwarded(asyncio.run(run(M, context(M, version), _init(version, "tx"))))
    assert outcome.request.transactional_id == "acme_tx"
    answer = response(
        M,
        version,
        "InitProducerIdResponse",
        error_code=ErrorCode.none,
        producer_id=7,
        producer_epoch=0,
    )
    assert outcome.on_response(answer) == answer


@pytest.mark.parametrize("version", list(versions(M)))
def test_idempotent_passes_as_null(version: int) -> None:
    outcome = forwarded(asyncio.run(run(M, context(M, version), _init(version, None))))
    assert outcome.request.transactional_id is None


def test_transactional_id_needs_write() -> None:
    ctx = context(M, 5, access=FakeAccess(denied={("WRITE", "TRANSACTIONAL_ID", "tx")}))
    answer = replied(asyncio.run(run(M, ctx, _init(5, "tx"))))
    assert answer.error_code == ErrorCode.transactional_id_authorization_failed
    assert (answer.producer_id, answer.producer_epoch) == (-1, -1)


def test_empty_transactional_id_is_invalid() -> None:
    answer = replied(asyncio.run(run(M, context(M, 5), _init(5, ""))))
    assert answer.error_code == ErrorCode.invalid_request


@pytest.mark.parametrize(
    ("denied", "denied_any", "allowed"),
    [
        (set(), set(), True),
        ({("IDEMPOTENT_WRITE", "CLUSTER", "kafka-cluster")}, set(), True),
        (set(), {("WRITE", "TOPIC")}, True),
        ({("IDEMPOTENT_WRITE", "CLUSTER", "kafka-cluster")}, {("WRITE", "TOPIC")}, False),
    ],
)
def test_idempotent_acl(denied: set[Any], denied_any: set[Any], allowed: bool) -> None:
    ctx = context(M, 4, access=FakeAccess(denied=denied, denied_any=denied_any))
    outcome = asyncio.run(run(M, ctx, _init(4, None)))
    if allowed:
        forwarded(outcome)
    else:
        assert replied(outcome).error_code == ErrorCode.cluster_authorization_failed
