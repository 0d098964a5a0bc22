"""Attacks on a partition's producer state through the gateway.

A tenant that tries to hang its partitions' last stable offset: a Produce
carrying a transactional batch but no transactional id (so the gateway has no id to authorize and
the leader nothing to verify with a coordinator), and one whose transactional batches name two
producers. Written, the first would open a transaction no coordinator knows and no marker ever
closes: every read_committed consumer of the partition would stop at it for good (and so would
everything else that waits for the LSO).

Defended (docs/transactions.md, `brokers/handlers/produce_txn_rules.py`): every partition of such a
request is refused, TRANSACTIONAL_ID_AUTHORIZATION_FAILED and INVALID_PRODUCER_ID_MAPPING, as
Kafka answers, and nothing is written; a record produced afterwards reaches a read_committed
consumer.

A tenant that writes a batch of a new producer id with every request, each kept by the partition
for `producer.id.expiration.ms` (a day) at about a kilobyte: the broker grew without bound.
Defended (`pier.producer.state.max.producers`, docs/transactions.md "Limits"): the partition holds
at most 1,000 producers, the longest-known idle ones forgotten first, as DescribeProducers shows.
Real broker and `pier gateway`, hand-made Produce v9 and DescribeProducers, confluent-kafka."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from brokers.log.producer_state.manager import DEFAULT_MAX_PRODUCERS
from brokers.records.builder import build_batch
from brokers.wire.entities import make, request_module, response_module
from tests.e2e.gateway.sasl_wire import login
from tests.e2e.raw_wire import RawConnection, decode_response, frame, request_bytes
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
TENANT, TOPIC = "acme", "ledger"
PRODUCE, VERSION, DESCRIBE_PRODUCERS = 0, 9, 61
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


def idempotent_produce(wire: RawConnection, producer_id: int) -> bytes:
    """One frame of a Produce v9 (acks=1) of a batch of `producer_id` to partition 0."""
    module = request_module(PRODUCE, VERSION)
    records = build_batch([(None, b"x" * 100)], producer_id=producer_id, producer_epoch=0,
                          base_sequence=0)  # fmt: skip
    data = (make(module, "PartitionProduceData", index=0, records=records),)
    request = make(
        module,
        "ProduceRequest",
        transactional_id=None,
        acks=1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(make(module, "TopicProduceData", name=TOPIC, partition_data=data),),
    )
    return frame(request_bytes(request, wire.correlation_id()))


def producers_of_partition_0(wire: RawConnection) -> set[int]:
    module = request_module(DESCRIBE_PRODUCERS, 0)
    wanted = make(module, "TopicRequest", name=TOPIC, partition_indexes=(0,))
    request = make(module, "DescribeProducersRequest", topics=(wanted,))
    response = wire.call(request, response_module(DESCRIBE_PRODUCERS, 0).DescribeProducersResponse)
    ((partition,),) = (topic.partitions for topic in response.topics)
    assert partition.error_code == 0, partition
    return {int(p.producer_id) for p in partition.active_producers}


def test_a_flood_of_producer_ids_is_held_to_the_cap(stack: GatewayStack) -> None:
    flood = DEFAULT_MAX_PRODUCERS + 500
    answer_cls = response_module(PRODUCE, VERSION).ProduceResponse
    with login(stack, TENANT) as wire:
        for start in range(0, flood, 250):  # pipelined, 250 requests at a time
            ids = range(1_000_000 + start, 1_000_000 + min(start + 250, flood))
            wire.send(b"".join(idempotent_produce(wire, pid) for pid in ids))
            for _ in ids:
                _, answer = decode_response(answer_cls, wire.read_frame(TIMEOUT_S))
                assert answer.responses[0].partition_responses[0].error_code == 0
        known = producers_of_partition_0(wire)
    assert len(known) <= DEFAULT_MAX_PRODUCERS
    assert 1_000_000 + flood - 1 in known, "the newest producer is known"
    assert 1_000_000 not in known, "the longest-known idle one was forgotten"
