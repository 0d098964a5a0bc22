"""OMB's maximum-sustainable-rate controller (`infra.bench.vs_kafka_omb.RateController`): the
fixed-rate phase runs at half of what it settles on, so it must cut when the consumers fall
behind or the producers cannot send what is due, and raise only while both keep up."""

from __future__ import annotations

import pytest

from infra.bench.vs_kafka_omb import BACKLOG_LIMIT, MIN_RATE, RateController

pytestmark = pytest.mark.unit


def test_raises_the_rate_while_producers_and_consumers_keep_up() -> None:
    control = RateController()
    rate = control.next_rate(10_000, 3.0, published=30_000, received=30_000)
    assert rate == 20_000  # ramping factor 1: doubled
    assert control.next_rate(rate, 3.0, published=90_000, received=90_000) == 40_000


def test_cuts_toward_what_the_consumers_read_when_they_fall_behind() -> None:
    control = RateController()
    rate = control.next_rate(10_000, 3.0, published=30_000, received=20_000)  # 10,000 behind
    # 0.2 x read rate + 0.8 x (due - backlog) / period
    assert rate == pytest.approx(0.2 * 20_000 / 3 + 0.8 * (30_000 - 10_000) / 3)
    assert rate < 10_000 and control.ramping == 0.5


def test_cuts_when_the_producers_cannot_send_what_is_due() -> None:
    control = RateController()
    rate = control.next_rate(10_000, 3.0, published=20_000, received=20_000)  # 10,000 short
    assert rate < 10_000


def test_a_backlog_within_the_limit_is_not_a_cut() -> None:
    control = RateController()
    rate = control.next_rate(10_000, 3.0, published=30_000, received=30_000 - BACKLOG_LIMIT)
    assert rate > 10_000


def test_a_stalled_period_leaves_a_rate_it_can_climb_from() -> None:
    control = RateController()
    rate = control.next_rate(10_000, 3.0, published=30_000, received=0)
    assert rate == MIN_RATE
    assert control.next_rate(rate, 3.0, published=30_300, received=30_300) > MIN_RATE
