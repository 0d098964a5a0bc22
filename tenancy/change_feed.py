"""The change feed: every store mutation, in version order, to an asyncio subscriber.

    async with store.watch() as feed:
        async for change in feed:
            if feed.resync_needed: reload everything, then feed.resync_needed = False
            ...

Versions are gapless (see `tenancy.journal`), so the feed reads `changes_since(last)` whenever
something may have changed: on PostgreSQL when a `pier_changes` notification arrives on a
dedicated LISTEN connection (and every `SAFETY_POLL_S` regardless, should a notification be lost
while the listener reconnects); on SQLite every `poll_interval_s`, unless the database file's
`PRAGMA data_version` (read on a connection of the feed's own, which never writes) is the value it
had before the last read: SQLite changes it whenever another connection, of any process, commits,
so an idle feed costs one pragma on the event loop a poll instead of a read in a worker thread. It
is read before each read of the changes, so a commit during that read is caught at the next poll;
a full batch or a pragma that fails (the file busy) reads anyway. LISTEN is issued before the
starting version is read, so nothing committed in between is missed. A version jump (changes
pruned before this subscriber read them, or a database restored to an older state) sets
`resync_needed` and clears the store's verification cache; every delivered change is also applied
to that cache, so a watching process stops accepting a revoked key within the feed's latency.

The feed never skips a change because the store went away: a failed read (a lost connection, a
database restarting) is logged and retried with a backoff (`RETRY_S` doubling up to
`MAX_RETRY_S`) from the version of the last change delivered, and a lost LISTEN connection is
reopened before the next read. A subscriber whose feed dies anyway reopens it with
`store.watch(from_version=<the last version it applied>)` (`gateway.directory.TenantDirectory.
follow` does), never from the current version: a revocation committed during the outage is
delivered after it. Store reads run in worker threads (`asyncio.to_thread`). One feed belongs to
one task on one event loop.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections import deque
from types import TracebackType
from typing import Protocol

import psycopg
from psycopg import sql

from tenancy.domain import Change

log = logging.getLogger(__name__)
SAFETY_POLL_S = 5.0
BATCH = 1000
RETRY_S = 0.05
MAX_RETRY_S = 1.0


class ChangeSource(Protocol):
    """What the feed needs from the store."""

    def current_version(self) -> int: ...

    def changes_since(self, version: int, *, limit: int = 1000) -> list[Change]: ...

    def invalidate(self, change: Change) -> None: ...

    def invalidate_all(self) -> None: ...


class _Listener:
    """A LISTEN connection; `wait` returns on a notification or after `timeout`."""

    def __init__(self, url: str, channel: str) -> None:
        self._url, self._channel = url, channel
        self._conn: psycopg.AsyncConnection[tuple[object, ...]] | None = None
        self._closing = False

    async def open(self) -> None:
        conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True)
        await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
        self._conn = conn

    async def wait(self, timeout: float) -> None:
        try:
            if self._conn is None:  # lost earlier: reconnect; the caller re-reads in any case
                await self.open()
                return
            async for _ in self._conn.notifies(timeout=timeout, stop_after=1):
                pass
        except psycopg.Error as exc:
            if self._closing:
                return
            log.warning(
                "change feed: LISTEN connection lost (%s); reconnecting", type(exc).__name__
            )
            await self.close()
            await asyncio.sleep(min(timeout, 1.0))

    async def close(self, *, final: bool = False) -> None:
        self._closing = self._closing or final
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()


class _DataVersion:
    """`PRAGMA data_version` of a SQLite file on a connection of its own that never writes (WAL
    mode: the pragma reads the shared WAL index and does not wait for a writer; busy: None)."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._conn: sqlite3.Connection | None = None

    def value(self) -> int | None:
        try:
            if self._conn is None:
                self._conn = sqlite3.connect(self._path, timeout=0, isolation_level=None)
            row = self._conn.execute("PRAGMA data_version").fetchone()
            return int(row[0])
        except sqlite3.Error:
            self.close()
            return None

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


class ChangeFeed:
    """Async iterator of `Change`; use as an async context manager."""

    def __init__(
        self,
        source: ChangeSource,
        *,
        from_version: int | None,
        poll_interval_s: float,
        notify_url: str | None,
        channel: str,
        sqlite_path: str | None = None,
    ) -> None:
        self.resync_needed = False
        self._source = source
        self._version = from_version
        self._poll_s = max(0.01, poll_interval_s)
        self._listener = _Listener(notify_url, channel) if notify_url else None
        self._data_version = _DataVersion(sqlite_path) if sqlite_path else None
        self._read_at: int | None = None  # data_version before the last read that was not full
        self._buffer: deque[Change] = deque()
        self._closed = False
        self._retry_s = RETRY_S

    @property
    def version(self) -> int | None:
        """The version of the last change delivered (or the starting point)."""
        return self._version

    async def __aenter__(self) -> ChangeFeed:
        if self._listener is not None:
            await self._listener.open()
        if self._data_version is not None:
            self._data_version.value()  # opened before the start is read: later commits count
        try:
            current = await asyncio.to_thread(self._source.current_version)
        except BaseException:
            await self.aclose()  # no LISTEN connection left behind by a failed open
            raise
        if self._version is None:
            self._version = current
        elif self._version > current:  # the store is behind us: restored from a backup
            self._resync(current)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True
        if self._listener is not None:
            await self._listener.close(final=True)
        if self._data_version is not None:
            self._data_version.close()

    def __aiter__(self) -> ChangeFeed:
        return self

    async def __anext__(self) -> Change:
        if self._version is None:
            raise RuntimeError("use the feed inside `async with store.watch() as feed`")
        while not self._buffer:
            if self._closed:
                raise StopAsyncIteration
            if not await self._fetch_or_back_off():
                await self._wait()
        change = self._buffer.popleft()
        self._version = change.version
        self._source.invalidate(change)
        return change

    async def _fetch_or_back_off(self) -> bool:
        """`_fetch`, or after a failed read a backoff; the position is kept either way."""
        try:
            found = await self._fetch()
        except Exception as exc:
            log.warning(
                "event=change_feed_read_failed version=%s error=%s retry_s=%s",
                self._version,
                type(exc).__name__,
                self._retry_s,
            )
            await asyncio.sleep(self._retry_s)
            self._retry_s = min(self._retry_s * 2, MAX_RETRY_S)
            return True  # retry the read at once after the backoff
        self._retry_s = RETRY_S
        return found

    async def _fetch(self) -> bool:
        assert self._version is not None
        marker = None if self._data_version is None else self._data_version.value()
        if marker is not None and marker == self._read_at:
            return False  # nothing committed since the last read found everything
        changes = await asyncio.to_thread(self._source.changes_since, self._version, limit=BATCH)
        self._read_at = marker if len(changes) < BATCH else None
        if changes and changes[0].version != self._version + 1:
            self._resync(changes[0].version - 1)
        self._buffer.extend(changes)
        return bool(changes)

    async def _wait(self) -> None:
        if self._listener is not None:
            await self._listener.wait(SAFETY_POLL_S)
        else:
            await asyncio.sleep(self._poll_s)

    def _resync(self, version: int) -> None:
        log.warning(
            "change feed: versions %s..%s missed; subscriber must resync", self._version, version
        )
        self.resync_needed = True
        self._version = version
        self._source.invalidate_all()
