"""Reading a `__transaction_state` partition back: the last record per id wins, a tombstone
deletes it, keys of unknown versions are skipped (as Kafka does), unreadable records are counted
and skipped without losing the rest of the partition."""

from __future__ import annotations

import asyncio

import pytest

from brokers.coordinator.transactions.loader import load_partition
from brokers.coordinator.transactions.metadata import TxnState
from brokers.coordinator.transactions.records import TransactionLogValue, encode_key, encode_value
from brokers.records.builder import build_batch
from tests.unit.coordinator.transactions.harness import MemoryStateTopic

pytestmark = pytest.mark.unit


def value(
    status: int, epoch: int, partitions: tuple[tuple[str, tuple[int, ...]], ...] | None
) -> bytes:
    return encode_value(TransactionLogValue(9, epoch, 60_000, status, partitions, 5, 1))


def test_last_record_wins_tombstones_delete_unknown_and_corrupt_records_are_skipped() -> None:
    topic = MemoryStateTopic(partitions=1)

    async def scenario() -> None:
        batches: list[list[tuple[bytes, bytes | None]]] = [
            [(encode_key("a"), value(0, 0, None)), (encode_key("b"), value(0, 0, None))],
            [(encode_key("a"), value(1, 0, (("t", (0, 2)),)))],
            [(encode_key("b"), None)],
            [(b"\x00\x07future-key", b"whatever")],  # a key version from a newer Kafka
            [(encode_key("c"), b"\x00\x00\x01")],  # a truncated value
        ]
        for records in batches:
            await topic.append(0, build_batch(records))
        loaded = await load_partition(topic, 0)
        assert set(loaded.transactions) == {"a"}
        a = loaded.transactions["a"]
        assert (a.state, a.partitions, a.producer_epoch) == (
            TxnState.ONGOING,
            {("t", 0), ("t", 2)},
            0,
        )
        assert loaded.skipped == 1

    asyncio.run(scenario())
