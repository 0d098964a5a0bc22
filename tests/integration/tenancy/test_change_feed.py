"""The change feed on both stores (LISTEN/NOTIFY on PostgreSQL, polling on SQLite): a revocation made
through another connection reaches a subscriber within 1 s, changes arrive in version order, gaps
set `resync_needed`, and a watching process's verification cache forgets revoked keys."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tenancy.change_feed import BATCH, ChangeFeed
from tenancy.domain import Change
from tenancy.store import TenantStore
from tests.integration.tenancy.helpers import OPERATOR, key_for, tenant
from tests.polling import wait_until_async
from tests.tenancy_fixtures import TenancyClock

pytestmark = pytest.mark.integration
DELIVERY_DEADLINE_S = 1.0  # the acceptance bound


async def _next(feed: ChangeFeed, timeout: float = DELIVERY_DEADLINE_S) -> Change:
    return await asyncio.wait_for(anext(feed), timeout)


def test_revocation_reaches_a_subscriber_within_a_second(
    store: TenantStore, store_url: str, tenancy_clock: TenancyClock
) -> None:
    tenant(store, "acme")
    _, key, _ = key_for(store, "acme")

    async def scenario() -> Change:
        with TenantStore.open(store_url, clock=tenancy_clock) as admin:  # another process's view
            async with store.watch() as feed:
                await asyncio.to_thread(admin.revoke_api_key, key.key_id, actor=OPERATOR)
                return await _next(feed)

    change = asyncio.run(scenario())
    assert (change.kind, change.subject, change.tenant_id) == (
        "api_key.revoked",
        key.key_id,
        "acme",
    )
    assert change.version == store.current_version()


def test_changes_arrive_in_version_order(store: TenantStore) -> None:
    async def scenario() -> list[Change]:
        async with store.watch() as feed:
            start = feed.version
            for name in ("aaa", "bbb", "ccc"):
                await asyncio.to_thread(tenant, store, name)
            changes = [await _next(feed) for _ in range(3)]
            assert start is not None and changes[0].version == start + 1
            assert not feed.resync_needed
            return changes

    changes = asyncio.run(scenario())
    assert [c.subject for c in changes] == ["aaa", "bbb", "ccc"]
    assert [c.version for c in changes] == [changes[0].version + i for i in range(3)]


def test_from_version_replays_history(store: TenantStore) -> None:
    for name in ("aaa", "bbb"):
        tenant(store, name)

    async def scenario() -> list[str]:
        async with store.watch(from_version=0) as feed:
            return [(await _next(feed)).subject for _ in range(2)]

    assert asyncio.run(scenario()) == ["aaa", "bbb"]


def test_a_gap_sets_resync_needed(store: TenantStore) -> None:
    for name in ("aaa", "bbb", "ccc"):
        tenant(store, name)
    store.prune_changes(2)

    async def scenario() -> tuple[Change, bool]:
        async with store.watch(from_version=0) as feed:
            return await _next(feed), feed.resync_needed

    change, resync = asyncio.run(scenario())
    assert (change.version, change.subject, resync) == (3, "ccc", True)


def test_a_subscriber_ahead_of_the_store_resyncs(store: TenantStore) -> None:
    tenant(store, "aaa")

    async def scenario() -> tuple[bool, int | None, Change]:
        async with store.watch(from_version=50) as feed:
            state = feed.resync_needed, feed.version
            await asyncio.to_thread(tenant, store, "bbb")
            return (*state, await _next(feed))

    resync, version, change = asyncio.run(scenario())
    assert (resync, version, change.subject) == (True, 1, "bbb")


def test_watching_store_forgets_revoked_keys_from_its_cache(
    store: TenantStore, store_url: str, tenancy_clock: TenancyClock
) -> None:
    tenant(store, "acme")
    _, key, secret = key_for(store, "acme")
    gateway = TenantStore.open(store_url, clock=tenancy_clock, verification_cache_ttl_s=3600)

    async def scenario() -> None:
        async with gateway.watch() as feed:
            assert gateway.verify_api_key(key.key_id, secret) is not None  # now cached
            await asyncio.to_thread(store.revoke_api_key, key.key_id, actor=OPERATOR)
            # Without the feed the cache would still answer (see the TTL test below).
            assert gateway.verify_api_key(key.key_id, secret) is not None
            assert (await _next(feed)).kind == "api_key.revoked"
            assert gateway.verify_api_key(key.key_id, secret) is None

    try:
        asyncio.run(scenario())
    finally:
        gateway.close()


def test_cache_entries_expire_after_their_ttl(
    store: TenantStore, store_url: str, tenancy_clock: TenancyClock
) -> None:
    tenant(store, "acme")
    _, key, secret = key_for(store, "acme")
    with TenantStore.open(store_url, clock=tenancy_clock, verification_cache_ttl_s=10) as gateway:
        assert gateway.verify_api_key(key.key_id, secret) is not None
        assert gateway.scram_credential(key.key_id, "SCRAM-SHA-256") is not None
        store.set_tenant_status("acme", "suspended", actor=OPERATOR)
        assert gateway.verify_api_key(key.key_id, secret) is not None  # cached, unwatched
        assert gateway.scram_credential(key.key_id, "SCRAM-SHA-256") is not None
        tenancy_clock.advance(10)
        assert gateway.verify_api_key(key.key_id, secret) is None
        assert gateway.scram_credential(key.key_id, "SCRAM-SHA-256") is None


def test_own_suspension_invalidates_at_once(store_url: str, tenancy_clock: TenancyClock) -> None:
    with TenantStore.open(store_url, clock=tenancy_clock, verification_cache_ttl_s=3600) as both:
        tenant(both, "acme")
        _, key, secret = key_for(both, "acme")
        assert both.verify_api_key(key.key_id, secret) is not None
        both.set_tenant_status("acme", "suspended", actor=OPERATOR)
        assert both.verify_api_key(key.key_id, secret) is None


class CountedReads:
    """The store as the feed's source, counting the reads of the journal."""

    def __init__(self, store: TenantStore) -> None:
        self.store = store
        self.reads = 0

    def current_version(self) -> int:
        return self.store.current_version()

    def changes_since(self, version: int, *, limit: int = 1000) -> list[Change]:
        self.reads += 1
        return self.store.changes_since(version, limit=limit)

    def invalidate(self, change: Change) -> None:
        self.store.invalidate(change)

    def invalidate_all(self) -> None:
        self.store.invalidate_all()


