"""The leader's view of a follower: Kafka's caught-up-time rules and broker epochs."""

from __future__ import annotations

import pytest

from brokers.replication.replica_state import ReplicaState

pytestmark = pytest.mark.unit

LAG_MS = 30_000


def test_a_fetch_at_the_leader_end_is_caught_up_now() -> None:
    state = ReplicaState(1).on_fetch(
        fetch_offset=10, log_start_offset=0, fetch_time_ms=5_000, leader_log_end_offset=10
    )
    assert state.log_end_offset == 10
    assert state.last_caught_up_time_ms == 5_000
    assert state.is_caught_up(leader_log_end_offset=10, now_ms=100_000, max_lag_ms=LAG_MS)


def test_reaching_the_previous_fetch_leader_end_is_caught_up_as_of_that_fetch() -> None:
    first = ReplicaState(1).on_fetch(
        fetch_offset=5, log_start_offset=0, fetch_time_ms=1_000, leader_log_end_offset=10
    )
    assert first.last_caught_up_time_ms == 0  # behind the leader, never caught up yet
    second = first.on_fetch(
        fetch_offset=10, log_start_offset=0, fetch_time_ms=2_000, leader_log_end_offset=15
    )
    assert second.last_caught_up_time_ms == 1_000
    assert second.last_fetch_leader_log_end_offset == 15


def test_a_follower_behind_for_longer_than_the_lag_is_not_caught_up() -> None:
    state = ReplicaState(1, last_caught_up_time_ms=0).on_fetch(
        fetch_offset=3, log_start_offset=0, fetch_time_ms=40_000, leader_log_end_offset=10
    )
    assert not state.is_caught_up(leader_log_end_offset=10, now_ms=40_000, max_lag_ms=LAG_MS)
    assert state.is_caught_up(leader_log_end_offset=3, now_ms=40_000, max_lag_ms=LAG_MS)


def test_caught_up_time_never_goes_back() -> None:
    state = ReplicaState(1, last_caught_up_time_ms=9_000).on_fetch(
        fetch_offset=10, log_start_offset=0, fetch_time_ms=8_000, leader_log_end_offset=10
    )
    assert state.last_caught_up_time_ms == 9_000


def test_broker_epoch_from_an_older_registration_is_refused() -> None:
    state = ReplicaState(1).on_fetch(
        fetch_offset=0, log_start_offset=0, fetch_time_ms=1, leader_log_end_offset=0,
        broker_epoch=7,
    )  # fmt: skip
    assert state.broker_epoch == 7
    assert state.accepts_broker_epoch(7) and state.accepts_broker_epoch(8)
    assert not state.accepts_broker_epoch(6)
    assert state.accepts_broker_epoch(-1)


def test_reset_on_new_leadership_forgets_offsets_and_trusts_isr_members() -> None:
    old = ReplicaState(2, log_end_offset=50, last_caught_up_time_ms=1, broker_epoch=3)
    member = old.reset(now_ms=10_000, leader_log_end_offset=60, in_isr=True)
    outsider = old.reset(now_ms=10_000, leader_log_end_offset=60, in_isr=False)
    assert member.log_end_offset == outsider.log_end_offset == -1
    assert member.last_caught_up_time_ms == 10_000
    assert outsider.last_caught_up_time_ms == 0
    assert member.broker_epoch == 3
