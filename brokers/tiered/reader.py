"""Reads below the local log start, served from the remote tier (Kafka's RemoteLogReader).

Owns: finding the copied segment holding an offset (`PartitionTier.segment_for`), the floor
lookup in its offset index (fetched once, then kept in a small LRU cache, as Kafka's
RemoteIndexCache), and one ranged read of the segment's data from that position, trimmed to whole
batches: those ending before the fetch offset are skipped, and at most `max_bytes` are returned
but, with `min_one_batch`, always the whole first batch (KIP-74). Only the batch headers are
parsed, never the records. `RemoteRecords` is the answer: bytes that the Fetch encoder sends as a
part like a file region's. Also `aborted` (read_committed: the aborted transactions from the
remote `.txnindex` objects, cached like the offset indexes) and `batch_by_timestamp` (ListOffsets
by timestamp: a segment's time index, then whole batches forward). A batch cut by the ranged read
is read again whole, from its own position when even its header was cut.

The store calls block, so `read` runs them with `asyncio.to_thread`; the cache is touched only on
the event loop. Not thread-safe otherwise.
"""

from __future__ import annotations

import asyncio
import struct
from bisect import bisect_right
from collections import OrderedDict
from dataclasses import dataclass

from brokers.log.txn_index import AbortedTxn
from brokers.records.batch import HEADER_SIZE, parse_header
from brokers.tiered.metadata_manager import PartitionTier
from brokers.tiered.segment_metadata import RemoteSegment
from brokers.tiered.store import IndexKind, RemoteStore

INDEX_CACHE_SEGMENTS = 64
MIN_READ_BYTES = 64 * 1024  # one ranged read at least this long (few tiny GETs)
_ENTRY = struct.Struct(">ii")
_TXN_ENTRY = struct.Struct(">hqqqq")
_TIME_ENTRY = struct.Struct(
    ">qi"
)  # brokers/log/time_index.py's entry  # brokers/log/txn_index.py's entry


class RemoteRecords(bytes):
    """Record batches read from the remote tier: bytes, with the `FileSegment` surface the Fetch
    encoder asks of a part (`size`, `read`; `fd` -1: never sent with sendfile, since bytes parts
    are written as they are)."""

    @property
    def size(self) -> int:
        return len(self)

    @property
    def fd(self) -> int:
        return -1

    @property
    def position(self) -> int:
        return 0

    def read(self) -> bytes:
        return bytes(self)


@dataclass(frozen=True, slots=True)
class RemoteRead:
    records: RemoteRecords
    first_offset: int
    next_offset: int


