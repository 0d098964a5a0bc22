"""A tenant's fetch answers are held within its byte budget (issue 21, item 4: no one tenant's
traffic grows the gateway by more than its budget).

Tenant `acme` stores 40 MiB in one partition, then opens connections that each send a Fetch of
everything (`max_bytes` 64 MiB) and never read the answer. Each answer would otherwise be held in
the gateway whole (320 MiB for eight); with the answers' bytes held from the tenant's budget
(`queued.max.request.bytes`, 16 MiB here) and a Fetch's `max_bytes` cut to what was held, the
gateway's growth stays within the budget and some slack. A well-behaved reader is then still
served in full. Real gateway and broker; raw sockets for the attacker; VmRSS of the gateway.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

from tenancy.domain import DEFAULT_LIMITS
from tests.adversarial.gateway_probes import rss_bytes
from tests.e2e.gateway.sasl_wire import login
from tests.e2e.raw_wire import RawConnection, frame, request_bytes
from tests.e2e.request_fuzz import plain_entity
from tests.gateway_stack import OPERATOR, GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

KiB, MiB = 1024, 1024 * 1024
TENANT_BUDGET = 16 * MiB
STORED = 40 * MiB
RECORD = 512 * KiB
READERS = 8
SLACK = 24 * MiB  # the interpreter's own growth under load (allocator arenas, socket buffers)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    settings = {"queued.max.request.bytes": str(TENANT_BUDGET), "max.connections.per.ip": "64"}
    with GatewayStack(tmp_path_factory.mktemp("fetch-budget"), gateway_settings=settings) as stack:
        with stack.store() as store:
            limits = dataclasses.replace(DEFAULT_LIMITS, max_request_bytes=8 * MiB)
            store.update_tenant("acme", limits=limits, actor=OPERATOR)
        yield stack


def fill(stack: GatewayStack, topic: str) -> None:
    producer = Producer(
        {
            **stack.client_config("acme"),
            "message.max.bytes": 2 * RECORD,
            "linger.ms": 5,
            "compression.type": "none",
        }
    )
    for _ in range(STORED // RECORD):
        producer.produce(topic, os.urandom(RECORD))  # incompressible: stored as sent
    assert producer.flush(60) == 0


def fetch_everything(topic: str) -> Any:
    partition = dataclasses.replace(
        plain_entity(FetchPartition), partition=0, fetch_offset=0, partition_max_bytes=64 * MiB
    )
    return dataclasses.replace(
        plain_entity(FetchRequest),
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=100),
        min_bytes=1,
        max_bytes=64 * MiB,
        session_epoch=-1,
        topics=(
            dataclasses.replace(plain_entity(FetchTopic), topic=topic, partitions=(partition,)),
        ),
        forgotten_topics_data=(),
    )


def read_all(stack: GatewayStack, topic: str) -> int:
    consumer = Consumer(
        {
            **stack.client_config("acme"),
            "group.id": f"g-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "fetch.message.max.bytes": 2 * RECORD,
        }
    )
    consumer.subscribe([topic])
    seen = 0
    try:

        def all_read() -> bool:
            nonlocal seen
            message = consumer.poll(1.0)
            if message is not None and message.error() is None:
                seen += 1
            return seen == STORED // RECORD

        wait_until(all_read, what="every record read back", timeout=60, interval=0)
    finally:
        consumer.close()
    return seen


def test_fetch_answers_that_are_never_read_stay_within_the_tenants_budget(
    stack: GatewayStack,
) -> None:
    topic = f"hoard-{uuid.uuid4().hex[:8]}"
    fill(stack, topic)
    before = rss_bytes(stack)
    hoarders: list[RawConnection] = [login(stack, "acme") for _ in range(READERS)]
    peak = before
    try:
        for connection in hoarders:  # each asks for everything and never reads the answer
            connection.send(frame(request_bytes(fetch_everything(topic), 1)))
        samples = 0

        def sampled_a_while() -> bool:  # the answers come back within the fetches' max_wait
            nonlocal peak, samples
            peak = max(peak, rss_bytes(stack))
            samples += 1
            return samples >= 60

        wait_until(sampled_a_while, what="the gateway sampled", timeout=60, interval=0.05)
    finally:
        for connection in hoarders:
            connection.close()
    assert peak - before < TENANT_BUDGET + SLACK, f"grew {(peak - before) / MiB:.0f} MiB"
    assert read_all(stack, topic) == STORED // RECORD  # a reader that reads is served in full
