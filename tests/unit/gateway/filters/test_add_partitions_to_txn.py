"""AddPartitionsToTxn through the gateway (v0-3): transactional id and topics prefixed, results
stripped and foreign ones dropped; WRITE on the transactional id and on every topic (one refused
topic: nothing forwarded, the others OPERATION_NOT_ATTEMPTED)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import add_partitions_to_txn
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
M = add_partitions_to_txn


def _add(version: int, *topics: str) -> Any:
    entries = tuple(
        request(M, version, "AddPartitionsToTxnTopic", name=t, partitions=(0, 1)) for t in topics
    )
    return request(
        M,
        version,
        "AddPartitionsToTxnRequest",
        v3_and_below_transactional_id="tx",
        v3_and_below_producer_id=7,
        v3_and_below_producer_epoch=0,
        v3_and_below_topics=entries,
    )


def _codes(answer: Any) -> list[tuple[str, list[ErrorCode]]]:
    return [
        (t.name, [p.partition_error_code for p in t.results_by_partition])
        for t in answer.results_by_topic_v3_and_below
    ]


@pytest.mark.parametrize("version", list(versions(M)))
def test_names_prefixed_and_stripped(version: int) -> None:
    outcome = forwarded(asyncio.run(run(M, context(M, version), _add(version, "a", "b"))))
    assert outcome.request.v3_and_below_transactional_id == "acme_tx"
    assert [t.name for t in outcome.request.v3_and_below_topics] == ["acme_a", "acme_b"]
    results = tuple(
        response(
            M,
            version,
            "AddPartitionsToTxnTopicResult",
            name=n,
            results_by_partition=(
                response(
                    M,
                    version,
                    "AddPartitionsToTxnPartitionResult",
                    partition_index=0,
                    partition_error_code=ErrorCode.none,
                ),
            ),
        )
        for n in ("acme_a", "bolt_a", "__transaction_state", "acme_b")
    )
    answer = response(
        M, version, "AddPartitionsToTxnResponse", results_by_topic_v3_and_below=results
    )
    assert [n for n, _ in _codes(outcome.on_response(answer))] == ["a", "b"]


def test_one_refused_topic_stops_the_request() -> None:
    ctx = context(M, 3, access=FakeAccess(denied={("WRITE", "TOPIC", "b")}))
    answer = replied(asyncio.run(run(M, ctx, _add(3, "a", "b"))))
    assert _codes(answer) == [
        ("a", [ErrorCode.operation_not_attempted] * 2),
        ("b", [ErrorCode.topic_authorization_failed] * 2),
    ]


def test_denied_transactional_id_fails_every_partition() -> None:
    ctx = context(M, 0, access=FakeAccess(denied={("WRITE", "TRANSACTIONAL_ID", "tx")}))
    answer = replied(asyncio.run(run(M, ctx, _add(0, "a"))))
    assert _codes(answer) == [("a", [ErrorCode.transactional_id_authorization_failed] * 2)]
