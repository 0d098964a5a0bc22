"""Which closed segments a leader copies next, and what one copy uploads (Kafka's
RLMCopyTask.copyLogSegmentsToRemote).

Owns: `copy_candidates` — the non-active local segments that end at or below the copy bound
(min(high watermark, last stable offset): nothing uncommitted or undecided leaves the broker) and
are not yet wholly in the remote tier (their end is past the offset after the last copied one);
a segment partly copied by a previous leader whose segments were cut elsewhere is copied whole,
so remote copies may overlap (as in Kafka), never leave a gap — and `segment_files`, the files of
one segment: data, offset/time/transaction indexes, the producer snapshot taken when it was
rolled, and the leader-epoch entries covering it (as Kafka's checkpoint text). Pure over the
log's current segments; run on the event loop.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from brokers.log.log import Log
from brokers.log.segment import LogSegment, segment_path
from brokers.tiered.store import SegmentFiles


@dataclass(frozen=True, slots=True)
class Candidate:
    segment: LogSegment
    next_offset: int  # the following segment's base: the segment holds [base, next_offset)


def copy_candidates(
    segments: Sequence[LogSegment], *, copied_upto: int | None, upper: int
) -> list[Candidate]:
    found: list[Candidate] = []
    for segment, following in itertools.pairwise(segments):
        next_offset = following.base_offset
        if next_offset > upper:
            break
        if copied_upto is not None and next_offset <= copied_upto:
            continue
        if segment.size > 0:
            found.append(Candidate(segment, next_offset))
    return found


def leader_epochs(log: Log, start: int, end: int) -> tuple[tuple[int, int], ...]:
    """(epoch, start offset) of the epochs covering [start, end]: the one in force at `start`
    (its start clipped to `start`) and every later one starting at or before `end`."""
    entries = log.leader_epoch_cache.entries()
    found: list[tuple[int, int]] = []
    for epoch, offset in entries:
        if offset <= start:
            found = [(epoch, start)]
        elif offset <= end:
            found.append((epoch, offset))
    return tuple(found)


def segment_files(
    log: Log, candidate: Candidate, epochs: tuple[tuple[int, int], ...]
) -> SegmentFiles:
    segment = candidate.segment
    base = segment.base_offset
    txn = segment_path(log.directory, base, ".txnindex")
    snapshot = log.producer_state.snapshot_path(candidate.next_offset)
    checkpoint = f"0\n{len(epochs)}\n" + "".join(f"{e} {o}\n" for e, o in epochs)
    return SegmentFiles(
        log=segment.records.path,
        offset_index=segment_path(log.directory, base, ".index"),
        time_index=segment_path(log.directory, base, ".timeindex"),
        txn_index=txn if txn.exists() else None,
        producer_snapshot=snapshot if snapshot.exists() else None,
        leader_epochs=checkpoint.encode(),
    )
