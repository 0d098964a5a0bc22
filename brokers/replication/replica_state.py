"""The leader's view of one follower replica: how far it has fetched and when it was last caught up.

Owns: `ReplicaState`, an immutable value the leader replaces on every follower fetch (Kafka's
`Replica.updateFetchState`) and on every leadership change (`Replica.resetReplicaState`). The
ISR rules in `isr.py` read it; nothing here does I/O or reads a clock (times are passed in).

Why "caught up" is tracked as a time and not compared with the leader's end directly: the leader
keeps appending, so a follower is rarely *at* the end. Kafka's rule: a fetch at or past the
leader's end at fetch time makes the follower caught up *now*; a fetch at or past the leader's end
as of the *previous* fetch makes it caught up as of that previous fetch. `replica.lag.time.max.ms`
is then measured from `last_caught_up_time_ms`.

Pure; immutable, so safe to share across threads.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

UNKNOWN_OFFSET = -1
NO_BROKER_EPOCH = -1


@dataclass(frozen=True, slots=True)
class ReplicaState:
    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET  # the follower's fetch offset: all below is replicated
    log_start_offset: int = UNKNOWN_OFFSET
    last_caught_up_time_ms: int = 0
    last_fetch_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET
    broker_epoch: int = NO_BROKER_EPOCH  # the follower's registration epoch (KIP-380/903)

    def accepts_broker_epoch(self, broker_epoch: int) -> bool:
        """A fetch from an older registration of the broker (it restarted since) is stale: its
        offsets describe a log that may have been lost (KIP-903). -1 means "not sent"."""
        return broker_epoch == NO_BROKER_EPOCH or broker_epoch >= self.broker_epoch

    def on_fetch(
        self,
        *,
        fetch_offset: int,
        log_start_offset: int,
        fetch_time_ms: int,
        leader_log_end_offset: int,
        broker_epoch: int = NO_BROKER_EPOCH,
    ) -> ReplicaState:
        """The state after a follower fetch at `fetch_offset` (its log end offset)."""
        caught_up = self.last_caught_up_time_ms
        if fetch_offset >= leader_log_end_offset:
            caught_up = max(caught_up, fetch_time_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset >= 0:
            # It has everything the leader had when it fetched last time.
            caught_up = max(caught_up, self.last_fetch_time_ms)
        return dataclasses.replace(
            self,
            log_end_offset=fetch_offset,
            log_start_offset=log_start_offset,
            last_caught_up_time_ms=caught_up,
            last_fetch_time_ms=fetch_time_ms,
            last_fetch_leader_log_end_offset=leader_log_end_offset,
            broker_epoch=broker_epoch if broker_epoch != NO_BROKER_EPOCH else self.broker_epoch,
        )

    def reset(self, *, now_ms: int, leader_log_end_offset: int, in_isr: bool) -> ReplicaState:
        """The state when this broker becomes leader: offsets unknown until the follower fetches.

        Kafka's makeLeader gives ISR members a fresh caught-up time (the previous leader judged
        them in sync), so they are not dropped before they had a chance to fetch.
        """
        return ReplicaState(
            broker_id=self.broker_id,
            last_caught_up_time_ms=now_ms if in_isr else 0,
            last_fetch_time_ms=now_ms if in_isr else 0,
            last_fetch_leader_log_end_offset=leader_log_end_offset if in_isr else UNKNOWN_OFFSET,
            broker_epoch=self.broker_epoch,
        )

    def is_caught_up(self, *, leader_log_end_offset: int, now_ms: int, max_lag_ms: int) -> bool:
        """In sync by `replica.lag.time.max.ms`: at the leader's end, or caught up recently."""
        return (
            self.log_end_offset == leader_log_end_offset
            or now_ms - self.last_caught_up_time_ms <= max_lag_ms
        )
