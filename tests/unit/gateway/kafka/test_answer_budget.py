"""`ByteBudget.take_up_to`: what a Fetch's answer may hold of its tenant's budget."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gateway.kafka.byte_budget import ByteBudget, Charge
from gateway.kafka.client_connection import answer_share

pytestmark = pytest.mark.unit


def run_now(callback: Callable[[], None]) -> None:
    callback()


def test_an_answer_takes_what_is_free_and_gives_it_back() -> None:
    budget = ByteBudget(100, defer=run_now)
    request = budget.try_take(30)
    assert request is not None
    answer = budget.take_up_to(1000)
    assert answer is not None and answer.size == 70 and budget.used == 100
    assert budget.take_up_to(1) is None, "nothing free: the fetch gets the floor, unheld"
    answer.release()
    assert budget.used == 30


def test_an_answer_never_jumps_connections_waiting_for_the_budget() -> None:
    budget = ByteBudget(100, defer=run_now)
    first = budget.try_take(90)
    assert first is not None
    granted: list[Charge] = []
    budget.wait(50, granted.append)
    assert budget.take_up_to(5) is None
    first.release()
    assert [charge.size for charge in granted] == [50]


def test_nothing_wanted_holds_nothing() -> None:
    assert ByteBudget(100, defer=run_now).take_up_to(0) is None


def test_answers_leave_a_quarter_for_requests_and_share_the_rest() -> None:
    """`answer_share`: a parked Fetch (a consumer's long poll) never holds what the tenant's
    other requests need, and a second consumer still gets half of what is left."""
    capacity = 32 * 1024 * 1024
    first = answer_share(capacity, 0)
    assert first == 12 * 1024 * 1024  # half of the three quarters outside the requests' reserve
    second = answer_share(capacity, first)
    assert second == 6 * 1024 * 1024
    held = 0
    for _ in range(64):  # however many consumers park, a quarter stays free for requests
        held += answer_share(capacity, held)
    assert capacity - held >= capacity // 4
    assert answer_share(capacity, capacity) == 0
