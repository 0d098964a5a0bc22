"""Sockets draw on the descriptor budget's reserve, not on the partitions' share (issue 13: the next
admin client's own connections moved "allows 44" to "allows 43", failing the fd-limit e2e tests).

This test process's own RLIMIT_NOFILE is lowered for a moment so that the real budget's answer is
small; real sockets (socketpairs) are opened and closed around it."""

from __future__ import annotations

import os
import select
import socket
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest

from brokers.common.descriptors import (
    DESCRIPTORS_PER_PARTITION as PER,
)
from brokers.common.descriptors import (
    DescriptorBudget,
    DescriptorLimitError,
    OpenDescriptors,
    open_by_kind,
    open_descriptors,
    reserve_for,
)
from tests.unit.handlers.test_descriptor_limit import open_file_limit

pytestmark = pytest.mark.unit
SPARE = 40  # room for 10 partitions beyond what is open


def limit_for(now: OpenDescriptors, sockets_to_add: int) -> int:
    """An open-file limit leaving SPARE for partitions and a reserve above the sockets this
    process holds plus `sockets_to_add` (a long-lived test worker holds whatever earlier tests'
    loops and clients left open: 74 in one clean-clone run)."""
    return max(now.files + now.others + 64 + SPARE, 10 * (now.others + sockets_to_add + 2))


@contextmanager
def sockets(count: int) -> Iterator[None]:
    """`count` more sockets open in this process (socketpairs: two each)."""
    with ExitStack() as stack:
        for _ in range(count // 2):
            for end in socket.socketpair():
                stack.enter_context(end)
        yield


def test_open_by_kind_tells_sockets_from_files() -> None:
    before = open_by_kind()
    with sockets(20):
        during = open_by_kind()
        assert during.others == before.others + 20, (before, during)
        assert during.files == before.files, (before, during)
        assert during.files + during.others == open_descriptors()


def test_pipes_and_epolls_draw_on_the_reserve_as_sockets_do() -> None:
    """A client library's short-lived epoll (kazoo makes one per wait) or a pipe is not a file a
    partition holds: counted with the files, it once moved "allows 36" to "allows 35" between a
    refusal and the create it allowed (the ZooKeeper-mode fd-limit test)."""
    before = open_by_kind()
    with ExitStack() as stack:
        stack.enter_context(select.epoll())
        for end in os.pipe():
            stack.callback(os.close, end)
        during = open_by_kind()
    assert during.others == before.others + 3, (before, during)
    assert during.files == before.files, (before, during)


def test_connecting_and_disconnecting_never_changes_how_many_partitions_fit() -> None:
    now = open_by_kind()
    limit = limit_for(now, 24)
    assert now.others + 24 < reserve_for(limit), f"this process holds {now.others} sockets"
    budget = DescriptorBudget()
    with open_file_limit(limit):
        fits = budget.partitions_available()
        assert fits is not None and fits >= SPARE // 4  # 10 partitions at most 4 each
        with sockets(24):  # six partitions' worth
            assert budget.partitions_available() == fits
            budget.check(fits, "topic 'exact'")  # through the cheap bounds to the exact count
            with pytest.raises(DescriptorLimitError, match=f"allows {fits} more partitions"):
                budget.check(fits + 1, "topic 'one more'")
        assert budget.partitions_available() == fits


def test_sockets_past_the_reserve_are_not_promised_to_partitions() -> None:
    # accept.py has no connection cap: connections past the reserve hold descriptors the
    # partitions' share would have had, and the budget must count them (module doc).
    budget = DescriptorBudget(lambda: 1_000, count_kinds=lambda: OpenDescriptors(100, 40))
    assert budget.partitions_available() == (1_000 - 100 - 100) // PER  # 40 sockets < 100 kept
    crowded = DescriptorBudget(lambda: 1_000, count_kinds=lambda: OpenDescriptors(100, 300))
    assert crowded.partitions_available() == (1_000 - 100 - 300) // PER
    now = open_by_kind()
    limit = limit_for(now, 0)
    assert now.others < reserve_for(limit)
    with open_file_limit(limit):
        fits = DescriptorBudget().partitions_available() or 0
        with sockets(reserve_for(limit) - now.others + 8):
            held = open_by_kind().others
            assert held > reserve_for(limit)
            expected = (limit - now.files - held) // PER
            assert DescriptorBudget().partitions_available() == expected < fits


def test_sockets_are_told_apart_only_when_the_cheap_bounds_cannot_prove_a_request_fits() -> None:
    calls: list[str] = []

    def counted(name: str, value: Any) -> Callable[[], Any]:
        def count() -> Any:
            calls.append(name)
            return value

        return count

    budget = DescriptorBudget(  # the arithmetic below is a 4-descriptor partition's
        per_partition=4,
        read_limit=lambda: 10_000,
        count_open=counted("listed", 2_100),  # 100 of them sockets
        count_at_most=counted("table", 4_096),
        count_kinds=counted("by kind", OpenDescriptors(2_000, 100)),
    )
    budget.check(1_000, "small")  # (10,000 - 4,096 - 1,000) // 4 = 1,226 fit by the table's size
    assert calls == ["table"]
    budget.check(1_700, "larger")  # (10,000 - 2,100 - 1,000) // 4 = 1,725 fit by the listing
    assert calls == ["table", "table", "listed"]
    calls.clear()
    budget.check(1_750, "exact")  # (10,000 - 2,000 - max(1,000, 100)) // 4 = 1,750: by kind
    assert calls == ["table", "listed", "by kind"]
