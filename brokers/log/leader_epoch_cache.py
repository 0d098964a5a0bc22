"""The leader-epoch cache of one partition: the first offset written in each leader epoch.

Owns: Kafka's `LeaderEpochFileCache` and its `leader-epoch-checkpoint` file (KIP-101, KIP-279).
Followers ask the leader, through OffsetForLeaderEpoch, where their epoch ended and truncate to
it before fetching; that is what keeps replicas from diverging after leader changes.

File format, as Kafka writes it: a version line `0`, a count line, then one `epoch startOffset`
line per entry, read and written by `brokers.log.checkpoints.CheckpointFile` (temp file, fsync,
atomic rename). Every change is written at once (Kafka defers truncation writes to a scheduler;
truncations are rare, and writing synchronously keeps the file always current). A checkpoint that
cannot be parsed (an empty file included) is logged and the cache starts empty: Kafka would take
the log dir offline; a replica with no epochs falls back to its high watermark, which is safe.

Inside `batched_writes()` (LeaderAndIsr: thousands of partitions become leader in one request)
the writes are collected instead and done together on leaving the block by
`brokers.log.checkpoints.write_all`, each file as durable as a lone write, the fsyncs in flight
at once: the request's answer still goes out only once every checkpoint is on disk, as Kafka's
does (it writes each synchronously). A cache written twice in the block is written once, with
its entries at the end. The block yields the failures ({checkpoint path: OSError}, filled on
exit) so the caller can report those partitions (in memory the entries stay, as after a failed
lone write).

Entries are strictly increasing in both epoch and start offset. Runs on the event loop; not
thread-safe (the batch is one per process, for the synchronous code inside the block).
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from brokers.log.checkpoints import LEADER_EPOCH_FORMAT, CheckpointFile, write_all
from brokers.log.errors import CorruptCheckpointError
from brokers.log.file_ops import OS_FILES, FileOps

log = logging.getLogger(__name__)

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1
CHECKPOINT_NAME = "leader-epoch-checkpoint"

# The caches written inside the current `batched_writes()` block (None outside one).
_pending: dict[Path, LeaderEpochCache] | None = None


@contextmanager
def batched_writes() -> Iterator[dict[Path, OSError]]:
    """Collect the checkpoint writes of the block and do them together when it ends; yields
    the dict of failed checkpoint paths, filled then. A nested block joins the outer one (its
    writes' failures are reported to the outer block's caller)."""
    global _pending
    failures: dict[Path, OSError] = {}
    if _pending is not None:
        yield failures
        return
    _pending = {}
    try:
        yield failures
    finally:
        caches, _pending = _pending, None
        failures.update(write_all([(c._file, c.entries()) for c in caches.values()]))
        for path, exc in failures.items():
            log.warning("event=leader_epoch_checkpoint_failed path=%s error=%r", path, exc)


class LeaderEpochCache:
    """(epoch, start offset) pairs backed by a `leader-epoch-checkpoint` file."""

    def __init__(
        self, checkpoint_path: Path, files: FileOps = OS_FILES, *, fresh: bool = False
    ) -> None:
        """`fresh`: a new log's, with no checkpoint to read."""
        self.checkpoint_path = checkpoint_path
        self._file = CheckpointFile(checkpoint_path, LEADER_EPOCH_FORMAT, files)
        self._epochs: list[int] = []
        self._starts: list[int] = []
        if fresh:
            return
        try:
            for epoch, start_offset in self._file.read():
                self._assign(epoch, start_offset)  # re-applies Kafka's monotonicity rules
        except (OSError, ValueError, CorruptCheckpointError) as exc:
            log.warning(
                "leader epoch checkpoint %s unusable, starting empty: %s", checkpoint_path, exc
            )
            self._epochs.clear()
            self._starts.clear()

    # -- updates ----------------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset`; entries that now conflict are dropped.

        Kafka's rule: nothing to do when `epoch` is already the latest and starts at or before
        `start_offset`; otherwise drop every trailing entry whose epoch >= `epoch` or whose start
        >= `start_offset`, then append.
        """
        if self._assign(epoch, start_offset):
            self._write()

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries starting at or after `end_offset` (the log was truncated to it)."""
        if end_offset < 0 or not self._starts or self._starts[-1] < end_offset:
            return
        keep = bisect.bisect_left(self._starts, end_offset)
        del self._epochs[keep:], self._starts[keep:]
        self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """Forget epochs wholly below `start_offset`; the epoch covering it now starts there.

        Exclusive like Kafka: truncate_from_start(6) keeps an entry at offset 6.
        """
        removed = bisect.bisect_right(self._starts, start_offset)
        if removed == 0:
            return
        covering_epoch = self._epochs[removed - 1]
        self._epochs[:removed] = [covering_epoch]
        self._starts[:removed] = [start_offset]
        self._write()

    def restore(self, entries: list[tuple[int, int]]) -> None:
        """Back to `entries` (from `entries()`) in memory only: the undo of a failed append whose
        checkpoint write failed. The file may keep the undone entry; it starts at or after the
        log end, so the next write or `truncate_from_end` at the next open drops it."""
        self._epochs = [epoch for epoch, _ in entries]
        self._starts = [start for _, start in entries]

    def clear(self) -> None:
        """Forget every entry and write the empty checkpoint."""
        self._epochs.clear()
        self._starts.clear()
        self._write()

    # -- queries ----------------------------------------------------------------------------

    def latest_epoch(self) -> int | None:
        return self._epochs[-1] if self._epochs else None

    def latest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[-1], self._starts[-1]) if self._epochs else None

    def earliest_entry(self) -> tuple[int, int] | None:
        return (self._epochs[0], self._starts[0]) if self._epochs else None

    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._starts, strict=True))

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, as Kafka's LeaderEpochFileCache answers.

        - undefined requested epoch, or one above every cached epoch: (-1, -1);
        - the latest epoch: (epoch, log_end_offset) — it is still being written;
        - otherwise the largest cached epoch <= requested, ending where the next epoch starts;
        - below the first cached epoch (its data was deleted): (requested, first start offset)
          — since Kafka 2.1 (KAFKA-7415) rather than KIP-279's original (-1, -1), so a follower
          truncates to the leader's start instead of falling back to its high watermark.
        """
        undefined = (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if epoch == UNDEFINED_EPOCH or not self._epochs:
            return undefined
        if epoch == self._epochs[-1]:
            return epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, epoch)
        if higher == len(self._epochs):
            return undefined
        if higher == 0:
            return epoch, self._starts[0]
        return self._epochs[higher - 1], self._starts[higher]

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range contains `offset`, or None below the first entry."""
        index = bisect.bisect_right(self._starts, offset) - 1
        return self._epochs[index] if index >= 0 else None

    # -- internals --------------------------------------------------------------------------

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if self._epochs and epoch == self._epochs[-1] and start_offset >= self._starts[-1]:
            return False
        keep = len(self._epochs)
        while keep and (self._epochs[keep - 1] >= epoch or self._starts[keep - 1] >= start_offset):
            keep -= 1
        dropped = list(zip(self._epochs[keep:], self._starts[keep:], strict=True))
        if len(dropped) > 1 or (dropped and dropped[0][1] != start_offset):
            # Only unusual when data was written in the dropped epochs (Kafka warns likewise).
            log.warning("epoch %d at %d truncated entries %s", epoch, start_offset, dropped)
        del self._epochs[keep:], self._starts[keep:]
        self._epochs.append(epoch)
        self._starts.append(start_offset)
        return True

    def _write(self) -> None:
        if _pending is not None:
            _pending[self.checkpoint_path] = self
            return
        self._file.write(self.entries())
