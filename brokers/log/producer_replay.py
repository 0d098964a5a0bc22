"""Replaying the log into producer state, rebuilding `.txnindex` files on the way.

Owns: the fold of stored batches into the `ProducerStateManager` after it was reset to a snapshot
(at open, after a truncation), which is how completed-but-unreplicated transactions are
recomputed, and the rebuild of the `.txnindex` of segments that recovery emptied (Kafka's
`LogLoader.recoverSegment`: a recovered segment's aborted transactions come from the ABORT
markers in it, and their first offsets from the producer state at the segment's start, so
the replay must begin at a snapshot at or below the first recovered segment).
Data batches are folded from their headers alone; the one record of each control batch is read
(control batches are rare: one per transaction and partition). An unreadable marker is a
corrupt log (CorruptLogError), as in Kafka. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from brokers.log.errors import CorruptLogError
from brokers.log.producer_state.manager import ProducerStateManager
from brokers.log.segment import LogSegment
from brokers.log.txn_index import AbortedTxn
from brokers.records.batch import BatchHeader
from brokers.records.control import EndTxnMarker, read_marker
from brokers.records.errors import RecordError


def replay(
    segments: Iterable[LogSegment], from_offset: int, producers: ProducerStateManager,
    *, rebuild: Collection[int] = frozenset(), snapshot_at: Collection[int] = frozenset(),
) -> None:  # fmt: skip
    """Fold the batches from `from_offset` on into `producers`; the `.txnindex` of each segment
    whose base offset is in `rebuild` (emptied by recovery) gets its aborted transactions, and
    at the start of each segment whose base offset is in `snapshot_at` a snapshot is written
    (unsynced: the caller syncs them)."""
    for segment in segments:
        location = segment.translate_offset(from_offset)
        if location is None:
            continue
        if segment.base_offset in snapshot_at:
            producers.take_snapshot(segment.base_offset, sync=False)
        rebuilding = segment.base_offset in rebuild
        for position, header in segment.records.headers(location.position):
            if header.producer_id < 0:
                continue
            if not header.is_control:
                producers.update(header)
                continue
            completed = producers.update(header, marker=marker_at(segment, position, header))
            if rebuilding and completed is not None and completed.aborted:
                lso = producers.last_stable_offset_for(completed)
                segment.txn_index.append(
                    AbortedTxn(
                        completed.producer_id, completed.first_offset, header.last_offset, lso
                    )
                )


def marker_at(segment: LogSegment, position: int, header: BatchHeader) -> EndTxnMarker | None:
    """The marker of the control batch at `position` (None for one emptied by compaction)."""
    if header.records_count == 0:
        return None
    try:
        return read_marker(segment.records.pread(position, header.size))
    except RecordError as exc:
        raise CorruptLogError(
            f"{segment.records.path}: unreadable transaction marker at offset "
            f"{header.base_offset}: {exc}"
        ) from exc


def load_producer_state(
    segments: list[LogSegment], producers: ProducerStateManager, *, log_start_offset: int,
    log_end_offset: int, rebuild: Collection[int],
) -> None:  # fmt: skip
    """At open: producer state from the newest usable snapshot, then the replay to the log end.
    With segments to rebuild, the snapshot must be at or below the first of them, and those
    past it are taken again by the replay at each later segment's start, fsynced: a roll writes
    its snapshot before an fsync (Log), so after a crash one past the recovery point may be torn,
    and nothing else would read it before a tiered upload or a later recovery trusted it."""
    producers.truncate(log_start_offset, log_end_offset)
    up_to = min(min(rebuild, default=log_end_offset), log_end_offset)
    retake: frozenset[int] = frozenset()
    if rebuild:
        producers.delete_snapshots_above(up_to)
        retake = frozenset(s.base_offset for s in segments if up_to < s.base_offset)
    from_offset = producers.load(log_start_offset, up_to)
    replay(
        (s for s in segments if s.next_offset > from_offset), from_offset, producers,
        rebuild=rebuild, snapshot_at=retake,
    )  # fmt: skip
    producers.sync_unsynced()
    for segment in segments:
        if segment.base_offset in rebuild:
            segment.txn_index.flush()
