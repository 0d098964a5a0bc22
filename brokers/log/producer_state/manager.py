"""The producer table of one partition and its snapshot files (Kafka's `ProducerStateManager`).

Owns: per producer id the entry (`entry.py`), the checks before an append (`append_check.py`),
the partition's unstable transactions (`transactions.py`: open ones and completed ones whose
marker is not yet below the high watermark, for the LSO and the `.txnindex`), the producers
whose transaction is being verified here (`verification.py`; never snapshotted), expiry after
`producer.id.expiration.ms` (never of a producer with an open transaction), the cap on how many
producers the table holds (`max_producers`, Pier's `pier.producer.state.max.producers`; Kafka has
none: a client may write batches of any producer id, each new one an entry of about a kilobyte, so
a tenant sending a new id with every request grew the broker by megabytes a second; past the cap
the least recently written producer without an open transaction is forgotten, as if it had
expired (a client that takes a new id per process, as a function-as-a-service producer does, no
longer pushes out a busy long-lived one): only
duplicate detection for that producer's in-flight retries is lost, its next batch is taken at any
sequence as an unknown producer's), and taking /
loading / truncating the `.snapshot` files (`snapshot.py`) that let recovery replay only the
tail. A snapshot keeps each open transaction's first offset; completed-but-unreplicated ones
are recomputed by the replay after it. Control batches are folded in with their marker
(`update(header, marker=...)`); data batches are never parsed. Runs on the event loop; not
thread-safe.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

from brokers.common.clock import Clock
from brokers.log.errors import CorruptSnapshotError
from brokers.log.file_ops import OS_FILES, FileOps, fsync_paths, write_atomically
from brokers.log.producer_state.append_check import apply_batch, check_batch, check_marker
from brokers.log.producer_state.entry import DuplicateBatch, ProducerStateEntry
from brokers.log.producer_state.snapshot import (
    SNAPSHOT_NAME,
    SNAPSHOT_SUFFIX,
    decode_snapshot,
    encode_snapshot,
)
from brokers.log.producer_state.transactions import CompletedTxn, UnstableTxns
from brokers.log.producer_state.verification import VerificationState
from brokers.log.txn_index import AbortedTxn
from brokers.records.batch import BatchHeader
from brokers.records.control import EndTxnMarker

log = logging.getLogger(__name__)
DEFAULT_MAX_PRODUCERS = 1000  # per partition (pier.producer.state.max.producers)


class ProducerStateManager:
    """The producer table of one partition plus its snapshot files in `directory`."""

    def __init__(
        self, directory: Path, *, clock: Clock, producer_id_expiration_ms: int = 86400000,
        files: FileOps = OS_FILES, fresh: bool = False, max_producers: int = DEFAULT_MAX_PRODUCERS,
    ) -> None:  # fmt: skip
        """`fresh`: a new log's directory, with no snapshot (or leftover) in it."""
        self.directory = directory
        self._clock = clock
        self._files = files
        self._expiration_ms = producer_id_expiration_ms
        self._max_producers = max_producers
        self._producers: dict[int, ProducerStateEntry] = {}  # in the order of their last write
        self._txns = UnstableTxns()
        self._verifying: dict[int, VerificationState] = {}
        # The offset after the last producer batch (or snapshot) folded in: truncating the log
        # below it must forget state; batches without a producer id never move it.
        self.map_end_offset = 0
        # The offset of the snapshot file that holds this table as it is (taken, or loaded with
        # nothing replayed after it): a snapshot there again would write the same bytes.
        self._saved_at: int | None = None
        self._unsynced: list[Path] = []  # written by a roll, not fsynced yet (`take_snapshot`)
        if fresh:
            return
        for leftover in directory.glob(f"*{SNAPSHOT_SUFFIX}.tmp"):
            leftover.unlink(missing_ok=True)  # a crash mid-write; the rename never happened

    # -- the append path ------------------------------------------------------------------

    def check(self, header: BatchHeader) -> DuplicateBatch | None:
        """Validate a client batch before it is written; a duplicate returns its original offsets."""
        if header.producer_id < 0:
            return None
        pid = header.producer_id
        return check_batch(self._producers.get(pid), header, self._verifying.get(pid))

    def check_all(self, headers: Sequence[BatchHeader]) -> list[DuplicateBatch | None]:
        """`check` for several batches of one request: later batches see the earlier ones."""
        pending: dict[int, ProducerStateEntry] = {}
        verified: set[int] = set()  # a transactional batch passed: `update` will end the state
        results: list[DuplicateBatch | None] = []
        last = len(headers) - 1  # no later batch sees the last one (`update` folds it in)
        for i, header in enumerate(headers):
            pid = header.producer_id
            entry = pending.get(pid) or self._producers.get(pid)
            verifying = None if pid in verified else self._verifying.get(pid)
            duplicate = None if pid < 0 else check_batch(entry, header, verifying)
            if pid >= 0 and duplicate is None and i < last:
                pending[pid] = entry.copy() if entry else ProducerStateEntry(pid)
                apply_batch(pending[pid], header, None)
                if header.is_transactional:
                    verified.add(pid)
            results.append(duplicate)
        return results

    def start_verification(
        self, producer_id: int, sequence: int, epoch: int, *, supports_epoch_bump: bool
    ) -> None:
        """A transaction's first batch here goes to the coordinator: remember its sequence
        (Kafka's maybeCreateVerificationStateEntry) until a transactional batch is written."""
        state = self._verifying.get(producer_id)
        if state is None:
            if len(self._verifying) >= self._max_producers:  # the longest-standing goes
                del self._verifying[next(iter(self._verifying))]
            now_ms = self._clock.time_ms()
            state = VerificationState(epoch, sequence, supports_epoch_bump, now_ms)
            self._verifying[producer_id] = state
        state.observe(sequence, epoch)

    def end_verification(self, producer_id: int) -> None:
        """The coordinator refused the transaction for good: nothing of it will be retried."""
        self._verifying.pop(producer_id, None)

    def verification(self, producer_id: int) -> VerificationState | None:
        return self._verifying.get(producer_id)

    def check_marker(self, producer_id: int, producer_epoch: int, marker: EndTxnMarker) -> None:
        """Fence a marker from an old producer or coordinator epoch (see append_check)."""
        check_marker(self._producers.get(producer_id), producer_epoch, marker)

    def update(
        self, header: BatchHeader, *, marker: EndTxnMarker | None = None
    ) -> CompletedTxn | None:
        """Record a written batch; `header.base_offset` is the offset it was assigned. A control
        batch comes with its `marker`; returns the transaction it completed, if any."""
        if header.producer_id < 0:
            return None
        self.map_end_offset = max(self.map_end_offset, header.next_offset)
        # the table is kept in order of last write (popped and put back at the end), so that
        # past the cap the least recently written producer goes, not a busy long-lived one
        entry = self._producers.pop(header.producer_id, None)
        if entry is None:
            if len(self._producers) >= self._max_producers:
                self._forget_oldest_idle()
            entry = ProducerStateEntry(header.producer_id)
        self._producers[header.producer_id] = entry
        completed = apply_batch(entry, header, marker)
        if header.is_transactional and self._verifying:
            verifying = self._verifying.get(header.producer_id)
            if verifying is not None and verifying.ends_with(
                header.is_control, header.producer_epoch
            ):
                del self._verifying[header.producer_id]
        if completed is not None:
            self._txns.complete(completed)
        elif entry.current_txn_first_offset is not None and header.is_transactional:
            self._txns.begin(header.producer_id, entry.current_txn_first_offset)
        return completed

    def aborted_by(
        self, headers: Sequence[BatchHeader], markers: Mapping[int, EndTxnMarker]
    ) -> list[AbortedTxn]:
        """The `.txnindex` entries that appending `headers` (offsets assigned; `markers` by the
        control batches' offsets) will make, computed before the append changes any state."""
        ongoing = dict(self._txns.ongoing)
        aborted: list[AbortedTxn] = []
        for header in headers:
            pid = header.producer_id
            if pid < 0:
                continue
            if not header.is_control:
                if header.is_transactional:
                    ongoing.setdefault(pid, header.base_offset)
                continue
            marker = markers.get(header.base_offset)
            first = ongoing.pop(pid, None) if marker is not None else None
            if first is not None and marker is not None and not marker.commit:
                lso = min(ongoing.values(), default=header.last_offset + 1)
                aborted.append(AbortedTxn(pid, first, header.last_offset, lso))
        return aborted

    # -- queries ----------------------------------------------------------------------------

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def producer_ids(self) -> list[int]:
        return sorted(self._producers)

    def active_producers(self) -> Mapping[int, ProducerStateEntry]:
        """Read-only view for DescribeProducers."""
        return MappingProxyType(self._producers)

    def ongoing_transactions(self) -> Mapping[int, int]:
        """Read-only producer id -> first offset of its open transaction."""
        return self._txns.ongoing

    def unreplicated_transactions(self) -> tuple[CompletedTxn, ...]:
        return self._txns.unreplicated

    def first_unstable_offset(self, high_watermark: int | None = None) -> int | None:
        """The first offset of the oldest open or not-yet-replicated transaction; transactions
        whose marker is below `high_watermark` are forgotten first (they are stable)."""
        if high_watermark is not None:
            self._txns.on_high_watermark(high_watermark)
        return self._txns.first_unstable_offset()

    def last_stable_offset(self, high_watermark: int) -> int:
        first = self.first_unstable_offset(high_watermark)
        return high_watermark if first is None else min(first, high_watermark)

    def last_stable_offset_for(self, txn: CompletedTxn) -> int:
        """The LSO recorded with an aborted transaction in the `.txnindex`."""
        return self._txns.last_stable_offset_for(txn)

    def remove_expired(self, now_ms: int) -> None:
        """Forget producers idle for producer.id.expiration.ms; never one with an open transaction."""
        expired = [pid for pid, e in self._producers.items() if self._is_expired(e, now_ms)]
        for pid in expired:
            del self._producers[pid]
        stale = [
            pid
            for pid, state in self._verifying.items()
            if now_ms - state.created_ms >= self._expiration_ms
        ]
        for pid in stale:
            del self._verifying[pid]
        if expired:  # the table changed at the same offset: its snapshot no longer holds it
            self._saved_at = None

    def _forget_oldest_idle(self) -> None:
        """Make room for a new producer: forget the least recently written one with no open
        transaction (one with an open transaction stays, as expiry keeps it; the table may then
        exceed the cap by the open transactions, each verified with the coordinator)."""
        for pid, entry in self._producers.items():
            if entry.current_txn_first_offset is None:
                del self._producers[pid]
                self._saved_at = None  # the table changed at the same offset
                return

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        if entry.current_txn_first_offset is not None:
            return False
        return now_ms - entry.last_timestamp >= self._expiration_ms

    # -- snapshots, recovery and truncation -------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        if not self.directory.is_dir():
            return []
        names = (SNAPSHOT_NAME.fullmatch(p.name) for p in self.directory.iterdir())
        return sorted(int(m.group(1)) for m in names if m)

    def latest_snapshot_offset(self) -> int | None:
        offsets = self.snapshot_offsets()
        return offsets[-1] if offsets else None

    def snapshot_path(self, offset: int) -> Path:
        return self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    @property
    def is_empty(self) -> bool:
        """No producer is known (a snapshot would hold nothing)."""
        return not self._producers

    def take_snapshot(self, next_offset: int, *, sync: bool = True) -> None:
        """Write the whole table as `<next_offset:020d>.snapshot` (atomically, fsynced), unless
        the snapshot at `next_offset` holds it already (as Kafka takes one only at a new offset:
        a log closed again with nothing appended costs no file, write or fsync).

        `sync=False` (a roll, on the event loop) writes and renames it without an fsync and
        keeps its path in `unsynced` until `synced` or `sync_unsynced`: the log fsyncs it off
        the loop with the rolled segment, before its recovery point passes it (Kafka's
        `takeSnapshot(false)` then `flushProducerStateSnapshot` on its scheduler). A crash
        before that may leave the file torn; `load` ignores it (CRC) for an older one."""
        if next_offset == self._saved_at:
            return
        data = encode_snapshot(self._producers.values())
        path = self.snapshot_path(next_offset)
        write_atomically(self._files, path, data, sync=sync)
        if not sync:
            self._unsynced.append(path)
        self._saved_at = next_offset

    @property
    def unsynced(self) -> list[Path]:
        """The snapshots written without an fsync and not yet known synced (oldest first)."""
        return list(self._unsynced)

    def synced(self, paths: Sequence[Path]) -> None:
        """`paths` (and their directory) were fsynced elsewhere: no longer unsynced."""
        done = set(paths)
        self._unsynced = [p for p in self._unsynced if p not in done]

    def sync_unsynced(self) -> None:
        """fsync every unsynced snapshot and the directory on the calling thread (a flush or a
        clean close, which fsync on this thread anyway); one deleted meanwhile is skipped."""
        if self._unsynced:
            fsync_paths(self._files, self._unsynced, self.directory)
            self._unsynced = []

    def load(self, log_start_offset: int, up_to_offset: int) -> int:
        """Reset to the newest readable snapshot in [log_start, up_to]; corrupt ones are deleted.

        Returns the offset the caller replays batch headers from (through `update`): the
        snapshot's offset, or `log_start_offset` when none is usable.
        """
        self._producers.clear()
        self._txns.clear()
        self._saved_at = None
        candidates = [o for o in self.snapshot_offsets() if log_start_offset <= o <= up_to_offset]
        now_ms = self._clock.time_ms()
        for offset in reversed(candidates):
            path = self.snapshot_path(offset)
            try:
                entries = decode_snapshot(path.read_bytes())
            except (CorruptSnapshotError, OSError) as exc:
                log.warning("ignoring producer snapshot %s: %s", path, exc)
                path.unlink(missing_ok=True)
                continue
            for entry in entries:
                if not self._is_expired(entry, now_ms):
                    self._producers[entry.producer_id] = entry
                    if entry.current_txn_first_offset is not None:
                        self._txns.begin(entry.producer_id, entry.current_txn_first_offset)
            self.map_end_offset = offset
            if len(self._producers) == len(entries):  # none dropped as expired: the file holds
                self._saved_at = offset  # the table (the caller's replay moves past it)
            return offset
        self.map_end_offset = log_start_offset
        return log_start_offset

    def truncate(self, log_start_offset: int, log_end_offset: int) -> int:
        """Drop snapshots outside [log_start, log_end] and forget state from offsets >= log_end.

        Returns the offset the caller must replay batch headers from up to `log_end_offset`;
        it equals `log_end_offset` when nothing was forgotten (no replay needed).
        """
        for offset in self.snapshot_offsets():
            if offset > log_end_offset or offset < log_start_offset:
                self._delete_snapshot(offset)
        if log_end_offset < self.map_end_offset:
            return self.load(log_start_offset, log_end_offset)
        return log_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything (the log was emptied and restarts at `offset`)."""
        self._producers.clear()
        self._txns.clear()
        self.delete_snapshots_below(2**63 - 1)
        self.map_end_offset = offset

    def delete_snapshots_below(self, offset: int) -> None:
        for snapshot in self.snapshot_offsets():
            if snapshot < offset:
                self._delete_snapshot(snapshot)
        if self._saved_at is not None and self._saved_at < offset:
            self._saved_at = None

    def delete_snapshots_above(self, offset: int) -> None:
        """Drop the snapshots past `offset` (an unclean open: a roll may have left them torn;
        the replay takes them again)."""
        for snapshot in self.snapshot_offsets():
            if snapshot > offset:
                self._delete_snapshot(snapshot)

    def _delete_snapshot(self, offset: int) -> None:
        path = self.snapshot_path(offset)
        path.unlink(missing_ok=True)
        self._unsynced = [p for p in self._unsynced if p != path]
        if offset == self._saved_at:
            self._saved_at = None
