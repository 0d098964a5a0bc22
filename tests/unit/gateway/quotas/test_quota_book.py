"""`QuotaBook` against a fake store: values and Kafka's sensor keys per matched entity level,
loading, refreshing after a change, forgetting, and reads that finish out of order."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from dataclasses import replace

import pytest

from gateway.quotas.client_quotas import SensorKey
from gateway.quotas.quota_book import (
    MAX_CACHED_CLIENTS,
    ClientQuotas,
    QuotaBook,
    QuotasNotLoaded,
    sensor_key,
)
from tenancy.domain import DEFAULT_ENTITY as D
from tenancy.domain import DEFAULT_LIMITS, QuotaEntity
from tenancy.errors import NotFoundError
from tests.unit.gateway.quotas.fakes import Entities, FakeSource

pytestmark = pytest.mark.unit


def run(awaitable: Awaitable[None]) -> None:
    async def main() -> None:
        await awaitable

    asyncio.run(main())


def book_with(entities: Entities, tenant: str = "acme") -> tuple[QuotaBook, FakeSource]:
    source = FakeSource({tenant: entities})
    book = QuotaBook(source)
    run(book.load(tenant))
    return book, source


LEVELS = [  # (configured entity, the sensor's user and client-id tags for sa-1 / app)
    (QuotaEntity("sa-1", "app"), ("sa-1", "app")),
    (QuotaEntity("sa-1", D), ("sa-1", "app")),
    (QuotaEntity("sa-1", None), ("sa-1", "")),
    (QuotaEntity(D, "app"), ("sa-1", "app")),
    (QuotaEntity(D, D), ("sa-1", "app")),
    (QuotaEntity(D, None), ("sa-1", "")),
    (QuotaEntity(None, "app"), ("", "app")),
    (QuotaEntity(None, D), ("", "app")),
]


@pytest.mark.parametrize(("entity", "tags"), LEVELS)
def test_the_sensor_key_comes_from_the_matched_entity(
    entity: QuotaEntity, tags: tuple[str, str]
) -> None:
    book, _ = book_with({entity: {"producer_byte_rate": 5.0}})
    quotas = book.quotas_for("acme", "sa-1", "app")
    assert quotas.producer_byte_rate == 5.0
    assert quotas.producer_key == SensorKey("acme", *tags)
    assert quotas.consumer_byte_rate is None
    assert quotas.consumer_key == SensorKey("acme", "", "app")  # no level: Kafka's fallthrough


def test_a_default_user_quota_gives_each_user_a_sensor() -> None:
    book, _ = book_with({QuotaEntity(D, None): {"consumer_byte_rate": 1e6}})
    keys = {book.quotas_for("acme", user, "app").consumer_key for user in ("sa-1", "sa-2")}
    assert keys == {SensorKey("acme", "sa-1", ""), SensorKey("acme", "sa-2", "")}
    same_user = {book.quotas_for("acme", "sa-1", c).consumer_key for c in ("a", "b")}
    assert same_user == {SensorKey("acme", "sa-1", "")}  # shared across the user's client ids


def test_a_default_client_quota_gives_each_client_id_a_sensor() -> None:
    book, _ = book_with({QuotaEntity(None, D): {"request_percentage": 50.0}})
    keys = {book.quotas_for("acme", u, c).request_key for u, c in [("sa-1", "a"), ("sa-2", "a")]}
    assert keys == {SensorKey("acme", "", "a")}  # shared by every user with that client id
    assert book.quotas_for("acme", "sa-1", "b").request_key == SensorKey("acme", "", "b")


def test_each_quota_name_resolves_on_its_own() -> None:
    book, _ = book_with(
        {
            QuotaEntity("sa-1", None): {"producer_byte_rate": 1.0},
            QuotaEntity(None, D): {"consumer_byte_rate": 2.0, "controller_mutation_rate": 3.0},
        }
    )
    quotas = book.quotas_for("acme", "sa-1", "app")
    assert (quotas.producer_byte_rate, quotas.producer_key) == (1.0, SensorKey("acme", "sa-1", ""))
    assert (quotas.consumer_byte_rate, quotas.consumer_key) == (2.0, SensorKey("acme", "", "app"))
    assert quotas.controller_mutation_rate == 3.0
    assert quotas.mutation_key == SensorKey("acme", "", "app")


def test_tenant_caps_come_from_the_tenant_limits() -> None:
    source = FakeSource({"acme": {QuotaEntity(D, None): {"producer_byte_rate": 1e6}}, "beta": {}})
    source.limits["acme"] = replace(DEFAULT_LIMITS, max_producer_byte_rate=5_000_000)
    book = QuotaBook(source)
    run(book.load("acme"))
    run(book.load("beta"))
    quotas = book.quotas_for("acme", "sa-1", "app")
    assert (quotas.tenant_producer_byte_rate, quotas.tenant_consumer_byte_rate) == (5e6, None)
    assert quotas.producer_byte_rate == 1e6  # the client quota is resolved as before
    assert (
        book.quotas_for("acme", "sa-2", "other").tenant_producer_byte_rate == 5e6
    )  # any principal
    uncapped = book.quotas_for("beta", "sa-1", "app")
    assert (uncapped.tenant_producer_byte_rate, uncapped.tenant_consumer_byte_rate) == (None, None)
    assert threading.get_ident() not in source.threads  # both reads ran off the event loop


def test_refresh_answers_changed_tenant_caps() -> None:
    book, source = book_with({})
    before = book.quotas_for("acme", "sa-1", "app")
    assert before.tenant_consumer_byte_rate is None
    source.limits["acme"] = replace(DEFAULT_LIMITS, max_consumer_byte_rate=2048)
    assert book.quotas_for("acme", "sa-1", "app") == before  # until the feed says
    run(book.refresh("acme"))
    after = book.quotas_for("acme", "sa-1", "app")
    assert (after.tenant_producer_byte_rate, after.tenant_consumer_byte_rate) == (None, 2048.0)
    assert after.generation == book.generation("acme") != before.generation
    del source.limits["acme"]  # the cap removed
    run(book.refresh("acme"))
    assert book.quotas_for("acme", "sa-1", "app").tenant_consumer_byte_rate is None


def test_sensor_key_without_a_match_keeps_only_the_client_id() -> None:
    assert sensor_key("acme", None, "sa-1", "app") == SensorKey("acme", "", "app")


def test_quotas_are_asked_for_only_after_load() -> None:
    book = QuotaBook(FakeSource({"acme": {}}))
    with pytest.raises(QuotasNotLoaded):
        book.quotas_for("acme", "sa-1", "app")
    assert book.generation("acme") == 0


def test_load_is_idempotent_and_concurrent_loads_share_one_read() -> None:
    source = FakeSource({"acme": {}})
    book = QuotaBook(source)

    async def main() -> None:
        await asyncio.gather(*(book.load("acme") for _ in range(5)))
        await book.load("acme")

    asyncio.run(main())
    assert source.reads == 1
    assert book.quotas_for("acme", "sa-1", "app") == book.quotas_for("acme", "sa-1", "app")


def test_refresh_answers_the_new_values_and_a_new_generation() -> None:
    book, source = book_with({QuotaEntity("sa-1", None): {"producer_byte_rate": 1.0}})
    before = book.quotas_for("acme", "sa-1", "app")
    assert before.generation == book.generation("acme") > 0
    source.tenants["acme"][QuotaEntity("sa-1", None)]["producer_byte_rate"] = 9.0
    run(book.refresh("acme"))
    after = book.quotas_for("acme", "sa-1", "app")
    assert after.producer_byte_rate == 9.0
    assert before.generation != book.generation("acme") == after.generation


def test_refresh_leaves_tenants_it_does_not_hold_alone() -> None:
    source = FakeSource({"acme": {}})
    run(QuotaBook(source).refresh("acme"))
    assert source.reads == 0


def test_refresh_of_a_vanished_tenant_forgets_it() -> None:
    book, source = book_with({})
    del source.tenants["acme"]
    run(book.refresh("acme"))
    assert book.generation("acme") == 0
    with pytest.raises(QuotasNotLoaded):
        book.quotas_for("acme", "sa-1", "app")


def test_load_errors_reach_the_caller() -> None:
    book = QuotaBook(FakeSource({}))
    with pytest.raises(NotFoundError):
        run(book.load("ghost"))


def test_forget_then_load_gives_a_new_generation() -> None:
    book, _ = book_with({})
    first = book.generation("acme")
    book.forget("acme")
    assert book.generation("acme") == 0
    run(book.load("acme"))
    assert book.generation("acme") > first


def test_a_stale_read_that_finishes_last_is_dropped() -> None:
    entity = QuotaEntity(D, None)
    source = FakeSource({"acme": {entity: {"producer_byte_rate": 1.0}}})
    book = QuotaBook(source)
    source.gates = {1: threading.Event(), 2: threading.Event()}

    async def main() -> None:
        loading = asyncio.ensure_future(book.load("acme"))
        while source.reads < 1:
            await asyncio.sleep(0)  # yield until the load's read has taken its snapshot
        source.version = 2
        source.tenants["acme"] = {entity: {"producer_byte_rate": 2.0}}
        refreshing = asyncio.ensure_future(book.refresh("acme"))
        source.gates[2].set()
        await refreshing  # the newer read lands first
        source.gates[1].set()
        await loading  # the older one lands last and must not win

    asyncio.run(main())
    assert book.quotas_for("acme", "sa-1", "app").producer_byte_rate == 2.0


def test_forget_drops_a_read_in_flight() -> None:
    source = FakeSource({"acme": {}})
    source.gates = {1: threading.Event()}
    book = QuotaBook(source)

    async def main() -> None:
        loading = asyncio.ensure_future(book.load("acme"))
        while source.reads < 1:
            await asyncio.sleep(0)
        book.forget("acme")
        source.gates[1].set()
        await loading

    asyncio.run(main())
    assert book.generation("acme") == 0
    run(book.load("acme"))  # a later load is not blocked by the dropped one
    assert book.generation("acme") > 0


def test_the_per_tenant_cache_is_bounded() -> None:
    book, _ = book_with({QuotaEntity(None, D): {"producer_byte_rate": 1.0}})
    first = book.quotas_for("acme", "sa-1", "c-0")
    for n in range(1, MAX_CACHED_CLIENTS + 1):
        book.quotas_for("acme", "sa-1", f"c-{n}")
    again = book.quotas_for("acme", "sa-1", "c-0")
    assert again == first and again is not first  # evicted, then rebuilt equal
    assert isinstance(again, ClientQuotas)
