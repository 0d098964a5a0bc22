"""ISR rules: shrink by replica.lag.time.max.ms, expand, high watermark, acks=all and
min.insync.replicas — examples, and a property over random histories of fetches and appends."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.replication import isr
from brokers.replication.errors import NotEnoughReplicasError
from brokers.replication.isr import AckOutcome
from brokers.replication.replica_state import ReplicaState

pytestmark = pytest.mark.unit

LEADER = 0
LAG_MS = 10_000


def fetched(broker: int, offset: int, at_ms: int, leader_end: int) -> ReplicaState:
    return ReplicaState(broker).on_fetch(
        fetch_offset=offset,
        log_start_offset=0,
        fetch_time_ms=at_ms,
        leader_log_end_offset=leader_end,
    )


# -- shrink and expand --------------------------------------------------------------------------
def test_a_follower_lagging_longer_than_the_lag_time_leaves_the_isr() -> None:
    followers = {1: fetched(1, 100, 3_000, 100), 2: fetched(2, 40, 3_000, 100)}
    common = {"leader_id": LEADER, "leader_log_end_offset": 120, "max_lag_ms": LAG_MS}
    lagging = isr.out_of_sync_followers([0, 1, 2], followers, now_ms=12_000, **common)
    assert lagging == {2}  # 1 was caught up 9 s ago; 2 never was
    assert isr.shrunk_isr([0, 1, 2], lagging) == [0, 1]
    later = isr.out_of_sync_followers([0, 1, 2], followers, now_ms=14_000, **common)
    assert later == {1, 2}
    assert isr.shrunk_isr([0, 1], {2}) is None


def test_the_leader_never_leaves_and_an_unknown_follower_is_lagging() -> None:
    lagging = isr.out_of_sync_followers(
        [0, 3], {}, leader_id=LEADER, leader_log_end_offset=5, now_ms=0, max_lag_ms=LAG_MS
    )
    assert lagging == {3}


def test_a_follower_joins_only_at_the_hw_and_inside_the_leader_epoch() -> None:
    replicas = [0, 1, 2]
    behind_hw = fetched(1, 9, 0, 20)
    before_epoch = fetched(1, 12, 0, 20)
    ready = fetched(1, 15, 0, 20)
    args = {"high_watermark": 10, "leader_epoch_start_offset": 15}
    assert isr.expanded_isr([0], replicas, behind_hw, **args) is None
    assert isr.expanded_isr([0], replicas, before_epoch, **args) is None
    assert isr.expanded_isr([0], replicas, ready, **args) == [0, 1]
    assert isr.expanded_isr([0, 1], replicas, ready, **args) is None
    assert isr.expanded_isr([0], [0, 2], ready, **args) is None  # not an assigned replica
    assert isr.expanded_isr([0], replicas, ReplicaState(1), **args) is None


# -- high watermark -----------------------------------------------------------------------------
def test_hw_is_the_min_log_end_over_the_isr() -> None:
    followers = {1: fetched(1, 7, 0, 10), 2: fetched(2, 3, 0, 10)}
    common = {"leader_id": LEADER, "leader_log_end_offset": 10}
    assert isr.high_watermark(0, [0, 1, 2], followers, **common) == 3
    assert isr.high_watermark(0, [0, 1], followers, **common) == 7
    assert isr.high_watermark(0, [0], followers, **common) == 10
    assert isr.high_watermark(5, [0, 1, 2], followers, **common) == 5  # never backwards


def test_an_isr_member_that_has_not_fetched_holds_the_hw() -> None:
    followers = {1: ReplicaState(1).reset(now_ms=0, leader_log_end_offset=10, in_isr=True)}
    hw = isr.high_watermark(4, [0, 1], followers, leader_id=LEADER, leader_log_end_offset=10)
    assert hw == 4


# -- acks=all and min.insync.replicas -----------------------------------------------------------
def test_acks_all_is_refused_before_the_append_below_min_isr() -> None:
    with pytest.raises(NotEnoughReplicasError):
        isr.check_append(-1, isr_size=1, min_insync_replicas=2)
    isr.check_append(-1, isr_size=2, min_insync_replicas=2)
    isr.check_append(1, isr_size=1, min_insync_replicas=2)  # acks=1 ignores the minimum
    isr.check_append(0, isr_size=1, min_insync_replicas=3)


def test_acks_all_completes_when_the_hw_passes_the_append() -> None:
    assert isr.acks_all_outcome(11, 10, 3, 2) is AckOutcome.PENDING
    assert isr.acks_all_outcome(11, 11, 3, 2) is AckOutcome.DONE
    assert isr.acks_all_outcome(11, 12, 1, 2) is AckOutcome.NOT_ENOUGH_REPLICAS_AFTER_APPEND


# -- property: HW monotonic, never above any ISR member's log end -------------------------------
FOLLOWERS = (1, 2, 3)
event = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 5)),
    st.tuples(st.just("fetch"), st.sampled_from(FOLLOWERS), st.floats(0, 1)),
    st.tuples(st.just("tick"), st.integers(1, 8_000)),
    st.tuples(st.just("shrink")),
    st.tuples(st.just("expand"), st.sampled_from(FOLLOWERS)),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(event, max_size=60))
def test_hw_is_monotonic_and_below_every_isr_log_end(events: list[tuple[Any, ...]]) -> None:
    now, leader_end, hw = 0, 0, 0
    members = [LEADER, *FOLLOWERS]
    states = {
        b: ReplicaState(b).reset(now_ms=0, leader_log_end_offset=0, in_isr=True) for b in FOLLOWERS
    }
    for kind, *args in events:
        if kind == "append":
            leader_end += int(args[0])
        elif kind == "fetch":
            broker, share = int(args[0]), float(args[1])
            start = max(states[broker].log_end_offset, 0)
            offset = start + int((leader_end - start) * share)
            states[broker] = states[broker].on_fetch(
                fetch_offset=offset,
                log_start_offset=0,
                fetch_time_ms=now,
                leader_log_end_offset=leader_end,
            )
        elif kind == "tick":
            now += int(args[0])
        elif kind == "shrink":
            lagging = isr.out_of_sync_followers(
                members, states, leader_id=LEADER, leader_log_end_offset=leader_end, now_ms=now,
                max_lag_ms=LAG_MS,
            )  # fmt: skip
            members = isr.shrunk_isr(members, lagging) or members
        else:
            grown = isr.expanded_isr(
                members, [LEADER, *FOLLOWERS], states[int(args[0])],
                high_watermark=hw, leader_epoch_start_offset=0,
            )  # fmt: skip
            members = grown or members
        new_hw = isr.high_watermark(
            hw, members, states, leader_id=LEADER, leader_log_end_offset=leader_end
        )
        assert new_hw >= hw
        assert new_hw <= leader_end
        for broker in members:
            if broker != LEADER and states[broker].log_end_offset >= 0:
                assert new_hw <= states[broker].log_end_offset
        assert LEADER in members
        hw = new_hw
