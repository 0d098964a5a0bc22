"""The leader's in-sync-replica rules: who is in sync, the high watermark, and acks=all.

Owns the pure decisions of Kafka's `Partition` (docs/design.md, "Replication"):
- shrink (`maybeShrinkIsr`): a follower in the ISR that has not been caught up for longer than
  `replica.lag.time.max.ms` leaves it; the leader never removes itself;
- expand (`maybeExpandIsr`): a follower joins once its log end reaches both the high watermark
  and the start of the leader's current epoch (so it holds everything this leader committed and
  has truncated away any divergent suffix);
- the high watermark: min log end offset over the ISR, never moving backwards;
- acks=all: refused before the append when the ISR is below `min.insync.replicas`
  (NOT_ENOUGH_REPLICAS); complete once the high watermark passes the append, reporting
  NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below the minimum meanwhile.

While an ISR change is being written to ZooKeeper, callers pass Kafka's "maximal" ISR (current
plus pending additions) to `high_watermark` and `acks_all_outcome`: the high watermark must wait
for a joining follower before it is acknowledged as a member. Pure; thread-safe.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping, Sequence

from brokers.replication.errors import NotEnoughReplicasError
from brokers.replication.replica_state import ReplicaState

ACKS_ALL = -1


class AckOutcome(enum.Enum):
    PENDING = "pending"  # stay in purgatory
    DONE = "done"
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = "not_enough_replicas_after_append"


def out_of_sync_followers(
    isr: Collection[int],
    followers: Mapping[int, ReplicaState],
    *,
    leader_id: int,
    leader_log_end_offset: int,
    now_ms: int,
    max_lag_ms: int,
) -> set[int]:
    """ISR followers lagging for more than `max_lag_ms`; one the leader knows nothing about
    (no state) counts as lagging, since it cannot prove it is caught up."""
    lagging = set()
    for broker_id in isr:
        if broker_id == leader_id:
            continue
        state = followers.get(broker_id)
        if state is None or not state.is_caught_up(
            leader_log_end_offset=leader_log_end_offset, now_ms=now_ms, max_lag_ms=max_lag_ms
        ):
            lagging.add(broker_id)
    return lagging


def shrunk_isr(isr: Sequence[int], out_of_sync: Collection[int]) -> list[int] | None:
    """The ISR without `out_of_sync`, or None when nothing changes."""
    if not out_of_sync or not any(b in out_of_sync for b in isr):
        return None
    return [b for b in isr if b not in out_of_sync]


def follower_in_sync(
    state: ReplicaState, *, high_watermark: int, leader_epoch_start_offset: int
) -> bool:
    """Kafka's isFollowerInSync: caught up to the HW and into the leader's current epoch."""
    end = state.log_end_offset
    return end >= 0 and end >= high_watermark and end >= leader_epoch_start_offset


def expanded_isr(
    isr: Sequence[int],
    replicas: Collection[int],
    state: ReplicaState,
    *,
    high_watermark: int,
    leader_epoch_start_offset: int,
) -> list[int] | None:
    """The ISR with `state`'s broker added if it is an assigned replica now in sync, else None."""
    broker_id = state.broker_id
    if broker_id in isr or broker_id not in replicas:
        return None
    if not follower_in_sync(
        state, high_watermark=high_watermark, leader_epoch_start_offset=leader_epoch_start_offset
    ):
        return None
    return [*isr, broker_id]


def high_watermark(
    current: int,
    isr: Collection[int],
    followers: Mapping[int, ReplicaState],
    *,
    leader_id: int,
    leader_log_end_offset: int,
) -> int:
    """Min log end offset over the ISR, never below `current` (the HW is never taken back).

    An ISR follower whose offset is unknown (no fetch yet in this leadership) holds the HW where
    it is: advancing past it could acknowledge a write that member does not have.
    """
    candidate = leader_log_end_offset
    for broker_id in isr:
        if broker_id == leader_id:
            continue
        state = followers.get(broker_id)
        if state is None or state.log_end_offset < 0:
            return current
        candidate = min(candidate, state.log_end_offset)
    return max(current, candidate)


def check_append(required_acks: int, isr_size: int, min_insync_replicas: int) -> None:
    """Before an acks=all append: refuse it when the ISR is below `min.insync.replicas`.

    Only acks=all is affected; acks=0/1 writes succeed with any ISR (seed 002, "Availability
    and Durability Guarantees").
    """
    if required_acks == ACKS_ALL and isr_size < min_insync_replicas:
        raise NotEnoughReplicasError(
            f"in-sync replicas {isr_size} below min.insync.replicas {min_insync_replicas}"
        )


def acks_all_outcome(
    required_offset: int, high_watermark: int, isr_size: int, min_insync_replicas: int
) -> AckOutcome:
    """Kafka's checkEnoughReplicasReachOffset for an append whose next offset is
    `required_offset`: done when the HW reached it (the whole ISR has the batch)."""
    if high_watermark < required_offset:
        return AckOutcome.PENDING
    if isr_size < min_insync_replicas:
        return AckOutcome.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    return AckOutcome.DONE
