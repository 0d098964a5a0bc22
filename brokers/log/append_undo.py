"""Undoing a failed append: the partition's files and state put back as they were before it.

Owns: `AppendMark`, taken before every append (the active segment and its `SegmentMark`; the
leader epochs too, once the append is about to assign a new one), and `undo_append`, which
- drops the segments the append rolled to (nobody has read them: appends and reads share the
  event loop); when the roll had replaced an empty active segment, an empty one is made again;
- cuts the active segment's files back to the mark (also what a torn write left past it), its
  `.txnindex` included (an ABORT marker's entry; a file the append created is removed), and
  restores its in-memory state;
- restores the leader epochs in memory and deletes a producer snapshot the roll wrote past the
  log end (one at the log end describes exactly the state there and stays).
Producer state itself needs no undo: the log folds an append into it only once it is written.

An OSError from `undo_append` means the files are in an unknown state: the caller takes the log
offline (see log.py). Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from brokers.log.leader_epoch_cache import LeaderEpochCache
from brokers.log.log_segments import LogSegments
from brokers.log.producer_state.manager import ProducerStateManager
from brokers.log.segment import LogSegment, SegmentMark


@dataclass(slots=True)
class AppendMark:
    active: LogSegment
    segment: SegmentMark
    epochs: list[tuple[int, int]] | None = None  # set before the append assigns a new epoch

    @classmethod
    def take(cls, segments: LogSegments) -> AppendMark:
        active = segments.active
        return cls(active, active.mark())


def undo_append(
    mark: AppendMark, segments: LogSegments, *, make_segment: Callable[[int], LogSegment],
    epochs: LeaderEpochCache, producers: ProducerStateManager, log_start_offset: int,
    log_end_offset: int,
) -> None:  # fmt: skip
    """Put the log back to `mark` (the log end offsets given are those before the append)."""
    base = mark.active.base_offset
    while len(segments) and segments.active.base_offset > base:
        segments.drop_active()  # rolled to by the failed append
    if len(segments) and segments.active is mark.active:
        mark.active.roll_back(mark.segment)
    else:  # the roll replaced the (empty) marked segment and deleted its files
        segments.add(make_segment(base))
    if mark.epochs is not None:
        epochs.restore(mark.epochs)
    producers.truncate(log_start_offset, log_end_offset)
