"""Crash recovery of a partition directory: batch validation and leftover files.

Owns: the rules that decide where a segment's valid data ends (Kafka's `LogSegment.recover` and
`LogLoader`) and the clean-up of files a crash can leave behind:
- a batch is valid when its header is complete, magic is 2, its length is sane and inside the file,
  its CRC32C matches, and its offsets are inside the segment and after the previous batch. The
  base offset is NOT covered by the CRC (the broker rewrites it, KIP-98), so the offset checks are
  what catch a flipped bit there. The first invalid batch ends the segment;
- `.deleted` files were already logically deleted; `.cleaned` are half-written compaction output;
  `.tmp` are half-written checkpoints or snapshots: all are removed. A `.swap` set is a finished
  compaction whose final rename was interrupted: it replaces the segments it covers (Kafka's
  swap completion), and its indexes are rebuilt; its `.txnindex` too, from the ABORT markers
  (index `.swap` files are dropped: the swapped-in segment has no `.index`, so it is recovered
  when it holds data; an empty one loads with empty indexes).

Reads whole chunks with `preadv` into one reusable buffer and checks CRCs on memoryviews (no
copies, no per-record work). Pure functions over files; run on the event loop; not thread-safe.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from brokers.log.file_records import FileRecords
from brokers.records.batch import CRC_OFFSET, HEADER_SIZE, LOG_OVERHEAD, BatchHeader, parse_header
from brokers.records.crc import crc32c
from brokers.records.errors import RecordError

RECOVERY_CHUNK = 4 * 1024 * 1024
_CRC_FROM = CRC_OFFSET + 4  # attributes: the first byte the CRC covers
_MAX_RELATIVE_OFFSET = 2**31 - 1
_SEGMENT_FILE = re.compile(r"(\d{20})\.(log|index|timeindex|txnindex)(\.swap|\.cleaned|\.deleted)?")
_SCRATCH_SUFFIXES = (".deleted", ".cleaned", ".tmp")


def valid_batches(records: FileRecords, base_offset: int) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each valid batch from the start of the file, stopping at the first
    invalid one; the caller truncates the file after the last batch yielded."""
    buffer = bytearray(min(RECOVERY_CHUNK, max(records.size, HEADER_SIZE)))
    chunk_start, chunk_len = 0, 0
    position, previous_last = 0, base_offset - 1
    while position + HEADER_SIZE <= records.size:
        if position + HEADER_SIZE > chunk_start + chunk_len:
            chunk_start, chunk_len = position, records.read_into(buffer, position)
        header = _header_at(buffer, position - chunk_start, chunk_len)
        if header is None or not _offsets_ok(header, base_offset, previous_last):
            return
        if position + header.size > records.size:
            return
        if position + header.size > chunk_start + chunk_len:
            if header.size > len(buffer):
                buffer = bytearray(header.size)
            chunk_start, chunk_len = position, records.read_into(buffer, position)
        at = position - chunk_start
        if crc32c(memoryview(buffer)[at + _CRC_FROM : at + header.size]) != header.crc:
            return
        yield position, header
        previous_last = header.last_offset
        position += header.size


def _header_at(buffer: bytearray, at: int, chunk_len: int) -> BatchHeader | None:
    if at + HEADER_SIZE > chunk_len:
        return None
    try:
        header = parse_header(memoryview(buffer)[:chunk_len], at)
    except RecordError:
        return None
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD or header.last_offset_delta < 0:
        return None
    return header


def _offsets_ok(header: BatchHeader, base_offset: int, previous_last: int) -> bool:
    return (
        header.base_offset > previous_last
        and header.last_offset - base_offset <= _MAX_RELATIVE_OFFSET
    )


def remove_leftover_files(directory: Path) -> None:
    """Delete scratch files and complete interrupted compaction swaps (see module docstring)."""
    for path in directory.iterdir():
        if path.is_file() and path.name.endswith(_SCRATCH_SUFFIXES):
            path.unlink(missing_ok=True)
    swaps = sorted(p for p in directory.iterdir() if p.name.endswith(".log.swap"))
    for swap in swaps:
        _complete_swap(directory, swap)
    for path in directory.iterdir():
        if path.name.endswith(".swap"):
            path.unlink(missing_ok=True)  # index swaps: indexes are rebuilt from the log


def _complete_swap(directory: Path, swap: Path) -> None:
    """Replace the segments a finished `.log.swap` covers with it."""
    records = FileRecords.open(swap)
    try:
        base = int(swap.name[:20])
        last = base
        for _, header in valid_batches(records, base):
            last = header.last_offset
    finally:
        records.close()
    for path in directory.iterdir():
        match = _SEGMENT_FILE.fullmatch(path.name)
        if match and match.group(3) is None and base <= int(match.group(1)) <= last:
            path.unlink()
    swap.rename(directory / swap.name.removesuffix(".swap"))


def segment_base_offsets(directory: Path) -> list[int]:
    """Base offsets of the `.log` files in `directory`, ascending; orphan indexes are removed."""
    bases: set[int] = set()
    indexes: list[tuple[int, Path]] = []
    for path in directory.iterdir():
        match = _SEGMENT_FILE.fullmatch(path.name)
        if not match or match.group(3):
            continue
        if match.group(2) == "log":
            bases.add(int(match.group(1)))
        else:
            indexes.append((int(match.group(1)), path))
    for base, path in indexes:
        if base not in bases:
            path.unlink(missing_ok=True)
    return sorted(bases)
