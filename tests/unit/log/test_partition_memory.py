"""What a partition's log shares or makes late to stay small (issue 25, 10,000 partitions): one
`LogConfig` per distinct configuration, and empty transaction state shared until a partition has
a transaction — never leaking one partition's entries into another's."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokers.log.config import LogConfig
from brokers.log.producer_state.transactions import CompletedTxn, UnstableTxns
from brokers.log.txn_index import AbortedTxn, TransactionIndex

pytestmark = pytest.mark.unit
BROKER = {"log.segment.bytes": "2097152", "log.retention.hours": "48"}


def test_equal_configurations_are_one_shared_instance_and_an_alter_makes_a_new_one() -> None:
    first = LogConfig.from_properties({"retention.ms": "1000"}, BROKER)
    second = LogConfig.from_properties({"retention.ms": "1000"}, dict(BROKER))
    assert first is second
    assert first.segment_bytes == 2097152 and first.retention_ms == 1000
    altered = LogConfig.from_properties({"retention.ms": "2000"}, BROKER)
    assert altered is not first and altered.retention_ms == 2000
    assert first.retention_ms == 1000  # the shared one is untouched


def test_an_entry_in_one_transaction_index_stays_out_of_the_others(tmp_path: Path) -> None:
    used = TransactionIndex(tmp_path / "a.txnindex", 0)
    idle = TransactionIndex(tmp_path / "b.txnindex", 0)
    used.append(AbortedTxn(7, 0, 5, 6))
    assert len(used) == 1 and used.last_offset == 5
    assert len(idle) == 0 and idle.last_offset is None and idle.entries == ()
    idle.restore(0)
    used.restore(0)
    assert len(used) == 0
    fresh = TransactionIndex(tmp_path / "c.txnindex", 0)
    assert fresh.collect(0, 100) == ([], False)


def test_completed_transactions_of_one_partition_are_its_own() -> None:
    busy, quiet = UnstableTxns(), UnstableTxns()
    assert quiet.unreplicated == () and quiet.first_unstable_offset() is None
    busy.begin(1, 10)
    busy.complete(CompletedTxn(1, 10, 20, aborted=False))
    assert busy.unreplicated == (CompletedTxn(1, 10, 20, aborted=False),)
    assert busy.first_unstable_offset() == 10
    assert quiet.unreplicated == ()
    busy.on_high_watermark(21)
    assert not busy.unreplicated and busy.first_unstable_offset() is None
    busy.clear()
    busy.complete(CompletedTxn(2, 30, 40, aborted=True))
    assert busy.first_unstable_offset() == 30
