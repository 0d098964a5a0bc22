"""A partition is promised the 1 descriptor it costs until it holds it: the budget counts a
partition that does not hold it now (a deferred log, a segment made active again that reopens
its file at its next read or write) as taken, so a second CreateTopics is never promised the first
topic's descriptors again (H5's review of s35: 43 of 56 first appends failed with EMFILE when a
partition cost 4 and an empty one held 3). New and reloaded partitions hold theirs from the
start. A standalone broker; the budget's open count is fixed, so only what the registry says was
promised moves the answer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from brokers.common.descriptors import DescriptorBudget, OpenDescriptors, Promised, promised_to
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.test_descriptor_limit import broker_with_budget, create
from tests.unit.log.partition_helpers import append, make_batch

pytestmark = pytest.mark.unit
LIMIT = 200
OPEN = 100  # 200 - 100 - 64 reserved - promised: 36 with none promised, 31 with 5


@dataclass
class FakeLog:
    descriptors_held: int


def test_promised_descriptors_count_as_taken() -> None:
    budget = DescriptorBudget(lambda: LIMIT, count_kinds=lambda: OpenDescriptors(OPEN, 0))
    assert budget.partitions_available() == 36
    assert budget.partitions_available(promised=Promised(5, lambda: 5)) == 31
    assert budget.partitions_available(promised=Promised(8, lambda: 1)) == 35  # the exact count
    cheap = DescriptorBudget(lambda: 10_000, lambda: 100, count_at_most=lambda: 1_000)
    unasked = Promised(1_000, lambda: pytest.fail("counted, though the bounds proved it fits"))
    cheap.check(1_000, "small", promised=unasked)  # 10,000 - 1,000 - 1,000 - 1,000


def test_a_log_that_does_not_hold_its_descriptor_and_a_deferred_one_are_promised_it() -> None:
    logs = [FakeLog(1), FakeLog(0), FakeLog(1), FakeLog(0)]
    promised = promised_to(6, lambda: logs, deferred=2)
    assert promised.count() == 2 + 2  # two logs without their descriptor, two not opened yet
    assert promised.at_most == 6  # what the registry knows at once: every partition's


def test_new_and_reloaded_partitions_hold_their_descriptor_so_nothing_is_promised(
    tmp_path: Path,
) -> None:
    budget = DescriptorBudget(lambda: LIMIT, lambda: OPEN)
    with broker_with_budget(tmp_path, budget) as broker:
        assert create(broker, "a", 5).error_code == ErrorCode.none
        partition = broker.replicas.find("a", 0)
        assert partition is not None and partition.log.descriptors_held == 1
        result = create(broker, "b", 37)
        assert "allows 36 more partitions" in result.error_message, result
    with broker_with_budget(tmp_path, budget) as broker:  # restarted: "a" reloaded from disk
        partition = broker.replicas.find("a", 0)
        assert partition is not None and partition.log.descriptors_held == 1
        append(partition.log, make_batch())
        assert partition.log.descriptors_held == 1  # appends open nothing more
        result = create(broker, "b", 37)
        assert "allows 36 more partitions" in result.error_message, result
        assert create(broker, "b", 36).error_code == ErrorCode.none