class RemoteReader:
    def __init__(self, store: RemoteStore, *, cached_segments: int = INDEX_CACHE_SEGMENTS) -> None:
        self._store = store
        self._cached_segments = cached_segments
        self._indexes: OrderedDict[str, tuple[list[int], list[int]]] = OrderedDict()
        self._txns: OrderedDict[str, list[AbortedTxn]] = OrderedDict()

    async def read(
        self, tier: PartitionTier, offset: int, max_bytes: int, *, min_one_batch: bool
    ) -> RemoteRead | None:
        """Whole batches from the copied segment holding `offset`; None when none holds it.
        Raises RemoteStorageError when the store fails."""
        segment = tier.segment_for(offset)
        if segment is None:
            return None
        position = await self._position(segment, offset)
        while True:
            length = min(max(max_bytes, MIN_READ_BYTES), segment.size_bytes - position)
            data = await asyncio.to_thread(
                self._store.fetch_segment, segment, position, position + length
            )
            start, end, first, next_offset = _whole_batches(data, offset, max_bytes, min_one_batch)
            if end >= 0 or start == 0:  # done, or no whole header left (the segment ended)
                break
            position += start  # the wanted batch's header was cut: read again from it
        end = max(end, start)
        if start < end and end > len(data):  # the first batch is longer than what was read
            data = await asyncio.to_thread(
                self._store.fetch_segment, segment, position + start, position + end
            )
            start, end = 0, len(data)
        return RemoteRead(RemoteRecords(data[start:end]), first, next_offset)

    async def _position(self, segment: RemoteSegment, offset: int) -> int:
        index = self._indexes.get(segment.segment_id)
        if index is None:
            raw = await asyncio.to_thread(self._store.fetch_index, segment, IndexKind.OFFSET)
            index = _parse_index(raw, segment.start_offset)
            self._indexes[segment.segment_id] = index
            while len(self._indexes) > self._cached_segments:
                self._indexes.popitem(last=False)
        else:
            self._indexes.move_to_end(segment.segment_id)
        offsets, positions = index
        found = bisect_right(offsets, offset) - 1
        # An entry names the batch whose LAST offset it is: start at the entry before `offset`'s.
        return 0 if found < 0 else positions[found]

    async def batch_by_timestamp(
        self, tier: PartitionTier, target: int, start_offset: int
    ) -> bytes | None:
        """The first whole batch at or after `start_offset` whose max timestamp is >= `target`
        (ListOffsets by timestamp, as Kafka's findOffsetByTimestamp in the remote tier): the
        first copied segment reaching `target`, a floor lookup in its time index, then whole
        batches read forward from there. None when no copied segment reaches it."""
        for segment in tier.finished:
            if segment.end_offset < start_offset or segment.max_timestamp < target:
                continue
            raw = await asyncio.to_thread(self._store.fetch_index, segment, IndexKind.TIMESTAMP)
            offset = max(_time_floor(raw, target, segment.start_offset), start_offset)
            while offset <= segment.end_offset:
                read = await self.read(tier, offset, 1 << 20, min_one_batch=True)
                if read is None or read.next_offset <= offset:
                    break
                found = _first_reaching(read.records, target, start_offset)
                if found is not None:
                    return found
                offset = read.next_offset
        return None

    async def aborted(
        self, tier: PartitionTier, fetch_offset: int, upper_bound_offset: int
    ) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping [fetch_offset, upper_bound_offset) from the remote
        segments' `.txnindex` objects, from the segment holding `fetch_offset` on, and whether
        the search is complete (Kafka's collectAbortedTransactionsInRemote)."""
        holding = tier.segment_for(fetch_offset)
        if holding is None:
            return [], False
        found: dict[tuple[int, int, int], AbortedTxn] = {}  # overlapping copies: once each
        for segment in tier.finished:
            if segment.end_offset < holding.start_offset:
                continue
            for txn in await self._txn_entries(segment):
                if txn.last_offset < fetch_offset:
                    continue
                if txn.first_offset < upper_bound_offset:
                    found[txn.producer_id, txn.first_offset, txn.last_offset] = txn
                if txn.last_stable_offset >= upper_bound_offset:
                    return list(found.values()), True
        return list(found.values()), False

    async def _txn_entries(self, segment: RemoteSegment) -> list[AbortedTxn]:
        entries = self._txns.get(segment.segment_id)
        if entries is None:
            raw = await asyncio.to_thread(self._store.fetch_index, segment, IndexKind.TRANSACTION)
            entries = [
                AbortedTxn(pid, first, last, lso)
                for _, pid, first, last, lso in _TXN_ENTRY.iter_unpack(
                    raw[: len(raw) - len(raw) % _TXN_ENTRY.size]
                )
            ]
            self._txns[segment.segment_id] = entries
            while len(self._txns) > self._cached_segments:
                self._txns.popitem(last=False)
        return entries

    def forget(self, segment_id: str) -> None:
        self._indexes.pop(segment_id, None)
        self._txns.pop(segment_id, None)


def _time_floor(raw: bytes, target: int, base_offset: int) -> int:
    """The offset of the last time index entry with timestamp <= `target` (else the base)."""
    found = base_offset
    for timestamp, relative in _TIME_ENTRY.iter_unpack(raw[: len(raw) - len(raw) % 12]):
        if timestamp > target:
            break
        found = base_offset + relative
    return found


def _first_reaching(data: bytes, target: int, start_offset: int) -> bytes | None:
    position = 0
    while position + HEADER_SIZE <= len(data):
        header = parse_header(data, position)
        if header.max_timestamp >= target and header.last_offset >= start_offset:
            return data[position : position + header.size]
        position += header.size
    return None


def _parse_index(raw: bytes, base_offset: int) -> tuple[list[int], list[int]]:
    offsets: list[int] = []
    positions: list[int] = []
    for relative, position in _ENTRY.iter_unpack(raw[: len(raw) - len(raw) % _ENTRY.size]):
        offsets.append(base_offset + relative)
        positions.append(position)
    return offsets, positions


def _whole_batches(
    data: bytes, offset: int, max_bytes: int, min_one_batch: bool
) -> tuple[int, int, int, int]:
    """(start, end, first offset, next offset) of the whole batches of `data` to return: from the
    first batch ending at or after `offset`, up to `max_bytes` (the first one whole if
    `min_one_batch`). `end` past `len(data)` means the first batch was cut and must be re-read;
    `end` -1 means no batch was found before a cut header at `start` (read again from there)."""
    position = 0
    start = -1
    first = next_offset = offset
    while position + HEADER_SIZE <= len(data):
        header = parse_header(data, position)
        end = position + header.size
        if header.last_offset < offset:
            position = end
            continue
        if start < 0:
            start, first = position, header.base_offset
            if header.size > max_bytes and not min_one_batch:
                return start, start, offset, offset
            if end > len(data):
                return start, end, first, header.next_offset
        elif end - start > max_bytes or end > len(data):
            break
        next_offset = header.next_offset
        position = end
    if start < 0:
        return position, -1, offset, offset
    return start, position, first, next_offset
