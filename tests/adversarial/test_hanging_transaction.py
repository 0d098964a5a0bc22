"""A tenant that tries to hang its partitions' last stable offset through the gateway: a Produce
carrying a transactional batch but no transactional id (so the gateway has no id to authorize and
the leader nothing to verify with a coordinator), and one whose transactional batches name two
producers. Written, the first would open a transaction no coordinator knows and no marker ever
closes: every read_committed consumer of the partition would stop at it for good (and so would
everything else that waits for the LSO).

Defended (docs/transactions.md, `brokers/handlers/produce_txn_rules.py`): every partition of such a
request is refused, TRANSACTIONAL_ID_AUTHORIZATION_FAILED and INVALID_PRODUCER_ID_MAPPING, as
Kafka answers, and nothing is written; a record produced afterwards reaches a read_committed
consumer. Real broker and `pier gateway`, a hand-made Produce v9 and confluent-kafka."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from brokers.records.builder import build_batch
from brokers.wire.entities import make, request_module, response_module
from tests.e2e.gateway.sasl_wire import login
from tests.e2e.raw_wire import RawConnection
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
TENANT, TOPIC = "acme", "ledger"
PRODUCE, VERSION = 0, 9
TIMEOUT_S = 30.0
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, INVALID_PRODUCER_ID_MAPPING = 53, 49


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with GatewayStack(Path(tmp_path_factory.mktemp("hanging-txn"))) as s:
        admin = AdminClient(s.client_config(TENANT))
        for future in admin.create_topics([NewTopic(TOPIC, 2, 1)]).values():
            future.result(TIMEOUT_S)
        yield s


def transactional_batch(producer_id: int) -> bytes:
    return build_batch(
        [(None, b"never-committed")],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=0,
        is_transactional=True,
    )


def produce(wire: RawConnection, transactional_id: str | None, batches: list[bytes]) -> list[int]:
    """Each partition's error code for one Produce v9 (partition i gets batches[i])."""
    module = request_module(PRODUCE, VERSION)
    data = tuple(
        make(module, "PartitionProduceData", index=i, records=records)
        for i, records in enumerate(batches)
    )
    request = make(
        module,
        "ProduceRequest",
        transactional_id=transactional_id,
        acks=-1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(make(module, "TopicProduceData", name=TOPIC, partition_data=data),),
    )
    answer = wire.call(request, response_module(PRODUCE, VERSION).ProduceResponse)
    (topic,) = answer.responses
    return [p.error_code for p in sorted(topic.partition_responses, key=lambda p: p.index)]


def read_committed(stack: GatewayStack, wanted: set[bytes]) -> list[bytes]:
    consumer = Consumer(
        {
            **stack.client_config(TENANT),
            "group.id": f"rc-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([TOPIC])
    seen: list[bytes] = []
    try:

        def arrived() -> bool:
            seen.extend(m.value() or b"" for m in consumer.consume(100, 0.5) if not m.error())
            return wanted <= set(seen)

        wait_until(arrived, what="the later records read committed", timeout=TIMEOUT_S)
    finally:
        consumer.close()
    return seen


def test_a_tenant_cannot_open_a_transaction_no_coordinator_knows(stack: GatewayStack) -> None:
    with login(stack, TENANT) as wire:
        refused = [TRANSACTIONAL_ID_AUTHORIZATION_FAILED] * 2
        assert produce(wire, None, [transactional_batch(7), transactional_batch(7)]) == refused
        two = [transactional_batch(7), transactional_batch(8)]
        assert produce(wire, "tx-two", two) == [INVALID_PRODUCER_ID_MAPPING] * 2
    producer = Producer({**stack.client_config(TENANT), "enable.idempotence": True})
    for partition in (0, 1):
        producer.produce(TOPIC, b"after-%d" % partition, partition=partition)
    assert producer.flush(TIMEOUT_S) == 0
    seen = read_committed(stack, {b"after-0", b"after-1"})  # times out behind a hung LSO
    assert b"never-committed" not in seen
