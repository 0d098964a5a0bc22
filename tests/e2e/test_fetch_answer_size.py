"""A Fetch answers with as many whole batches as the client's limits allow, in one response
(issue 25: the 1 KiB consume rows depend on answers as large as Kafka's — the Java consumer's
1 MiB `max.partition.fetch.bytes`, librdkafka's 8 MiB — not one batch per round trip).

A real broker holds 6 MiB in 64 KiB batches of one record each (incompressible, stored as sent);
raw Fetch v12 requests read them over the socket (the answer's records leave by sendfile) and
each answer's record bytes are walked batch by batch. Limits, as Kafka's: `partition_max_bytes`
per partition, `max_bytes` per response, and at least one whole batch even when it is larger
(KIP-74).
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import struct
from typing import Any

import pytest
from confluent_kafka import Producer
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v12.response import FetchResponse

from infra.stack import BrokerProcess
from tests.e2e.raw_wire import RawConnection
from tests.e2e.request_fuzz import plain_entity

pytestmark = pytest.mark.e2e

KiB, MiB = 1024, 1024 * 1024
RECORD = 64 * KiB
RECORDS = 96  # 6 MiB
_BATCH_HEAD = struct.Struct(">qi")  # base offset, batch length (the bytes after these 12)


def fill(broker: BrokerProcess, topic: str) -> None:
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "linger.ms": 0,
            "batch.num.messages": 1,  # one record per batch: batch boundaries every ~64 KiB
            "compression.type": "none",
        }
    )
    for _ in range(RECORDS):
        producer.produce(topic, os.urandom(RECORD))
    assert producer.flush(60) == 0


def fetch(topic: str, partition_max_bytes: int, max_bytes: int) -> Any:
    partition = dataclasses.replace(
        plain_entity(FetchPartition),
        partition=0,
        fetch_offset=0,
        partition_max_bytes=partition_max_bytes,
        log_start_offset=-1,
    )
    return dataclasses.replace(
        plain_entity(FetchRequest),
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=100),
        min_bytes=1,
        max_bytes=max_bytes,
        session_epoch=-1,
        topics=(
            dataclasses.replace(plain_entity(FetchTopic), topic=topic, partitions=(partition,)),
        ),
        forgotten_topics_data=(),
    )


def batches(records: bytes) -> list[tuple[int, int]]:
    """(base offset, size) of each batch; fails on a batch cut short."""
    found = []
    position = 0
    while position < len(records):
        base_offset, length = _BATCH_HEAD.unpack_from(records, position)
        size = _BATCH_HEAD.size + length
        assert position + size <= len(records), f"batch at {position} cut short"
        found.append((base_offset, size))
        position += size
    return found


def answer(broker: BrokerProcess, topic: str, partition_max_bytes: int, max_bytes: int) -> bytes:
    with RawConnection(broker.host, broker.port) as connection:
        response = connection.call(fetch(topic, partition_max_bytes, max_bytes), FetchResponse)
    (data,) = response.responses[0].partitions
    assert data.error_code == 0
    return bytes(data.records or b"")


@pytest.fixture(scope="module")
def stored(module_broker: BrokerProcess) -> str:
    topic = "fetch-answer-size"
    fill(module_broker, topic)
    return topic


def test_an_answer_holds_as_many_whole_batches_as_the_partition_limit_allows(
    module_broker: BrokerProcess, stored: str
) -> None:
    records = answer(module_broker, stored, partition_max_bytes=4 * MiB, max_bytes=50 * MiB)
    found = batches(records)
    largest = max(size for _, size in found)
    assert 4 * MiB - largest < len(records) <= 4 * MiB, len(records)
    assert [offset for offset, _ in found] == list(range(len(found)))


def test_the_response_limit_cuts_below_the_partition_limit(
    module_broker: BrokerProcess, stored: str
) -> None:
    records = answer(module_broker, stored, partition_max_bytes=8 * MiB, max_bytes=1 * MiB)
    found = batches(records)
    assert 1 * MiB - max(size for _, size in found) < len(records) <= 1 * MiB, len(records)


def test_a_limit_below_one_batch_still_gets_the_first_whole_batch(
    module_broker: BrokerProcess, stored: str
) -> None:
    records = answer(module_broker, stored, partition_max_bytes=1 * KiB, max_bytes=50 * MiB)
    ((offset, size),) = batches(records)
    assert offset == 0 and size > RECORD
