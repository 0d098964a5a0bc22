"""The leader's AddPartitionsToTxn v4 (verify_only) as it goes on the wire and its answer read
back per partition: the partitions grouped by topic, a top-level error applying to every
partition, and a partition the answer leaves out never taken as verified."""

from __future__ import annotations

from typing import Any

import pytest

from brokers.app.txn_verification import (
    ADD_PARTITIONS_TO_TXN,
    ADD_VERSION,
    VERIFY_VERSION,
    _answers,
    _request,
)
from brokers.client.messages import make
from brokers.handlers.build import response_module
from brokers.wire.errors import ErrorCode

pytestmark = pytest.mark.unit
PARTITIONS = [("a", 0), ("a", 2), ("b", 1)]


def response(error: ErrorCode, results: dict[tuple[str, int], ErrorCode]) -> Any:
    module = response_module(ADD_PARTITIONS_TO_TXN, VERIFY_VERSION)
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), code in results.items():
        entry = make(
            module, "AddPartitionsToTxnPartitionResult", partition_index=index,
            partition_error_code=code,
        )  # fmt: skip
        by_topic.setdefault(topic, []).append(entry)
    topics = tuple(
        make(module, "AddPartitionsToTxnTopicResult", name=name, results_by_partition=tuple(p))
        for name, p in by_topic.items()
    )
    result = make(module, "AddPartitionsToTxnResult", transactional_id="tx", topic_results=topics)
    return make(
        module, "AddPartitionsToTxnResponse", throttle_time=0, error_code=error,
        results_by_transaction=(result,),
    )  # fmt: skip


def test_the_request_is_one_verify_only_transaction_grouped_by_topic() -> None:
    request = _request("tx", 42, 3, PARTITIONS, add=False)
    assert int(request.__version__) == VERIFY_VERSION
    (txn,) = request.transactions
    assert (txn.transactional_id, txn.producer_id, txn.producer_epoch) == ("tx", 42, 3)
    assert txn.verify_only is True
    assert {t.name: tuple(t.partitions) for t in txn.topics} == {"a": (0, 2), "b": (1,)}


def test_a_tv2_leader_adds_the_partitions_with_v5() -> None:
    """KIP-890 part 2: the partition leader adds a TV2 producer's partitions (not verify-only)."""
    request = _request("tx", 42, 3, PARTITIONS, add=True)
    assert int(request.__version__) == ADD_VERSION
    (txn,) = request.transactions
    assert txn.verify_only is False
    assert {t.name: tuple(t.partitions) for t in txn.topics} == {"a": (0, 2), "b": (1,)}


def test_per_partition_answers_are_read_back() -> None:
    answers = {("a", 0): ErrorCode.none, ("a", 2): ErrorCode.transaction_abortable}
    answers[("b", 1)] = ErrorCode.none
    assert _answers(response(ErrorCode.none, answers), "tx", PARTITIONS) == answers


def test_a_partition_left_out_is_not_verified() -> None:
    read = _answers(response(ErrorCode.none, {("a", 0): ErrorCode.none}), "tx", PARTITIONS)
    assert read[("a", 0)] == ErrorCode.none
    assert read[("a", 2)] == read[("b", 1)] == ErrorCode.unknown_server_error


def test_a_top_level_error_applies_to_every_partition() -> None:
    read = _answers(response(ErrorCode.not_coordinator, {}), "tx", PARTITIONS)
    assert set(read.values()) == {ErrorCode.not_coordinator}
