"""Turning validated batches into what a segment writes: offsets assigned, no bodies copied.

Owns: the leader's offset and leader-epoch assignment and the follower's offset checks, both
producing the `AssignedBatches` (headers as written + buffers for one writev) an append needs.
A leader patches a copy of each 61-byte header (baseOffset and partitionLeaderEpoch sit outside
the CRC, KIP-98, so no CRC work) and writes the body straight from the request buffer. For
`message.timestamp.type=LogAppendTime` the broker also sets maxTimestamp and the timestamp-type
attribute bit, which the CRC does cover: the CRC is recomputed over the patched header tail and then
continued over the unchanged body in place (Kafka's `setMaxTimestamp`). A follower writes the bytes
as received, adjacent batches merged into one buffer.

Pure functions; thread-safe.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import Sequence
from dataclasses import dataclass

import crc32c as _crc32c
from typing_extensions import Buffer

from brokers.log.errors import UnexpectedAppendOffsetError
from brokers.records.batch import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER_SIZE,
    MAX_TIMESTAMP_OFFSET,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    parse_header,
    set_base_offset,
    set_partition_leader_epoch,
)
from brokers.records.errors import CorruptRecordError

_INT16 = struct.Struct(">h")
_INT64 = struct.Struct(">q")
_UINT32 = struct.Struct(">I")


@dataclass(slots=True)  # not frozen: one per partition appended, built 6x faster
class AssignedBatches:
    headers: list[BatchHeader]  # as they will be on disk
    parts: list[Buffer]  # the bytes to write, in order
    size: int
    max_timestamp: int
    offset_of_max_timestamp: int  # base offset of the first batch carrying max_timestamp


def assign_offsets(
    data: Buffer, batches: Sequence[tuple[int, BatchHeader]], *, first_offset: int,
    leader_epoch: int, log_append_time_ms: int | None,
) -> AssignedBatches:  # fmt: skip
    """Give `batches` (positions into `data`) consecutive offsets from `first_offset`."""
    view = memoryview(data).cast("B")
    headers: list[BatchHeader] = []
    parts: list[Buffer] = []
    offset = first_offset
    for position, header in batches:
        _check_bounds(view, position, header)
        patched = bytearray(view[position : position + HEADER_SIZE])
        set_base_offset(patched, 0, offset)
        set_partition_leader_epoch(patched, 0, leader_epoch)
        body = view[position + HEADER_SIZE : position + header.size]
        if log_append_time_ms is not None:
            _set_log_append_time(patched, body, log_append_time_ms)
        written = parse_header(patched)
        headers.append(written)
        parts += (patched, body)
        offset = written.next_offset
    return _assigned(headers, parts)


def check_follower_batches(
    data: Buffer, batches: Sequence[tuple[int, BatchHeader]], *, log_end_offset: int
) -> AssignedBatches:
    """Replicated batches as they are: offsets must start at/after the log end and increase."""
    view = memoryview(data).cast("B")
    headers = [header for _, header in batches]
    if headers[0].base_offset < log_end_offset:
        raise UnexpectedAppendOffsetError(
            f"first offset {headers[0].base_offset} is below the log end offset {log_end_offset}"
        )
    for previous, header in itertools.pairwise(headers):
        if header.base_offset <= previous.last_offset:
            raise UnexpectedAppendOffsetError(
                f"batch at {header.base_offset} does not follow {previous.last_offset}"
            )
    parts: list[Buffer] = []
    run_start = run_end = -1
    for position, header in batches:
        _check_bounds(view, position, header)
        if position != run_end:
            if run_end > run_start:
                parts.append(view[run_start:run_end])
            run_start = position
        run_end = position + header.size
    parts.append(view[run_start:run_end])
    return _assigned(headers, parts)


def _assigned(headers: list[BatchHeader], parts: list[Buffer]) -> AssignedBatches:
    max_timestamp, offset_of_max = -1, headers[0].base_offset
    for header in headers:
        if header.max_timestamp > max_timestamp:
            max_timestamp, offset_of_max = header.max_timestamp, header.base_offset
    return AssignedBatches(
        headers, parts, sum(h.size for h in headers), max_timestamp, offset_of_max
    )


def _check_bounds(view: memoryview, position: int, header: BatchHeader) -> None:
    if position < 0 or position + header.size > len(view) or header.size < HEADER_SIZE:
        raise CorruptRecordError(f"batch at {position} ({header.size} bytes) is outside the data")


def _set_log_append_time(header: bytearray, body: memoryview, timestamp_ms: int) -> None:
    (attributes,) = _INT16.unpack_from(header, ATTRIBUTES_OFFSET)
    _INT16.pack_into(header, ATTRIBUTES_OFFSET, attributes | TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(header, MAX_TIMESTAMP_OFFSET, timestamp_ms)
    crc = _crc32c.crc32c(memoryview(header)[ATTRIBUTES_OFFSET:])
    _UINT32.pack_into(header, CRC_OFFSET, int(_crc32c.crc32c(body, crc)))
