"""Produce responses renamed on raw bytes: the same answer the kio path gives for the usual
(error-free) answer, and None (the kio path) for anything with a message to scrub."""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

import pytest

from brokers.client.messages import decode_response
from brokers.wire.entities import make, response_module
from brokers.wire.errors import ErrorCode
from gateway.kafka.raw.produce_response import rewrite_produce_response
from tests.unit.gateway.raw.kio_messages import NAMESPACE, PRODUCE_VERSIONS, encoded

pytestmark = pytest.mark.unit


def partition(module: Any, version: int, index: int, **fields: Any) -> Any:
    values: dict[str, Any] = {
        "index": index,
        "error_code": ErrorCode.none if index % 3 else ErrorCode.not_leader_or_follower,
        "base_offset": 1000 + index,
        "log_append_time": None,
        "log_start_offset": index,
        "record_errors": (),
        "error_message": None,
    }
    if version >= 10:
        values["current_leader"] = make(
            module, "LeaderIdAndEpoch", leader_id=index % 2, leader_epoch=7
        )
    values.update(fields)
    known = {f.name for f in dataclasses.fields(module.PartitionProduceResponse)}
    return make(
        module, "PartitionProduceResponse", **{k: v for k, v in values.items() if k in known}
    )


def broker_answer(version: int, topics: list[tuple[str, list[Any]]], throttle_ms: int) -> Any:
    module = response_module(0, version)
    responses = tuple(
        make(module, "TopicProduceResponse", name=name, partition_responses=tuple(parts))
        for name, parts in topics
    )
    fields: dict[str, Any] = {
        "responses": responses,
        "throttle_time": timedelta(milliseconds=throttle_ms),
    }
    if version >= 10:
        endpoint = make(module, "NodeEndpoint", node_id=0, host="10.0.0.9", port=9092, rack=None)
        fields["node_endpoints"] = (endpoint,)
    return make(module, "ProduceResponse", **fields)


def rewritten(answer: Any, version: int, throttle_ms: int) -> Any:
    raw = rewrite_produce_response(
        encoded(answer), version, rename=NAMESPACE.local, throttle_time_ms=throttle_ms
    )
    assert raw is not None
    body = b"".join(raw.parts)
    assert len(body) == raw.size
    return decode_response(0, version, memoryview(body), 0)


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_the_tenants_topics_are_renamed_others_dropped_and_partitions_kept(version: int) -> None:
    module = response_module(0, version)
    orders = [partition(module, version, i) for i in range(4)]
    audit = [partition(module, version, 9)]
    answer = broker_answer(
        version,
        [
            ("acme_orders", orders),
            ("bolt_orders", [partition(module, version, 0)]),
            ("acme_audit", audit),
        ],
        throttle_ms=5,
    )
    got = rewritten(answer, version, throttle_ms=0)
    assert [t.name for t in got.responses] == ["orders", "audit"]
    assert got.responses[0].partition_responses == tuple(orders)
    assert got.responses[1].partition_responses == tuple(audit)
    assert got.throttle_time == timedelta(milliseconds=5)  # the broker's, the larger
    if version >= 10:
        assert got.node_endpoints == ()  # the broker's own addresses are not passed on


@pytest.mark.parametrize("version", [3, 9, 12])
def test_the_gateways_throttle_wins_when_it_is_larger(version: int) -> None:
    module = response_module(0, version)
    answer = broker_answer(version, [("acme_t", [partition(module, version, 1)])], throttle_ms=5)
    assert rewritten(answer, version, throttle_ms=800).throttle_time == timedelta(milliseconds=800)


@pytest.mark.parametrize("version", [8, 9, 12])
@pytest.mark.parametrize("field", ["error_message", "record_errors"])
def test_an_answer_with_a_message_to_scrub_takes_the_kio_path(version: int, field: str) -> None:
    module = response_module(0, version)
    if field == "error_message":
        extra: dict[str, Any] = {"error_message": "bolt_secret is not acme_t"}
    else:
        error = make(
            module, "BatchIndexAndErrorMessage", batch_index=0, batch_index_error_message=None
        )
        extra = {"record_errors": (error,)}
    answer = broker_answer(
        version,
        [("acme_t", [partition(module, version, 1), partition(module, version, 2, **extra)])],
        throttle_ms=0,
    )
    assert (
        rewrite_produce_response(
            encoded(answer), version, rename=NAMESPACE.local, throttle_time_ms=0
        )
        is None
    )
