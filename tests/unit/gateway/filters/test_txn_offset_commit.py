"""TxnOffsetCommit through the gateway: transactional id, group and topics prefixed, topics
stripped and foreign ones dropped; WRITE on the transactional id, READ on the group, READ per
topic (refusals merged in request order)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import txn_offset_commit
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
M = txn_offset_commit


def _commit(version: int, *topics: str) -> Any:
    entries = tuple(
        request(
            M,
            version,
            "TxnOffsetCommitRequestTopic",
            name=t,
            partitions=(
                request(
                    M,
                    version,
                    "TxnOffsetCommitRequestPartition",
                    partition_index=0,
                    committed_offset=3,
                    committed_leader_epoch=-1,
                    committed_metadata=None,
                ),
            ),
        )
        for t in topics
    )
    return request(
        M,
        version,
        "TxnOffsetCommitRequest",
        transactional_id="tx",
        group_id="g",
        producer_id=7,
        producer_epoch=0,
        generation_id=1,
        member_id="m",
        group_instance_id=None,
        topics=entries,
    )


def _answer(version: int, *topics: str) -> Any:
    entries = tuple(
        response(
            M,
            version,
            "TxnOffsetCommitResponseTopic",
            name=t,
            partitions=(
                response(
                    M,
                    version,
                    "TxnOffsetCommitResponsePartition",
                    partition_index=0,
                    error_code=ErrorCode.none,
                ),
            ),
        )
        for t in topics
    )
    return response(M, version, "TxnOffsetCommitResponse", topics=entries)


def _codes(answer: Any) -> list[tuple[str, ErrorCode]]:
    return [(t.name, t.partitions[0].error_code) for t in answer.topics]


@pytest.mark.parametrize("version", list(versions(M)))
def test_names_prefixed_stripped_and_refusals_merged(version: int) -> None:
    ctx = context(M, version, access=FakeAccess(denied={("READ", "TOPIC", "a")}))
    outcome = forwarded(asyncio.run(run(M, ctx, _commit(version, "a", "b"))))
    req = outcome.request
    assert (req.transactional_id, req.group_id) == ("acme_tx", "acme_g")
    assert [t.name for t in req.topics] == ["acme_b"]
    client = outcome.on_response(_answer(version, "bolt_b", "acme_b"))
    assert _codes(client) == [
        ("a", ErrorCode.topic_authorization_failed),
        ("b", ErrorCode.none),
    ]


@pytest.mark.parametrize(
    ("denied", "code"),
    [
        (("WRITE", "TRANSACTIONAL_ID", "tx"), ErrorCode.transactional_id_authorization_failed),
        (("READ", "GROUP", "g"), ErrorCode.group_authorization_failed),
    ],
)
def test_refusals_fail_every_partition(denied: tuple[str, str, str], code: ErrorCode) -> None:
    ctx = context(M, 5, access=FakeAccess(denied={denied}))
    answer = replied(asyncio.run(run(M, ctx, _commit(5, "a", "b"))))
    assert _codes(answer) == [("a", code), ("b", code)]
