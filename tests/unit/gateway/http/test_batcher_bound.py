"""The HTTP batcher's state per partition is bounded (`gateway/http/batcher.py`): past its limit
every idle partition is forgotten and the producer id retired, so a partition seen again starts
under a new id at sequence 0 and never meets a sequence the broker already has under the old
one (which would fail its records OUT_OF_ORDER_SEQUENCE_NUMBER). Also the HTTP round robin's
per-topic counters. A scripted broker: each batch's producer id and sequence are read back."""

from __future__ import annotations

import asyncio

import pytest

from brokers.client.metadata import TopicPartition
from brokers.client.producer import ProduceResult
from brokers.records.batch import parse_header
from gateway.http.batcher import PartitionBatcher, ProducerIds
from gateway.http.records import RoundRobin

pytestmark = pytest.mark.unit


def test_idle_partitions_are_forgotten_under_a_new_producer_id() -> None:
    async def scenario() -> None:
        sent: list[tuple[str, int, int]] = []  # (topic, producer id, base sequence)
        ids = iter(range(100, 200))

        async def init() -> tuple[int, int]:
            return next(ids), 0

        async def send(tp: TopicPartition, data: bytes, retry: bool) -> ProduceResult:
            header = parse_header(memoryview(data))
            sent.append((tp.topic, header.producer_id, header.base_sequence))
            return ProduceResult(0, -1, 0)

        batcher = PartitionBatcher(send, ProducerIds(init), max_partitions=3)

        async def one(topic: str) -> None:
            await batcher.append(TopicPartition(topic, 0), (None, b"v", (), 0))

        for topic in ("a", "b", "c", "a"):
            await one(topic)
        assert len(batcher._partitions) == 3
        await one("d")  # a fourth: the three idle ones go, and the id with them
        assert list(batcher._partitions) == [TopicPartition("d", 0)]
        await one("a")  # seen again: a new id, from sequence 0
        assert sent == [
            ("a", 100, 0),
            ("b", 100, 0),
            ("c", 100, 0),
            ("a", 100, 1),
            ("d", 101, 0),
            ("a", 101, 0),
        ]

    asyncio.run(scenario())


def test_round_robin_counters_are_bounded() -> None:
    rr = RoundRobin()
    rr.MAX_TOPICS = 2
    assert [rr.partition("a", 3), rr.partition("a", 3), rr.partition("b", 3)] == [0, 1, 0]
    assert rr.partition("c", 3) == 0  # a third topic: the counters start again
    assert rr.partition("a", 3) == 0
    assert len(rr._next) == 2
