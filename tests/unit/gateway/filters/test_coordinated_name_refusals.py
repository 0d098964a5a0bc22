"""The filters that make coordinator state (JoinGroup, OffsetCommit, TxnOffsetCommit,
InitProducerId; DeleteGroups frees) under the tenant's limits on groups and transactional ids
(`gateway/kafka/coordinated_names.py`): one more past the limit is refused with the API's
authorization error, a name the tenant holds passes, a name longer than 255 characters is
INVALID_GROUP_ID / INVALID_REQUEST."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.coordinated_names import CoordinatedNames, NameKind, NameLimits
from gateway.kafka.filter import FilterContext, FilterModule
from gateway.kafka.filters import (
    delete_groups,
    init_producer_id,
    join_group,
    offset_commit,
    txn_offset_commit,
)
from tests.unit.gateway.filters.harness import context, forwarded, replied, request, response, run
from tests.unit.gateway.filters.test_init_producer_id import _init
from tests.unit.gateway.filters.test_join_group import _join
from tests.unit.gateway.filters.test_offset_commit import _commit
from tests.unit.gateway.filters.test_offset_commit import _errors as commit_errors
from tests.unit.gateway.filters.test_txn_offset_commit import _codes as txn_commit_errors
from tests.unit.gateway.filters.test_txn_offset_commit import _commit as _txn_commit

pytestmark = pytest.mark.unit
LONG = "g" * 256


class Lister:
    def __init__(self, groups: set[str], txns: set[str]) -> None:
        self.names = {NameKind.GROUP: groups, NameKind.TRANSACTIONAL_ID: txns}

    async def coordinated_names(self, kind: NameKind, prefix: str = "") -> tuple[set[str], bool]:
        return {n for n in self.names[kind] if n.startswith(prefix)}, True


def at_limit(module: FilterModule, version: int) -> FilterContext:
    """acme holds group `g` and transactional id `tx`, its limit of one each."""
    ctx = context(module, version)
    lister = Lister({"acme_g", "bolt_x"}, {"acme_tx"})
    ctx.names = CoordinatedNames(lister, NameLimits(groups=1, transactional_ids=1))
    return ctx


def outcome(module: FilterModule, version: int, req: Any) -> Any:
    return asyncio.run(run(module, at_limit(module, version), req))


def test_join_group() -> None:
    forwarded(outcome(join_group, 9, _join(9, "connect", b"", group="g")))
    ctx = at_limit(join_group, 9)
    refused = replied(asyncio.run(run(join_group, ctx, _join(9, "connect", b"", group="other"))))
    assert refused.error_code == ErrorCode.group_authorization_failed
    # The HTTP API says why (the error code alone reads as an ACL refusal).
    assert ctx.refusal_detail is not None
    assert "as many consumer groups as it may (1)" in ctx.refusal_detail
    assert "'other'" in ctx.refusal_detail
    too_long = replied(outcome(join_group, 9, _join(9, "connect", b"", group=LONG)))
    assert too_long.error_code == ErrorCode.invalid_group_id


def commit_request() -> Any:
    return _commit(9, "t")


def test_offset_commit() -> None:
    forwarded(outcome(offset_commit, 9, _commit(9, "t")))
    other = replace(commit_request(), group_id="other")
    codes = commit_errors(replied(outcome(offset_commit, 9, other)))
    assert codes == [("t", ErrorCode.group_authorization_failed)]
    too_long = replace(commit_request(), group_id=LONG)
    assert commit_errors(replied(outcome(offset_commit, 9, too_long))) == [
        ("t", ErrorCode.invalid_group_id)
    ]


def test_txn_offset_commit() -> None:
    mine = replace(_txn_commit(4, "t"), group_id="g")
    forwarded(outcome(txn_offset_commit, 4, mine))
    other = replace(mine, group_id="other")
    codes = txn_commit_errors(replied(outcome(txn_offset_commit, 4, other)))
    assert codes == [("t", ErrorCode.group_authorization_failed)]


def test_init_producer_id() -> None:
    ctx = at_limit(init_producer_id, 5)
    forwarded(asyncio.run(run(init_producer_id, ctx, _init(5, "tx"))))
    assert ctx.refusal_detail is None
    refused = replied(outcome(init_producer_id, 5, _init(5, "tx2")))
    assert refused.error_code == ErrorCode.transactional_id_authorization_failed
    assert replied(outcome(init_producer_id, 5, _init(5, LONG))).error_code == (
        ErrorCode.invalid_request
    )
    forwarded(outcome(init_producer_id, 5, _init(5, None)))  # idempotent: no id, no limit


def test_a_deleted_group_frees_its_place() -> None:
    ctx = at_limit(join_group, 9)
    refused = asyncio.run(run(join_group, ctx, _join(9, "connect", b"", group="other")))
    assert replied(refused).error_code == ErrorCode.group_authorization_failed
    dctx = replace(ctx, api_key=delete_groups.API_KEY, api_version=2)
    sent = forwarded(asyncio.run(run(delete_groups, dctx, request(
        delete_groups, 2, "DeleteGroupsRequest", groups_names=("g",)
    ))))  # fmt: skip
    result = response(delete_groups, 2, "DeletableGroupResult", group_id="acme_g", error_code=0)
    sent.on_response(response(delete_groups, 2, "DeleteGroupsResponse", results=(result,)))
    forwarded(asyncio.run(run(join_group, ctx, _join(9, "connect", b"", group="other"))))


def test_the_tenant_s_own_limits_replace_the_gateway_s() -> None:
    """A tenant whose plan (or tenant record) sets `max_groups` / `max_transactional_ids` is held
    to those, above or below the gateway's setting; None keeps the gateway's."""
    roomier = context(join_group, 9)
    roomier.limits = replace(roomier.limits, max_groups=3)
    roomier.names = CoordinatedNames(Lister({"acme_g"}, set()), NameLimits(groups=1))
    for group in ("other", "third"):  # the gateway's limit (1) would refuse both
        forwarded(asyncio.run(run(join_group, roomier, _join(9, "connect", b"", group=group))))
    refused = replied(asyncio.run(run(join_group, roomier, _join(9, "connect", b"", group="x"))))
    assert refused.error_code == ErrorCode.group_authorization_failed
    assert roomier.refusal_detail is not None and "as it may (3)" in roomier.refusal_detail

    tighter = context(init_producer_id, 4)
    tighter.limits = replace(tighter.limits, max_transactional_ids=1)
    tighter.names = CoordinatedNames(Lister(set(), {"acme_tx"}), NameLimits(transactional_ids=50))
    answer = replied(asyncio.run(run(init_producer_id, tighter, _init(4, "tx2"))))
    assert answer.error_code == ErrorCode.transactional_id_authorization_failed
    forwarded(asyncio.run(run(init_producer_id, tighter, _init(4, "tx"))))
