"""The tenant limits on coordinator state (`gateway/kafka/coordinated_names.py`): groups and
transactional ids a tenant holds on the fleet, listed from the brokers, and whether a request may
make one more."""

from __future__ import annotations

import asyncio

import pytest

from brokers.client.errors import BrokerConnectionError
from gateway.kafka.coordinated_names import CoordinatedNames, NameKind, NameLimits

pytestmark = pytest.mark.unit
GROUP, TXN = NameKind.GROUP, NameKind.TRANSACTIONAL_ID


class Fleet:
    """A `NameLister` over names per kind; counts listings, can fail or answer in part."""

    def __init__(self, groups: set[str] = frozenset(), txns: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.names = {GROUP: set(groups), TXN: set(txns)}
        self.listings = 0
        self.prefixes: list[str] = []
        self.fail = False
        self.complete = True
        self.gate: asyncio.Event | None = None

    async def coordinated_names(self, kind: NameKind, prefix: str = "") -> tuple[set[str], bool]:
        self.listings += 1
        self.prefixes.append(prefix)
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise BrokerConnectionError("no broker")
        return {n for n in self.names[kind] if n.startswith(prefix)}, self.complete


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def census(fleet: Fleet, clock: Clock, groups: int = 2, txns: int = 2) -> CoordinatedNames:
    return CoordinatedNames(fleet, NameLimits(groups, txns), clock=clock, relist_s=5.0)


def admit(names: CoordinatedNames, kind: NameKind, tenant: str, name: str) -> bool:
    return asyncio.run(names.admit(kind, tenant, f"{tenant}_{name}"))


def test_the_fleets_names_count_and_one_more_is_refused_at_the_limit() -> None:
    fleet, clock = Fleet(groups={"acme_a", "acme_b", "bolt_a", "__internal"}), Clock()
    names = census(fleet, clock)
    assert admit(names, GROUP, "acme", "a"), "a group the tenant holds"
    assert not admit(names, GROUP, "acme", "c"), "a third group of acme"
    assert admit(names, GROUP, "bolt", "b"), "bolt has one of two"
    assert not admit(names, GROUP, "bolt", "c")
    assert admit(names, TXN, "acme", "tx"), "the kinds are counted apart"
    assert fleet.listings == 2, "one listing per kind at first; a refusal within relist_s none"


def test_at_the_limit_the_fleet_is_listed_again_so_deleted_names_free_places() -> None:
    fleet, clock = Fleet(groups={"acme_a", "acme_b"}), Clock()
    names = census(fleet, clock)
    assert not admit(names, GROUP, "acme", "c")
    fleet.names[GROUP].discard("acme_b")  # deleted elsewhere (another gateway, expiry)
    assert not admit(names, GROUP, "acme", "c"), "not listed again within relist_s"
    clock.now += 5.0
    assert admit(names, GROUP, "acme", "c")
    assert fleet.listings == 2


def test_a_tenant_at_its_limit_is_listed_alone() -> None:
    """Relisting at the limit asks the brokers for that tenant's names only (its prefix as the
    listings' scope), however many names the other tenants hold; their counts stay."""
    others = {f"bolt_{i}" for i in range(1_000)}
    fleet, clock = Fleet(groups={"acme_a", "acme_b", *others}), Clock()
    names = census(fleet, clock)
    assert not admit(names, GROUP, "acme", "c")
    assert fleet.prefixes == [""], "the first listing is the whole fleet's"
    fleet.names[GROUP].discard("acme_b")
    fleet.names[GROUP].discard("bolt_1")
    clock.now += 5.0
    assert admit(names, GROUP, "acme", "c")
    assert fleet.prefixes == ["", "acme_"]
    assert names.count(GROUP, "bolt") == 1_000, "bolt's count is not acme's listing's business"
    assert names.count(GROUP, "acme") == 2
    clock.now += 1.0
    assert not admit(names, GROUP, "acme", "d"), "listed again only after relist_s"
    assert fleet.prefixes == ["", "acme_"]


def test_names_let_through_count_until_the_next_listing() -> None:
    fleet, clock = Fleet(), Clock()
    names = census(fleet, clock, txns=3)
    assert all(admit(names, TXN, "acme", f"tx-{i}") for i in range(3))
    assert not admit(names, TXN, "acme", "tx-3")
    assert names.count(TXN, "acme") == 3


def test_a_failed_listing_keeps_what_was_known_and_a_partial_one_adds_to_it() -> None:
    fleet, clock = Fleet(groups={"acme_a"}), Clock()
    names = census(fleet, clock)
    fleet.fail = True
    assert admit(names, GROUP, "acme", "b"), "first listing failed: counted here only"
    assert admit(names, GROUP, "acme", "c")
    assert not admit(names, GROUP, "acme", "d")
    clock.now += 5.0
    assert not admit(names, GROUP, "acme", "d"), "a failed relisting forgets nothing"
    assert admit(names, GROUP, "acme", "b")
    fleet.fail, fleet.complete = False, False  # a broker did not answer: acme_a only
    clock.now += 5.0
    assert not admit(names, GROUP, "acme", "d")
    assert names.count(GROUP, "acme") == 3, "acme_a listed, acme_b and acme_c still known"


def test_a_deleted_group_is_forgotten_at_once() -> None:
    fleet, clock = Fleet(groups={"acme_a", "acme_b"}), Clock()
    names = census(fleet, clock)
    assert not admit(names, GROUP, "acme", "c")
    names.forget(GROUP, "acme", ["acme_a"])
    assert admit(names, GROUP, "acme", "c")


def test_concurrent_requests_wait_for_one_listing() -> None:
    fleet, clock = Fleet(groups={"acme_a"}), Clock()
    names = census(fleet, clock, groups=3)

    async def main() -> list[bool]:
        fleet.gate = asyncio.Event()
        asks = [asyncio.ensure_future(names.admit(GROUP, "acme", f"acme_{g}")) for g in "abcde"]
        await asyncio.sleep(0)
        fleet.gate.set()
        return list(await asyncio.gather(*asks))

    assert asyncio.run(main()) == [True, True, True, False, False]
    assert fleet.listings == 1, "the first listing, awaited by all; none again within relist_s"


def test_a_listing_that_hangs_delays_the_first_request_no_longer_than_the_timeout() -> None:
    fleet, clock = Fleet(groups={"acme_a"}), Clock()
    names = CoordinatedNames(fleet, NameLimits(1, 1), clock=clock, listing_timeout_s=0.01)

    async def main() -> bool:
        fleet.gate = asyncio.Event()  # never set: a broker that does not answer
        return await names.admit(GROUP, "acme", "acme_b")

    assert asyncio.run(main()), "counted here, as after a failed listing"
    assert names.count(GROUP, "acme") == 1


def test_refusals_are_logged_once_per_tenant_and_window(caplog: pytest.LogCaptureFixture) -> None:
    fleet, clock = Fleet(groups={"acme_a"}), Clock()
    names = census(fleet, clock, groups=1)
    with caplog.at_level("INFO", logger="pier.gateway.names"):
        for i in range(50):
            assert not admit(names, GROUP, "acme", f"flood-{i}")
        clock.now += 5.0
        assert not admit(names, GROUP, "acme", "flood-again")
    refused = [r for r in caplog.records if "event=name_refused" in r.getMessage()]
    assert len(refused) == 2, [r.getMessage() for r in refused]
