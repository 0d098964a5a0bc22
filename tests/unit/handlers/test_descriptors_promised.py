"""A partition is promised 4 descriptors, but an empty one holds 3 (its `.log`'s write descriptor
opens at the first append): the budget counts the missing one as taken, so a second CreateTopics
is never promised the first topic's write descriptors again (H5's review of s35: 43 of 56 first
appends failed with EMFILE). A standalone broker; the budget's open count is fixed, so only what
the registry says was promised moves the answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokers.common.descriptors import DescriptorBudget, OpenDescriptors, Promised
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.test_descriptor_limit import broker_with_budget, create
from tests.unit.log.partition_helpers import append, make_batch

pytestmark = pytest.mark.unit
LIMIT = 200
OPEN = 100  # (200 - 100 - 64 reserved - promised) // 4: 9 with none promised, 7 with 5..8


def test_promised_descriptors_count_as_taken() -> None:
    budget = DescriptorBudget(lambda: LIMIT, count_kinds=lambda: OpenDescriptors(OPEN, 0))
    assert budget.partitions_available() == 9
    assert budget.partitions_available(promised=Promised(5, lambda: 5)) == 7
    assert budget.partitions_available(promised=Promised(8, lambda: 1)) == 8  # the exact count
    cheap = DescriptorBudget(lambda: 10_000, lambda: 100, count_at_most=lambda: 1_000)
    unasked = Promised(1_000, lambda: pytest.fail("counted, though the bounds proved it fits"))
    cheap.check(1_000, "small", promised=unasked)  # (10,000 - 1,000 - 1,000 - 1,000) // 4


def test_a_new_topic_is_not_promised_an_empty_partition_s_write_descriptor(
    tmp_path: Path,
) -> None:
    budget = DescriptorBudget(lambda: LIMIT, lambda: OPEN)
    with broker_with_budget(tmp_path, budget) as broker:
        assert create(broker, "a", 5).error_code == ErrorCode.none  # 5 write descriptors to come
        result = create(broker, "b", 8)
        assert result.error_code == ErrorCode.policy_violation, result
        assert "allows 7 more partitions" in result.error_message
        partition = broker.replicas.find("a", 0)
        assert partition is not None
        append(partition.log, make_batch())  # its write descriptor is open now: counted as open
        result = create(broker, "b", 9)
        assert "allows 8 more partitions" in result.error_message
        assert create(broker, "b", 8).error_code == ErrorCode.none


def test_a_reloaded_partition_is_promised_every_descriptor_it_does_not_hold(
    tmp_path: Path,
) -> None:
    """After a restart an idle partition holds only its `.log` read descriptor: its `.index` and
    `.timeindex` open at the next index write, its write descriptor at the first append. All 3
    are promised (counting only the write descriptor let a second topic be admitted whose
    descriptors the reloaded partitions then needed: EMFILE at their first writes)."""
    budget = DescriptorBudget(lambda: LIMIT, lambda: OPEN)
    with broker_with_budget(tmp_path, budget) as broker:
        assert create(broker, "a", 5).error_code == ErrorCode.none
    with broker_with_budget(tmp_path, budget) as broker:  # restarted: "a" reloaded from disk
        result = create(broker, "b", 6)  # (200 - 100 - 64 - 5 x 3 promised) // 4 = 5
        assert "allows 5 more partitions" in result.error_message, result
        partition = broker.replicas.find("a", 0)
        assert partition is not None and partition.log.descriptors_held == 1
        append(partition.log, make_batch())  # its write descriptor opens: 2 promised, not 3
        assert partition.log.descriptors_held == 2
        result = create(broker, "b", 6)  # (200 - 100 - 64 - 14) // 4 = 5
        assert "allows 5 more partitions" in result.error_message, result
        for index in range(1, 5):
            p = broker.replicas.find("a", index)
            assert p is not None
            append(p.log, make_batch())
        assert create(broker, "b", 6).error_code == ErrorCode.none  # (200-100-64-10) // 4 = 6
