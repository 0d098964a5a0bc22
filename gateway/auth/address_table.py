"""Per-address state shared by the workers of one gateway (`pier gateway --workers N`;
docs/gateway-options.md, "Workers").

Owns: `AddressTable`, a file of fixed-size slots that the supervisor creates in its private socket
directory (`addresses.table`, mode 0600) and every worker maps. A slot holds one key (a source
address, or a name such as the unauthenticated-connection count, as a 16-byte BLAKE2b digest) and:
open connections per worker, checks under way per worker, failed logins and the time of the last
one, and a token bucket (tokens, refilled at). What uses it: the per-address connection cap
(`max.connections.per.ip`), the rate of new connections from a failing address and the
per-address login backoff (`gateway.auth.backoff`), so none of them multiplies by N or can be
bypassed by reconnecting until another worker takes the connection.

Concurrency: every read-modify-write holds an exclusive `flock` on the file (a syscall pair, at
accept, login and close only, never per request), so it is atomic across processes; within a
process it runs on the event loop. A worker that (re)starts zeroes its own columns first, so a
crashed worker leaks no connection counts or checks under way. Times are `time.monotonic()`
seconds (CLOCK_MONOTONIC: one clock for every process of a machine).

Slots: open addressing over a window of `PROBE` slots from the key's hash. A key takes an empty
slot of its window, else one that is idle (nothing open or under way) and quiet for `forget_s`,
else the least recently used idle one (forgiving it, as the single-process tables' LRU eviction
does); when every slot of the window is live the key is not tracked (`entry` yields None; logged
once) — 65 536 slots by default make that a pathological case.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("pier.gateway.addresses")
FILE_NAME = "addresses.table"
DEFAULT_SLOTS = 65_536
PROBE = 16
_HEAD = struct.Struct("<16sdddd")  # key, used_at, last_failure, tokens, tokens_at
_FAILURES = struct.Struct("<q")
_EMPTY_KEY = bytes(16)


@dataclass(slots=True)
class SharedEntry:
    """One key's state while the table is locked; change the fields, then leave the block."""

    failures: int
    last_failure: float
    tokens: float
    tokens_at: float  # 0.0: the bucket was never used
    connections: int  # over all workers
    in_flight: int  # over all workers
    own_connections: int
    own_in_flight: int


def _digest(key: str) -> bytes:
    digest = hashlib.blake2b(key.encode(), digest_size=16).digest()
    return digest if digest != _EMPTY_KEY else b"\x01" + digest[1:]


class AddressTable:
    """One worker's view of the shared table (`index` of `workers` columns)."""

    def __init__(self, path: Path, workers: int, index: int, *, forget_s: float = 60.0) -> None:
        if not 0 <= index < workers:
            raise ValueError(f"worker {index} of {workers}")
        self.path = path
        self.workers = workers
        self.index = index
        self.forget_s = forget_s
        self._columns = struct.Struct(f"<{workers}i{workers}i")
        self.slot_size = _HEAD.size + _FAILURES.size + self._columns.size
        self._fd = os.open(path, os.O_RDWR)
        size = os.fstat(self._fd).st_size
        if size == 0 or size % self.slot_size:
            os.close(self._fd)
            raise ValueError(f"{path}: {size} bytes is not a table of {workers} workers")
        self.slots = size // self.slot_size
        self._map = mmap.mmap(self._fd, size)
        self._full_logged = False

    @staticmethod
    def create(directory: Path, workers: int, slots: int = DEFAULT_SLOTS) -> Path:
        """The supervisor's zeroed table in `directory` (sparse: pages appear as slots are used)."""
        path = directory / FILE_NAME
        slot_size = _HEAD.size + _FAILURES.size + struct.calcsize(f"<{workers}i{workers}i")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, slots * slot_size)
        finally:
            os.close(fd)
        return path

    def close(self) -> None:
        self._map.close()
        os.close(self._fd)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def reset_worker(self) -> None:
        """Zero this worker's columns in every used slot (a (re)started worker holds nothing)."""
        with self._locked():
            for slot in range(self.slots):
                offset = slot * self.slot_size
                if self._map[offset : offset + 16] == _EMPTY_KEY:
                    continue
                columns = list(self._read_columns(offset))
                columns[self.index] = columns[self.workers + self.index] = 0
                self._write_columns(offset, columns)

    @contextlib.contextmanager
    def entry(self, key: str, now: float) -> Iterator[SharedEntry | None]:
        """`key`'s state, locked for the block and written back after it (None: not tracked)."""
        with self._locked():
            offset = self._find(_digest(key), now)
            if offset is None:
                yield None
                return
            _key, _used, last_failure, tokens, tokens_at = _HEAD.unpack_from(self._map, offset)
            (failures,) = _FAILURES.unpack_from(self._map, offset + _HEAD.size)
            columns = list(self._read_columns(offset))
            conns, flight = columns[: self.workers], columns[self.workers :]
            entry = SharedEntry(
                failures,
                last_failure,
                tokens,
                tokens_at,
                sum(conns),
                sum(flight),
                conns[self.index],
                flight[self.index],
            )
            yield entry
            columns[self.index] = max(0, entry.own_connections)
            columns[self.workers + self.index] = max(0, entry.own_in_flight)
            digest = self._map[offset : offset + 16]
            _HEAD.pack_into(
                self._map, offset, digest, now, entry.last_failure, entry.tokens, entry.tokens_at
            )
            _FAILURES.pack_into(self._map, offset + _HEAD.size, entry.failures)
            self._write_columns(offset, columns)

    def _read_columns(self, offset: int) -> tuple[int, ...]:
        return self._columns.unpack_from(self._map, offset + _HEAD.size + _FAILURES.size)

    def _write_columns(self, offset: int, columns: list[int]) -> None:
        self._columns.pack_into(self._map, offset + _HEAD.size + _FAILURES.size, *columns)

    def _find(self, digest: bytes, now: float) -> int | None:
        """The offset of `digest`'s slot, claimed (zeroed) if it had none; None: window full."""
        start = int.from_bytes(digest[:8], "little") % self.slots
        empty = quiet = lru = None
        lru_used = float("inf")
        for step in range(PROBE):
            offset = ((start + step) % self.slots) * self.slot_size
            key = self._map[offset : offset + 16]
            if key == digest:
                return offset
            if key == _EMPTY_KEY:
                empty = offset if empty is None else empty
                continue
            if any(self._read_columns(offset)):
                continue  # live: something open or under way
            _key, used_at, last_failure, _tokens, tokens_at = _HEAD.unpack_from(self._map, offset)
            if now - max(used_at, last_failure, tokens_at) >= self.forget_s and quiet is None:
                quiet = offset
            if used_at < lru_used:
                lru, lru_used = offset, used_at
        claim = empty if empty is not None else quiet if quiet is not None else lru
        if claim is None:
            if not self._full_logged:
                log.warning("event=address_table_full slots=%d probe=%d", self.slots, PROBE)
                self._full_logged = True
            return None
        self._map[claim : claim + self.slot_size] = bytes(self.slot_size)
        self._map[claim : claim + 16] = digest
        return claim
