"""The gateway's follower of the tenant store's change feed, and its heartbeat.

Owns: applying every change to the `TenantDirectory` in version order, remembering the version
last applied (`applied`), and reporting it to the store (`report_gateway`: a row per gateway, see
`tenancy.gateway_registry`) as soon as it moves and every `heartbeat_s` while idle, so the admin
API can wait until a change that takes access away is in force here before it answers
(`pier_gateway_change_feed_applied_version`, `pier_gateway_change_feed_failures_total`). After
any failure (the store unreachable, a lost LISTEN connection, an apply that raised) the feed is
reopened from `applied`, never from the store's current version: a revocation committed during
an outage is applied once the store is back (attack #16 of issue 21). The starting point is the
store's version when the follower first opens the feed; everything before it the directory reads
fresh from the store, so the gateway waits for `started` before it admits connections. Runs on
the event loop; not thread-safe; store calls run in worker threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge

from gateway.directory import TenantDirectory
from tenancy.change_feed import ChangeFeed

log = logging.getLogger("pier.gateway.feed")
HEARTBEAT_S = 1.0  # gateway.heartbeat.interval.ms
POLL_INTERVAL_S = 0.05  # SQLite: how often the feed looks for changes (PostgreSQL is notified)
REOPEN_S = 0.5


class FeedStore(Protocol):
    def watch(
        self, *, from_version: int | None = None, poll_interval_s: float = 0.2
    ) -> ChangeFeed: ...

    def report_gateway(self, gateway_id: str, applied_version: int) -> None: ...

    def forget_gateway(self, gateway_id: str) -> None: ...


class FeedFollower:
    def __init__(
        self,
        store: FeedStore,
        directory: TenantDirectory,
        *,
        gateway_id: str,
        heartbeat_s: float = HEARTBEAT_S,
        poll_interval_s: float = POLL_INTERVAL_S,
        reopen_s: float = REOPEN_S,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.applied: int | None = None
        self._store = store
        self._directory = directory
        self._id = gateway_id
        self._heartbeat_s = heartbeat_s
        self._poll_s = poll_interval_s
        self._reopen_s = reopen_s
        self._moved = asyncio.Event()
        self.started = asyncio.Event()  # set once the feed is open (its starting version read)
        registry = registry or CollectorRegistry()
        self._version_gauge = Gauge(
            "pier_gateway_change_feed_applied_version",
            "The tenant store's change version this gateway has applied",
            registry=registry,
        )
        self._failures = Counter(
            "pier_gateway_change_feed_failures",
            "Times the change feed was reopened after a store error or a failed apply",
            registry=registry,
        )

    async def run(self) -> None:
        """Follow until cancelled; then remove this gateway's heartbeat row (best effort)."""
        heartbeat = asyncio.create_task(self._heartbeat(), name="gateway-heartbeat")
        try:
            while True:
                await self._follow_once()
                await asyncio.sleep(self._reopen_s)
        finally:
            heartbeat.cancel()
            await asyncio.gather(heartbeat, return_exceptions=True)
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self._store.forget_gateway, self._id)

    async def _follow_once(self) -> None:
        """One life of the feed: open it where we stopped, apply until it fails."""
        try:
            feed = self._store.watch(from_version=self.applied, poll_interval_s=self._poll_s)
            async with feed:
                if self.applied is None:
                    self._advance(feed.version)
                elif feed.resync_needed:
                    await self._resync(feed)
                self.started.set()
                async for change in feed:
                    if feed.resync_needed:
                        await self._resync(feed)
                    await self._directory.apply(change)
                    self._advance(change.version)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._failures.inc()
            log.warning(
                "event=change_feed_failed applied_version=%s error=%r reopen_s=%s",
                self.applied,
                exc,
                self._reopen_s,
            )

    async def _resync(self, feed: ChangeFeed) -> None:
        """After a gap (or a store behind us): everything is reloaded, so the feed's position is
        in force, even when it is below `applied` (a database restored from a backup)."""
        feed.resync_needed = False
        await self._directory.resync()
        if feed.version is not None:
            self.applied = feed.version
            self._version_gauge.set(feed.version)
            self._moved.set()

    def _advance(self, version: int | None) -> None:
        if version is not None and (self.applied is None or version > self.applied):
            self.applied = version
            self._version_gauge.set(version)
            self._moved.set()

    async def _heartbeat(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._moved.wait(), self._heartbeat_s)
            self._moved.clear()
            if self.applied is None:
                continue
            try:
                await asyncio.to_thread(self._store.report_gateway, self._id, self.applied)
            except Exception as exc:
                log.warning("event=gateway_heartbeat_failed error=%r", exc)
                await asyncio.sleep(self._heartbeat_s)
