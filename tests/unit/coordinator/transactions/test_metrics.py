"""The transaction coordinator's metrics, read from a registry as a scrape would: ids per state,
ongoing transactions, commits/aborts/timeouts and partition load times."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from brokers.coordinator.transactions.metrics import TransactionMetricsCollector
from tests.unit.coordinator.transactions.harness import Txn, running

pytestmark = pytest.mark.unit
LOAD = "kafka_server_transaction_coordinator_metrics_partition_load_time"


def value(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


def test_metrics_follow_the_transactions() -> None:
    async def scenario() -> None:
        async with running() as txn:
            registry = CollectorRegistry()
            registry.register(TransactionMetricsCollector(txn.coordinator))
            await exercise(txn, registry)

    asyncio.run(scenario())


async def exercise(txn: Txn, registry: CollectorRegistry) -> None:
    c = txn.coordinator
    assert value(registry, "kafka_coordinator_transaction_ongoing") == 0
    assert value(registry, f"{LOAD}_max") is not None  # every partition was loaded once
    _, a, epoch_a = await c.init_producer_id("a", 60_000)
    _, b, epoch_b = await c.init_producer_id("b", 60_000)
    await c.add_partitions("a", a, epoch_a, [("t", 0)])
    await c.add_partitions("b", b, epoch_b, [("t", 1)])
    assert value(registry, "kafka_coordinator_transaction_ongoing") == 2
    ids = "kafka_coordinator_transaction_transactional_ids"
    assert value(registry, ids, state="Ongoing") == 2
    await c.end_txn("a", a, epoch_a, True)
    await c.end_txn("b", b, epoch_b, False)
    await txn.settle()
    assert value(registry, "kafka_coordinator_transaction_ongoing") == 0
    assert value(registry, ids, state="CompleteCommit") == 1
    assert value(registry, ids, state="CompleteAbort") == 1
    assert value(registry, "kafka_coordinator_transaction_committed_total") == 1
    assert value(registry, "kafka_coordinator_transaction_aborted_total") == 1
    assert value(registry, "kafka_coordinator_transaction_timed_out_total") == 0
    assert value(registry, "kafka_coordinator_transaction_pending_markers") == 0
