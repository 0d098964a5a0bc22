"""ListGroups through the gateway: only the tenant's groups, stripped, and only those the caller
may DESCRIBE."""

from __future__ import annotations

import asyncio

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import list_groups
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
M = list_groups


@pytest.mark.parametrize("version", list(versions(M)))
def test_only_the_tenants_describable_groups(version: int) -> None:
    ctx = context(M, version, access=FakeAccess(denied={("DESCRIBE", "GROUP", "hidden")}))
    req = request(M, version, "ListGroupsRequest", states_filter=("Stable",), types_filter=())
    outcome = forwarded(asyncio.run(run(M, ctx, req)))
    assert outcome.request == req
    assert outcome.name_scope == "acme_", "the broker lists the tenant's groups only"
    groups = tuple(
        response(
            M,
            version,
            "ListedGroup",
            group_id=g,
            protocol_type="consumer",
            group_state="Stable",
            group_type="classic",
        )
        for g in ("acme_g", "bolt_g", "acme_hidden", "__consumer_offsets", "acme_h")
    )
    answer = response(M, version, "ListGroupsResponse", error_code=ErrorCode.none, groups=groups)
    assert [g.group_id for g in outcome.on_response(answer).groups] == ["g", "h"]
