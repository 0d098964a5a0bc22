"""`FeedFollower`: a feed that dies is reopened from the last version applied, never from the
store's current one (attack #16 of issue 21), and the applied version is reported at once.

The store is an in-memory journal behind the real `ChangeFeed`; the directory records what it
was asked to apply and can fail once, as a reload that hits a lost database does."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from gateway.directory import TenantDirectory
from gateway.feed_follower import FeedFollower
from tenancy.change_feed import ChangeFeed
from tenancy.domain import Change
from tests.polling import wait_until_async
from tests.unit.tenancy.test_change_feed_resume import FlakyJournal

pytestmark = pytest.mark.unit


class JournalStore:
    def __init__(self, journal: FlakyJournal) -> None:
        self.journal = journal
        self.opened_from: list[int | None] = []
        self.reports: list[tuple[str, int]] = []
        self.forgotten: list[str] = []

    def watch(self, *, from_version: int | None = None, poll_interval_s: float = 0.2) -> ChangeFeed:
        self.opened_from.append(from_version)
        return ChangeFeed(
            self.journal,
            from_version=from_version,
            poll_interval_s=poll_interval_s,
            notify_url=None,
            channel="x",
        )

    def report_gateway(self, gateway_id: str, applied_version: int) -> None:
        self.reports.append((gateway_id, applied_version))

    def forget_gateway(self, gateway_id: str) -> None:
        self.forgotten.append(gateway_id)


class Directory:
    def __init__(self, fail_on: set[int]) -> None:
        self.applied: list[int] = []
        self._fail_on = fail_on

    async def apply(self, change: Change) -> None:
        if change.version in self._fail_on:
            self._fail_on.discard(change.version)
            raise ConnectionError("the store went away while reloading the tenant")
        self.applied.append(change.version)

    async def resync(self) -> None:
        raise AssertionError("no gap in this journal")


async def until(condition: Any) -> None:
    async def holds() -> bool:
        return bool(condition())

    await wait_until_async(holds, what="the follower's state", timeout=10, interval=0.005)


def test_a_failed_apply_reopens_the_feed_from_the_last_version_applied() -> None:
    async def scenario() -> None:
        journal = FlakyJournal()
        journal.commit("acl.created", "before-start")
        store, directory = JournalStore(journal), Directory(fail_on={3})
        registry = CollectorRegistry()
        follower = FeedFollower(
            store,
            cast(TenantDirectory, directory),
            gateway_id="gw/1",
            heartbeat_s=5.0,
            poll_interval_s=0.01,
            reopen_s=0.01,
            registry=registry,
        )
        task = asyncio.ensure_future(follower.run())
        await asyncio.wait_for(follower.started.wait(), 10)
        assert follower.applied == 1
        for subject in ("a", "revoked-key", "b"):
            journal.commit("api_key.revoked", subject)
        journal.commit("tenant.suspended", "acme")  # more changes after the failure
        await until(lambda: directory.applied == [2, 3, 4, 5])
        assert store.opened_from == [None, 2]  # reopened where it stopped, not at version 5
        await until(lambda: store.reports and store.reports[-1] == ("gw/1", 5))
        assert registry.get_sample_value("pier_gateway_change_feed_applied_version") == 5
        assert registry.get_sample_value("pier_gateway_change_feed_failures_total") == 1
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        assert store.forgotten == ["gw/1"]

    asyncio.run(scenario())


def test_the_applied_version_is_reported_at_once_not_at_the_next_heartbeat() -> None:
    async def scenario() -> None:
        journal = FlakyJournal()
        store, directory = JournalStore(journal), Directory(fail_on=set())
        follower = FeedFollower(
            store,
            cast(TenantDirectory, directory),
            gateway_id="gw/2",
            heartbeat_s=3600.0,
            poll_interval_s=0.01,
        )
        task = asyncio.ensure_future(follower.run())
        await asyncio.wait_for(follower.started.wait(), 10)
        journal.commit("acl.created", "x")
        await until(lambda: ("gw/2", 1) in store.reports)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(scenario())
