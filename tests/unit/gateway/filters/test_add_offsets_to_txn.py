"""AddOffsetsToTxn through the gateway: transactional id and group prefixed; WRITE on the
transactional id, then READ on the group."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import add_offsets_to_txn
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
M = add_offsets_to_txn


def _add(version: int) -> Any:
    return request(
        M,
        version,
        "AddOffsetsToTxnRequest",
        transactional_id="tx",
        producer_id=7,
        producer_epoch=0,
        group_id="g",
    )


@pytest.mark.parametrize("version", list(versions(M)))
def test_names_prefixed(version: int) -> None:
    outcome = forwarded(asyncio.run(run(M, context(M, version), _add(version))))
    assert (outcome.request.transactional_id, outcome.request.group_id) == ("acme_tx", "acme_g")
    answer = response(M, version, "AddOffsetsToTxnResponse", error_code=ErrorCode.none)
    assert outcome.on_response(answer) == answer


@pytest.mark.parametrize(
    ("denied", "code"),
    [
        (("WRITE", "TRANSACTIONAL_ID", "tx"), ErrorCode.transactional_id_authorization_failed),
        (("READ", "GROUP", "g"), ErrorCode.group_authorization_failed),
    ],
)
def test_refusals(denied: tuple[str, str, str], code: ErrorCode) -> None:
    ctx = context(M, 4, access=FakeAccess(denied={denied}))
    assert replied(asyncio.run(run(M, ctx, _add(4)))).error_code == code