def test_an_idle_sqlite_feed_reads_the_journal_only_after_a_commit(
    tmp_path: Path, tenancy_clock: TenancyClock
) -> None:
    """SQLite's data_version spares an idle feed its reads; a commit from another connection is
    still delivered, and a backlog bigger than a batch is read to its end."""
    url = f"sqlite:///{tmp_path / 'tenancy.db'}"
    with TenantStore.open(url, clock=tenancy_clock) as store:
        store.upgrade()
        for i in range(BATCH + 5):
            tenant(store, f"t{i:04d}")
        source = CountedReads(store)
        path = str(tmp_path / "tenancy.db")

        async def scenario() -> None:
            feed = ChangeFeed(
                source,
                from_version=0,
                poll_interval_s=0.01,
                notify_url=None,
                channel="x",
                sqlite_path=path,
            )
            async with feed:
                backlog = [await _next(feed, timeout=10) for _ in range(BATCH + 5)]
                assert backlog[-1].subject == f"t{BATCH + 4:04d}"
                polled = asyncio.create_task(anext(feed))
                await wait_until_async(
                    lambda: _settled(source), what="the feed idle", timeout=10, interval=0.05
                )
                idle_reads = source.reads
                await asyncio.sleep(0.3)  # thirty polls' worth of idle time: not one read
                assert source.reads == idle_reads
                with TenantStore.open(url, clock=tenancy_clock) as other:
                    await asyncio.to_thread(tenant, other, "late")
                change = await asyncio.wait_for(polled, DELIVERY_DEADLINE_S)
                assert change.subject == "late"

        asyncio.run(scenario())


async def _settled(source: CountedReads) -> bool:
    before = source.reads
    await asyncio.sleep(0.05)
    return source.reads == before
