"""Kafka's checkpoint files: a version line, a count line, then one entry per line.

Owns: the generic `CheckpointFile` (Kafka's CheckpointFile + its formatters) and the offset flavour
used per log dir by `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
`replication-offset-checkpoint` and `cleaner-offset-checkpoint`:

    0
    2
    orders 0 1042
    orders 1 977

Writes go to `<name>.tmp`, are fsynced, renamed over the file and the directory is fsynced, so a
crash leaves either the old or the new file, never a torn one; a failed write removes its `.tmp`
and raises the OSError, leaving the old file in place (through the `FileOps` seam). Reads are strict like Kafka's: the
wrong version, a bad line or a count that does not match raises CorruptCheckpointError; a missing
file reads as empty. `LEADER_EPOCH_FORMAT` is the `epoch startOffset` flavour. Stateless; safe
from any thread as long as one writer owns a path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from brokers.log.errors import CorruptCheckpointError
from brokers.log.file_ops import OS_FILES, FileOps, write_atomically

T = TypeVar("T")
CHECKPOINT_VERSION = 0
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"


@dataclass(frozen=True, slots=True)
class CheckpointFormat(Generic[T]):
    """How one entry becomes a line and back; `parse` raises ValueError on a bad line."""

    render: Callable[[T], str]
    parse: Callable[[str], T]


def _parse_offset_entry(line: str) -> tuple[str, int, int]:
    topic, partition, offset = line.split(" ")
    return topic, int(partition), int(offset)


def _parse_epoch_entry(line: str) -> tuple[int, int]:
    epoch, offset = line.split(" ")
    return int(epoch), int(offset)


OFFSET_FORMAT: CheckpointFormat[tuple[str, int, int]] = CheckpointFormat(
    lambda e: f"{e[0]} {e[1]} {e[2]}", _parse_offset_entry
)
LEADER_EPOCH_FORMAT: CheckpointFormat[tuple[int, int]] = CheckpointFormat(
    lambda e: f"{e[0]} {e[1]}", _parse_epoch_entry
)


class CheckpointFile(Generic[T]):
    def __init__(
        self, path: Path, entry_format: CheckpointFormat[T], files: FileOps = OS_FILES
    ) -> None:
        self.path = path
        self._format = entry_format
        self._files = files

    def read(self) -> list[T]:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        lines = text.splitlines()
        if len(lines) < 2 or lines[0].strip() != str(CHECKPOINT_VERSION):
            raise CorruptCheckpointError(f"{self.path}: bad header {lines[:2]!r}")
        try:
            expected = int(lines[1])
            entries = [self._format.parse(line) for line in lines[2:]]
        except ValueError as exc:
            raise CorruptCheckpointError(f"{self.path}: malformed line ({exc})") from None
        if len(entries) != expected:
            raise CorruptCheckpointError(
                f"{self.path}: expected {expected} entries, found {len(entries)}"
            )
        return entries

    def write(self, entries: Iterable[T]) -> None:
        lines = [self._format.render(entry) for entry in entries]
        body = f"{CHECKPOINT_VERSION}\n{len(lines)}\n" + "".join(f"{line}\n" for line in lines)
        write_atomically(self._files, self.path, body.encode("utf-8"))


def read_offsets(path: Path) -> dict[tuple[str, int], int]:
    """{(topic, partition): offset} from an offset checkpoint; raises CorruptCheckpointError."""
    return {(t, p): o for t, p, o in CheckpointFile(path, OFFSET_FORMAT).read()}


def write_offsets(
    path: Path, offsets: Mapping[tuple[str, int], int], files: FileOps = OS_FILES
) -> None:
    entries = ((topic, partition, offset) for (topic, partition), offset in sorted(offsets.items()))
    CheckpointFile(path, OFFSET_FORMAT, files).write(entries)
