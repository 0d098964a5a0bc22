"""Where a follower truncates its log before fetching in a new leader epoch (KIP-101, KIP-279).

Owns the pure decision Kafka's fetcher makes from an OffsetForLeaderEpoch answer
(`AbstractFetcherThread.getOffsetTruncationState`). The follower asks the leader for the end of
its own latest epoch E; the leader answers (epoch L, end offset O) where L is the largest epoch it
knows that is <= E, and O where L ended in the leader's log. Then:
- O undefined: the leader knows no epoch <= E (its cache is empty, or it lost every epoch the
  follower knows): fall back to the follower's high watermark — KIP-101's original rule, the only
  offset known to be committed;
- L undefined but O defined (a pre-KIP-279 answer): truncate to min(O, log end);
- the follower also knows L: truncate to min(O, the follower's end of L, log end); done;
- the follower does not know L (it skipped that epoch): truncate to the end of its largest epoch
  below L and ask again with that epoch (KIP-279: logs may diverge in more than one epoch), or,
  when it knows no epoch <= L at all, to min(O, log end); done.
A follower without any cached epoch never asks: it truncates to its high watermark.

The truncation offset is never above the follower's log end, so truncation only removes data.
Pure; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochCache(Protocol):
    """The follower's side of `brokers.log.leader_epoch_cache.LeaderEpochCache`."""

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]: ...

    def latest_epoch(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """The leader's OffsetForLeaderEpoch answer for one partition (no error)."""

    leader_epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class Truncation:
    offset: int  # truncate the follower's log to this offset (a no-op at its log end)
    completed: bool  # False: ask the leader again with the follower's new latest epoch


def epoch_to_ask(cache: EpochCache) -> int | None:
    """The epoch to send in OffsetForLeaderEpoch, or None: truncate to the HW without asking."""
    return cache.latest_epoch()


def without_epochs(*, high_watermark: int, log_end_offset: int) -> Truncation:
    """A follower with no cached epoch (pre-KIP-101 data, or a lost checkpoint)."""
    return Truncation(min(high_watermark, log_end_offset), completed=True)


def truncation_for(
    answer: EpochEndOffset,
    cache: EpochCache,
    *,
    log_end_offset: int,
    high_watermark: int,
) -> Truncation:
    """The follower's truncation point from the leader's `answer` (see the module docstring)."""
    if answer.end_offset == UNDEFINED_EPOCH_OFFSET:
        return Truncation(min(high_watermark, log_end_offset), completed=True)
    if answer.leader_epoch == UNDEFINED_EPOCH:
        return Truncation(min(answer.end_offset, log_end_offset), completed=True)
    follower_epoch, follower_end = cache.end_offset_for(answer.leader_epoch, log_end_offset)
    if follower_end == UNDEFINED_EPOCH_OFFSET or follower_epoch == UNDEFINED_EPOCH:
        return Truncation(min(answer.end_offset, log_end_offset), completed=True)
    if follower_epoch != answer.leader_epoch:
        # We skipped the leader's epoch L: our largest epoch below L may have diverged too.
        return Truncation(min(follower_end, log_end_offset), completed=False)
    return Truncation(min(answer.end_offset, follower_end, log_end_offset), completed=True)
