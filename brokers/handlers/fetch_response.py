"""Hand-written Fetch response encoder (v4–12) that leaves record data in the segment files.

Why not kio: its writer would need the records as bytes in memory. Here the body is a list of
parts in which each partition's records are a file region, so the connection can sendfile them
(docs/design.md, "Fetch"). Pure; thread-safe.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from brokers.server.response import FileSegment, Part, RawResponse
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import write_uvarint

FIRST_FLEXIBLE_VERSION = 12
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">ihqq")  # index, error, high watermark, last stable offset
_I64 = struct.Struct(">q")
_ABORTED = struct.Struct(">qq")  # producer id, first offset
_TOP = struct.Struct(">ihi")  # throttle, error, session id (v7+)


@dataclass(frozen=True, slots=True)
class PartitionData:
    index: int
    error: ErrorCode
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: FileSegment | None = None
    # read_committed: (producer id, first offset) of each aborted transaction in `records`;
    # None: none listed (null for read_uncommitted, empty for read_committed)
    aborted: Sequence[tuple[int, int]] | None = None
    # v11+ (KIP-392): the follower the consumer should fetch this partition from; -1: none
    preferred_read_replica: int = -1

    @property
    def records_size(self) -> int:
        return 0 if self.records is None else self.records.size


@dataclass(frozen=True, slots=True)
class TopicData:
    name: str
    partitions: list[PartitionData]


def encode_fetch_response(
    version: int,
    topics: list[TopicData],
    *,
    throttle_ms: int = 0,
    error: ErrorCode = ErrorCode.none,
    session_id: int = 0,
    read_committed: bool = False,
) -> RawResponse:
    flexible = version >= FIRST_FLEXIBLE_VERSION
    out = bytearray(_I32.pack(throttle_ms))
    if version >= 7:
        out += _I16.pack(error) + _I32.pack(session_id)
    out += _array_length(len(topics), flexible)
    parts: list[Part] = []
    for topic in topics:
        name = topic.name.encode()
        out += (write_uvarint(len(name) + 1) if flexible else _I16.pack(len(name))) + name
        out += _array_length(len(topic.partitions), flexible)
        for partition in topic.partitions:
            _partition_head(out, partition, version, flexible, read_committed)
            if partition.records is not None and partition.records.size > 0:
                parts.append(bytes(out))
                parts.append(partition.records)
                out = bytearray()
            if flexible:
                out += b"\x00"  # partition tagged fields
        if flexible:
            out += b"\x00"  # topic tagged fields
    if flexible:
        out += b"\x00"  # response tagged fields
    parts.append(bytes(out))
    return RawResponse(parts)


def _array_length(count: int, flexible: bool) -> bytes:
    return write_uvarint(count + 1) if flexible else _I32.pack(count)


def _partition_head(
    out: bytearray, p: PartitionData, version: int, flexible: bool, read_committed: bool
) -> None:
    out += _PARTITION_HEAD.pack(p.index, p.error, p.high_watermark, p.last_stable_offset)
    if version >= 5:
        out += _I64.pack(p.log_start_offset)
    _aborted_transactions(out, p.aborted, flexible, read_committed)
    if version >= 11:
        out += _I32.pack(p.preferred_read_replica)
    size = p.records_size
    out += write_uvarint(size + 1) if flexible else _I32.pack(size)


def _aborted_transactions(
    out: bytearray, aborted: Sequence[tuple[int, int]] | None, flexible: bool, read_committed: bool
) -> None:
    """Null for read_uncommitted (as Kafka), else the list (empty on errors or no data)."""
    if aborted is None and not read_committed:
        out += b"\x00" if flexible else _I32.pack(-1)
        return
    entries = aborted or ()
    out += _array_length(len(entries), flexible)
    for producer_id, first_offset in entries:
        out += _ABORTED.pack(producer_id, first_offset)
        if flexible:
            out += b"\x00"  # aborted transaction tagged fields
