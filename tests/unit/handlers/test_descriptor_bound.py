"""The descriptor budget lists `/proc/self/fd` only when the cheap upper bound (the descriptor
table's size) cannot prove a request fits (issue 25: a listing per CreateTopics costs time in
proportion to the descriptors open)."""

from __future__ import annotations

import pytest

from brokers.common.descriptors import (
    DescriptorBudget,
    DescriptorLimitError,
    descriptor_table_size,
    open_descriptors,
)

pytestmark = pytest.mark.unit


def test_the_table_size_bounds_the_descriptors_open() -> None:
    files = [open("/dev/null") for _ in range(300)]  # noqa: SIM115  # closed below
    try:
        size = descriptor_table_size()
        assert size is not None and size >= open_descriptors() >= 300
    finally:
        for f in files:
            f.close()


def listed_counter(count: int, calls: list[int]) -> DescriptorBudget:
    def count_open() -> int:
        calls.append(count)
        return count

    return DescriptorBudget(  # the arithmetic of the tests is a 4-descriptor partition's
        read_limit=lambda: 10_000,
        count_open=count_open,
        count_at_most=lambda: 2_000,
        per_partition=4,
    )


def test_a_request_the_bound_proves_fits_lists_nothing() -> None:
    calls: list[int] = []
    budget = listed_counter(100, calls)
    budget.check(100, "CreateTopics")  # (10,000 - 2,000 - 1,000 reserved) // 4 = 1,750 fit
    assert calls == []


def test_a_request_past_the_bound_is_decided_on_the_listed_count() -> None:
    calls: list[int] = []
    budget = listed_counter(100, calls)
    budget.check(2_000, "CreateTopics")  # (10,000 - 100 - 1,000) // 4 = 2,225 fit
    assert calls == [100]
    with pytest.raises(DescriptorLimitError, match="allows 2225 more"):
        budget.check(2_300, "CreateTopics")
