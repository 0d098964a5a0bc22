"""FindCoordinator through the gateway: keys renamed by key type, DESCRIBE refusals, share keys
refused, coordinator endpoints rewritten, foreign keys dropped."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import find_coordinator as fc
from tests.unit.gateway.filters.harness import (
    FakeAccess,
    context,
    forwarded,
    replied,
    request,
    response,
    run,
)

pytestmark = pytest.mark.unit
OLD = [0, 1, 2, 3]
BATCHED = [4, 5, 6]


@pytest.mark.parametrize("version", OLD)
def test_single_key_is_prefixed_and_node_rewritten(version: int) -> None:
    ctx = context(fc, version)
    outcome = forwarded(
        asyncio.run(
            run(fc, ctx, request(fc, version, "FindCoordinatorRequest", key="g", key_type=0))
        )
    )
    assert outcome.request.key == "acme_g"
    answer = response(
        fc,
        version,
        "FindCoordinatorResponse",
        error_code=ErrorCode.none,
        error_message=None,
        node_id=2,
        host="b2.fleet",
        port=9092,
    )
    shown = outcome.on_response(answer)
    assert (shown.node_id, shown.host, shown.port) == (2, "gw.example", 9102)
    lost = outcome.on_response(dataclasses.replace(answer, node_id=7))
    assert lost.error_code == ErrorCode.coordinator_not_available and lost.host == ""


@pytest.mark.parametrize(
    ("key_type", "resource", "code"),
    [
        (0, "GROUP", ErrorCode.group_authorization_failed),
        (1, "TRANSACTIONAL_ID", ErrorCode.transactional_id_authorization_failed),
    ],
)
def test_denied_key_is_answered_locally(key_type: int, resource: str, code: ErrorCode) -> None:
    ctx = context(fc, 3, access=FakeAccess(denied={("DESCRIBE", resource, "k")}))
    answer = replied(
        asyncio.run(
            run(fc, ctx, request(fc, 3, "FindCoordinatorRequest", key="k", key_type=key_type))
        )
    )
    assert answer.error_code == code


@pytest.mark.parametrize("version", [3, 6])
def test_share_keys_are_refused(version: int) -> None:
    ctx = context(fc, version)
    req = request(
        fc, version, "FindCoordinatorRequest", key="g", key_type=2, coordinator_keys=("g",)
    )
    answer = replied(asyncio.run(run(fc, ctx, req)))
    codes = [answer.error_code] if version < 4 else [c.error_code for c in answer.coordinators]
    assert codes == [ErrorCode.invalid_request]


def _coordinator(version: int, key: str, node: int) -> Any:
    return response(
        fc,
        version,
        "Coordinator",
        key=key,
        node_id=node,
        host="b.fleet",
        port=1,
        error_code=ErrorCode.none,
        error_message=None,
    )


@pytest.mark.parametrize("version", BATCHED)
def test_batched_keys_merge_refusals_in_order(version: int) -> None:
    ctx = context(fc, version, access=FakeAccess(denied={("DESCRIBE", "GROUP", "no")}))
    req = request(
        fc, version, "FindCoordinatorRequest", key_type=0, coordinator_keys=("a", "no", "b")
    )
    outcome = forwarded(asyncio.run(run(fc, ctx, req)))
    assert outcome.request.coordinator_keys == ("acme_a", "acme_b")
    answer = response(
        fc,
        version,
        "FindCoordinatorResponse",
        coordinators=(
            _coordinator(version, "acme_b", 1),
            _coordinator(version, "bolt_a", 1),
            _coordinator(version, "acme_a", 2),
        ),
    )
    shown = outcome.on_response(answer).coordinators
    assert [(c.key, c.error_code, c.port) for c in shown] == [
        ("a", ErrorCode.none, 9102),
        ("no", ErrorCode.group_authorization_failed, -1),
        ("b", ErrorCode.none, 9101),
    ]
