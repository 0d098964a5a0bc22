"""Follower fetching (KIP-392): which replica a consumer should read a partition from.

Owns: what the selectors of `replica.selector.class` (parsed in brokers/common/config.py; Kafka's
class names: `LeaderSelector`, and `RackAwareReplicaSelector`, which sends a consumer with
`client.rack` to an in-sync replica on its rack) choose, and `preferred_read_replica`, Kafka's
`ReplicaManager.findPreferredReadReplica` for a partition this broker leads. As in Kafka:

- only consumers sending Fetch v11+ (which carries `rack_id`) are redirected, never followers;
- candidates are the followers in the committed ISR whose fetched range covers the consumer's
  fetch offset (log start ≤ offset ≤ log end), alive in the metadata, plus the leader;
- the rack-aware selector keeps the leader when it is on the client's rack (or when no replica
  is, or the client gave no rack), else the same-rack follower with the highest log end offset,
  the most recently caught up on a tie;
- the leader is never named: None means "read here".

A follower that leaves the ISR is no longer named, so a consumer that comes back to the leader
(on an error from the follower, or when its preferred replica expires) reads from the leader.
Pure (the partition's state is read, never changed); runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from brokers.common.config import LEADER_SELECTOR, RACK_AWARE_SELECTOR

if TYPE_CHECKING:
    from brokers.replication.partition import Partition

__all__ = ["LEADER_SELECTOR", "RACK_AWARE_SELECTOR", "ReplicaView", "preferred_read_replica"]


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One candidate replica, as Kafka's `ReplicaView`."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    time_since_caught_up_ms: int


def select(
    selector: str | None,
    client_rack: str | None,
    leader: ReplicaView,
    candidates: list[ReplicaView],
) -> ReplicaView:
    """The replica `selector` picks for a client on `client_rack` (Kafka's `select`)."""
    if selector != RACK_AWARE_SELECTOR or not client_rack:
        return leader
    if leader.rack == client_rack:
        return leader
    same_rack = [c for c in candidates if c.rack == client_rack]
    if not same_rack:
        return leader
    # ReplicaView.comparator: log end offset, then the most recently caught up; max wins
    return max(same_rack, key=lambda c: (c.log_end_offset, -c.time_since_caught_up_ms))


def preferred_read_replica(
    partition: Partition,
    *,
    selector: str | None,
    client_rack: str | None,
    fetch_offset: int,
    racks: Mapping[int, str | None],
    now_ms: int,
) -> int | None:
    """The follower a consumer of this led partition should fetch from, or None (the leader).
    `racks` maps each live broker to its rack (absent: not alive)."""
    if selector is None or not partition.is_leader or not partition.replicated:
        return None
    isr = partition.state.isr
    candidates = [
        ReplicaView(
            follower.broker_id,
            racks[follower.broker_id],
            follower.log_end_offset,
            now_ms - follower.last_caught_up_time_ms,
        )
        for follower in partition.followers.values()
        if follower.broker_id in isr
        and follower.broker_id in racks
        and follower.log_start_offset <= fetch_offset <= follower.log_end_offset
    ]
    leader = ReplicaView(
        partition.state.leader_id,
        racks.get(partition.state.leader_id),
        partition.log.log_end_offset,
        0,
    )
    chosen = select(selector, client_rack, leader, candidates)
    return None if chosen is leader else chosen.broker_id
