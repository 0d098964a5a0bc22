"""`ChangeFeed` after a store outage (attack #16 of issue 21): a failed read is retried from the
feed's own position, so a change committed during the outage is delivered, never skipped.

The source is an in-memory journal whose reads can be made to fail: the feed's logic is fed
versions and errors, no database."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from tenancy.change_feed import ChangeFeed
from tenancy.domain import Change
from tests.polling import wait_until_async

pytestmark = pytest.mark.unit
AT = datetime(2026, 11, 28, tzinfo=UTC)


class FlakyJournal:
    """Gapless changes in memory; `down` makes every read raise, as a lost database does."""

    def __init__(self) -> None:
        self.changes: list[Change] = []
        self.down = False
        self.failed_reads = 0
        self.invalidated: list[int] = []

    def commit(self, kind: str, subject: str) -> Change:
        change = Change(len(self.changes) + 1, kind, "acme", subject, AT)
        self.changes.append(change)
        return change

    def _read(self) -> None:
        if self.down:
            self.failed_reads += 1
            raise ConnectionError("server closed the connection unexpectedly")

    def current_version(self) -> int:
        self._read()
        return len(self.changes)

    def changes_since(self, version: int, *, limit: int = 1000) -> list[Change]:
        self._read()
        return self.changes[version : version + limit]

    def invalidate(self, change: Change) -> None:
        self.invalidated.append(change.version)

    def invalidate_all(self) -> None:
        self.invalidated.append(-1)


def feed(journal: FlakyJournal, from_version: int | None = None) -> ChangeFeed:
    return ChangeFeed(
        journal, from_version=from_version, poll_interval_s=0.01, notify_url=None, channel="x"
    )


async def next_change(subscription: ChangeFeed) -> Change:
    return await asyncio.wait_for(anext(subscription), timeout=10)


async def wait_for_failed_reads(journal: FlakyJournal, count: int) -> None:
    async def failed_enough() -> bool:
        return journal.failed_reads >= count

    await wait_until_async(failed_enough, what=f"{count} failed reads", timeout=10, interval=0.005)


def test_a_change_committed_during_an_outage_is_delivered_after_it() -> None:
    async def scenario() -> None:
        journal = FlakyJournal()
        journal.commit("acl.created", "acl-1")
        async with feed(journal) as subscription:
            assert subscription.version == 1
            pending = asyncio.ensure_future(next_change(subscription))
            journal.down = True
            await wait_for_failed_reads(journal, 3)  # the feed keeps trying, position kept
            revoked = journal.commit("api_key.revoked", "key-1")
            journal.commit("tenant.suspended", "acme")
            journal.down = False
            assert await pending == revoked
            assert (await next_change(subscription)).kind == "tenant.suspended"
            assert not subscription.resync_needed
            assert journal.invalidated == [2, 3]  # the verification cache saw the revocation

    asyncio.run(scenario())


def test_a_feed_reopened_from_a_version_delivers_everything_after_it() -> None:
    """What the gateway's follower does when a feed dies: reopen from the last version applied."""

    async def scenario() -> None:
        journal = FlakyJournal()
        for subject in ("a", "b", "c"):
            journal.commit("acl.created", subject)
        journal.commit("api_key.revoked", "key-1")
        async with feed(journal, from_version=2) as subscription:
            assert [(await next_change(subscription)).version for _ in range(2)] == [3, 4]

    asyncio.run(scenario())


def test_a_failed_open_raises_so_the_subscriber_can_reopen_it() -> None:
    async def scenario() -> None:
        journal = FlakyJournal()
        journal.down = True
        with pytest.raises(ConnectionError):
            async with feed(journal, from_version=0):
                pass

    asyncio.run(scenario())
