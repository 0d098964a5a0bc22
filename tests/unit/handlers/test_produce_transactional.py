"""Produce of transactional batches on a real standalone Broker: the log's refusals reach the
producer as Kafka's codes (INVALID_TXN_STATE, INVALID_PRODUCER_EPOCH), never as
UNKNOWN_SERVER_ERROR; and the one mapper knows TRANSACTION_COORDINATOR_FENCED."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokers.app.runtime import Broker
from brokers.handlers import produce
from brokers.handlers.errors import error_code_for
from brokers.log.errors import TransactionCoordinatorFencedError
from brokers.records.builder import build_batch
from brokers.records.control import EndTxnMarker
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.admin_harness import call, entity, routed, standalone_broker

pytestmark = pytest.mark.unit
VERSION = 9


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    # Raw producer 7 has no transaction at a coordinator: these tests are about the log's own
    # refusals, so the leader's KIP-890 verification (tests/integration/transactions/
    # test_produce_verification.py) is off.
    with standalone_broker(tmp_path, {"transaction.partition.verification.enable": "false"}) as b:
        b.topics.create_topic("t", 1, 1, {})
        yield b


def batch(*, epoch: int, sequence: int, transactional: bool) -> bytes:
    return build_batch(
        [(None, b"v")],
        producer_id=7,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=transactional,
    )


def send(broker: Broker, records: bytes) -> ErrorCode:
    data = entity(0, VERSION, "PartitionProduceData", index=0, records=records)
    topic = entity(0, VERSION, "TopicProduceData", name="t", partition_data=(data,))
    request = entity(
        0,
        VERSION,
        "ProduceRequest",
        transactional_id="tx",
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(topic,),
    )
    response = call(routed(broker, produce.API_KEY), VERSION, request)
    return ErrorCode(response.responses[0].partition_responses[0].error_code)


def test_transactional_refusals_have_their_kafka_codes(broker: Broker) -> None:
    assert send(broker, batch(epoch=1, sequence=0, transactional=True)) == ErrorCode.none
    # The transaction is open: a plain batch of the same producer is refused.
    assert send(broker, batch(epoch=1, sequence=1, transactional=False)) == (
        ErrorCode.invalid_txn_state
    )
    broker.replicas.get("t", 0).append_marker(7, 2, EndTxnMarker(False, 0))  # fenced: epoch 2
    assert send(broker, batch(epoch=1, sequence=1, transactional=True)) == (
        ErrorCode.invalid_producer_epoch
    )


def test_a_fenced_coordinator_maps_to_its_code() -> None:
    assert error_code_for(TransactionCoordinatorFencedError("epoch 3 < 4")) == (
        ErrorCode.transaction_coordinator_fenced
    )
