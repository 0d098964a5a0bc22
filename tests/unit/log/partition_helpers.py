"""Helpers for the partition-log tests: build batches, append them, read everything back."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from brokers.common.clock import ManualClock
from brokers.log.config import LogConfig
from brokers.log.log import AppendResult, Log
from brokers.records.batch import BatchHeader, iter_headers
from brokers.records.builder import build_batch


def make_batch(
    records: int = 1,
    *,
    value: bytes = b"v" * 20,
    timestamp: int = 1_700_000_000_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    return build_batch(
        [(b"k%d" % i, value) for i in range(records)],
        base_timestamp=timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


def headers_of(data: bytes) -> list[tuple[int, BatchHeader]]:
    return list(iter_headers(data))


def append(log: Log, data: bytes, *, leader_epoch: int = 0) -> AppendResult:
    return log.append_as_leader(data, headers_of(data), leader_epoch=leader_epoch)


def open_log(
    root: Path,
    clock: ManualClock,
    config: LogConfig | None = None,
    *,
    recovery_point: int = 0,
    log_start_offset: int = 0,
    had_clean_shutdown: bool = False,
) -> Log:
    return Log.open(
        root / "topic-0",
        config or LogConfig(),
        clock=clock,
        recovery_point=recovery_point,
        log_start_offset=log_start_offset,
        had_clean_shutdown=had_clean_shutdown,
    )


@dataclass(frozen=True)
class StoredBatch:
    base_offset: int
    last_offset: int
    max_timestamp: int
    body: bytes  # everything after the 61-byte header (what the producer sent)


def read_all(log: Log, *, from_offset: int | None = None) -> list[StoredBatch]:
    """Every batch from `from_offset` (default log start) to the log end, via `Log.read`."""
    offset = log.log_start_offset if from_offset is None else from_offset
    batches: list[StoredBatch] = []
    while offset < log.log_end_offset:
        result = log.read(offset, 1 << 20)
        assert result.region is not None, f"nothing read at {offset}"
        data = result.region.read()
        for pos, header in iter_headers(data):
            batches.append(
                StoredBatch(
                    header.base_offset,
                    header.last_offset,
                    header.max_timestamp,
                    data[pos + 61 : pos + header.size],
                )
            )
        offset = result.next_offset
    return batches


def held_by_process(path: Path) -> list[str]:
    """The files under `path` (or `path` itself) that a descriptor of this process still has
    open, deleted or not."""
    held = []
    for entry in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{entry}").removesuffix(" (deleted)")
        except OSError:  # the listing's own descriptor, closed meanwhile
            continue
        if target == str(path) or target.startswith(f"{path}/"):
            held.append(target)
    return held
