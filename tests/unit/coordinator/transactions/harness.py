"""Drive a `TransactionCoordinator` without a broker: `__transaction_state` as lists of batches,
a marker sender that records what it was asked (and can be held or made to fail), producer ids
from a counter, and a manual clock."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from brokers.common.clock import ManualClock
from brokers.coordinator.transactions.config import TransactionConfig
from brokers.coordinator.transactions.coordinator import TransactionCoordinator
from brokers.coordinator.transactions.markers import TxnMarker
from brokers.coordinator.transactions.records import decode_key, decode_value
from brokers.records.batch import set_base_offset
from brokers.records.builder import read_batch
from brokers.wire.errors import ErrorCode

PARTITIONS = 4
OFFSETS_PARTITIONS = 3
TopicPartition = tuple[str, int]


class MemoryStateTopic:
    """`StateTopic` over lists of batches; `fail_with` makes appends fail, `gate` holds them."""

    def __init__(self, partitions: int = PARTITIONS) -> None:
        self.partitions = partitions
        self.logs: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.fail_with: Exception | None = None
        self.gate: asyncio.Event | None = None

    def partition_count(self) -> int:
        return self.partitions

    async def append(self, partition: int, batch: bytes) -> int:
        if self.gate is not None:
            await self.gate.wait()
        if self.fail_with is not None:
            raise self.fail_with
        log = self.logs[partition]
        base = sum(read_batch(b)[0].last_offset_delta + 1 for b in log)
        stored = bytearray(batch)
        set_base_offset(stored, 0, base)
        log.append(bytes(stored))
        return base + read_batch(batch)[0].last_offset_delta

    def read_batches(self, partition: int, from_offset: int) -> Iterator[bytes]:
        return iter(list(self.logs[partition]))

    def records(self, partition: int) -> list[tuple[str | None, Any]]:
        """(transactional id, decoded value or None) of every record, in order."""
        return [
            (decode_key(r.key or b""), decode_value(r.value))
            for b in self.logs[partition]
            for r in read_batch(b)[1]
        ]


@dataclass
class FakeMarkers:
    """A `MarkerSender`: records markers; `answers` overrides codes; `gate` holds sends."""

    sent: list[TxnMarker] = field(default_factory=list)
    answers: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
    gate: asyncio.Event | None = None

    async def send(self, marker: TxnMarker) -> dict[TopicPartition, ErrorCode]:
        self.sent.append(marker)
        if self.gate is not None:
            await self.gate.wait()
        return {tp: self.answers.get(tp, ErrorCode.none) for tp in marker.partitions}


class CountingIds:
    def __init__(self, start: int = 1000) -> None:
        self.next = start

    def next_producer_id(self) -> int:
        self.next += 1
        return self.next - 1


@dataclass
class Txn:
    """One coordinator and its fakes."""

    coordinator: TransactionCoordinator
    topic: MemoryStateTopic
    markers: FakeMarkers
    clock: ManualClock
    ids: CountingIds
    known_topics: set[str]

    async def settle(self) -> None:
        """Let background completions (markers, Complete*) finish."""
        await asyncio.wait_for(self.coordinator.completion.wait_idle(), 5)

    def state_of(self, transactional_id: str) -> str:
        described = self.coordinator.describe(transactional_id)
        assert described.error == ErrorCode.none, described
        return described.state


def build(
    topic: MemoryStateTopic | None = None,
    markers: FakeMarkers | None = None,
    clock: ManualClock | None = None,
    config: TransactionConfig | None = None,
    known_topics: set[str] | None = None,
) -> Txn:
    topic = topic or MemoryStateTopic()
    markers = markers or FakeMarkers()
    clock = clock or ManualClock()
    ids = CountingIds()
    known = known_topics if known_topics is not None else {"t", "u", "__consumer_offsets"}
    exists: Callable[[str, int], bool] = lambda name, index: name in known  # noqa: E731
    coordinator = TransactionCoordinator(
        config or TransactionConfig(),
        topic,
        clock,
        producer_ids=ids,
        markers=markers,
        group_partition=lambda group: len(group) % OFFSETS_PARTITIONS,
        partition_exists=exists,
    )
    return Txn(coordinator, topic, markers, clock, ids, known)


@asynccontextmanager
async def running(**kwargs: Any) -> AsyncIterator[Txn]:
    """A coordinator serving every partition (standalone), shut down at the end."""
    txn = build(**kwargs)
    await txn.coordinator.load_partitions(range(txn.topic.partitions))
    try:
        yield txn
    finally:
        await txn.coordinator.shutdown()
