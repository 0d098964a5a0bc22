"""Reading a whole `.log` segment back into records, for debugging and end-to-end checks.

Owns: `decode_log_segment(path)`. Reads the file at once (segments are bounded by
`segment.bytes`), then walks and decodes every batch, CRC-checked. Not for the broker's own
paths, which stay on raw batches. Thread-safe (no shared state).
"""

from __future__ import annotations

from pathlib import Path

from brokers.records.batch import BatchHeader, iter_headers
from brokers.records.builder import read_batch
from brokers.records.compression import DEFAULT_MAX_DECOMPRESSED_SIZE
from brokers.records.record import Record


def decode_log_segment(
    path: str | Path, *, max_decompressed_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> list[tuple[BatchHeader, list[Record]]]:
    """Every batch of the segment file at `path` with its records; raises on the first bad one."""
    data = Path(path).read_bytes()
    return [
        read_batch(data, pos, max_decompressed_size=max_decompressed_size)
        for pos, _ in iter_headers(data)
    ]
