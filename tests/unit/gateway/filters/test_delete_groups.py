"""DeleteGroups through the gateway: groups prefixed, results stripped and foreign ones dropped,
DELETE per group with refusals merged in request order."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import delete_groups
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
M = delete_groups


def _answer(version: int, *groups: str) -> Any:
    results = tuple(
        response(M, version, "DeletableGroupResult", group_id=g, error_code=ErrorCode.none)
        for g in groups
    )
    return response(M, version, "DeleteGroupsResponse", results=results)


@pytest.mark.parametrize("version", list(versions(M)))
def test_groups_prefixed_and_results_stripped(version: int) -> None:
    ctx = context(M, version, access=FakeAccess(denied={("DELETE", "GROUP", "b")}))
    req = request(M, version, "DeleteGroupsRequest", groups_names=("a", "b", "c"))
    outcome = forwarded(asyncio.run(run(M, ctx, req)))
    assert outcome.request.groups_names == ("acme_a", "acme_c")
    client = outcome.on_response(_answer(version, "acme_c", "bolt_a", "acme_a"))
    assert [(r.group_id, r.error_code) for r in client.results] == [
        ("a", ErrorCode.none),
        ("b", ErrorCode.group_authorization_failed),
        ("c", ErrorCode.none),
    ]


def test_all_refused_is_answered_locally() -> None:
    ctx = context(M, 2, access=FakeAccess(denied={("DELETE", "GROUP", "a")}))
    req = request(M, 2, "DeleteGroupsRequest", groups_names=("a",))
    answer = replied(asyncio.run(run(M, ctx, req)))
    assert answer.results[0].error_code == ErrorCode.group_authorization_failed
