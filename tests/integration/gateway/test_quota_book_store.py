"""`QuotaBook` on a real `TenantStore` (SQLite): a quota set after the book loaded the tenant is
answered after `refresh`, with the sensor key of the entity that now matches; so are the tenant's
own byte-rate caps, set by `update_tenant`."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from gateway.quotas.client_quotas import SensorKey
from gateway.quotas.quota_book import QuotaBook
from tenancy.domain import DEFAULT_ENTITY, QuotaEntity
from tenancy.store import TenantStore
from tests.tenancy_fixtures import (  # noqa: F401  (fixtures are found by name)
    store,
    store_template,
    store_url,
    tenancy_clock,
)

pytestmark = pytest.mark.integration
OPERATOR = "op-alice"


@pytest.fixture
def store_backend() -> str:
    return "sqlite"  # the book reads through `list_quotas` and `get_tenant`; one backend is enough


def test_a_quota_set_in_the_store_applies_after_refresh(store: TenantStore) -> None:  # noqa: F811
    store.create_tenant(display_name="Acme", plan="free", tenant_id="acme", actor=OPERATOR)
    account = store.create_service_account("acme", name="app", actor=OPERATOR)
    book = QuotaBook(store)
    store.set_quotas(
        "acme", QuotaEntity(DEFAULT_ENTITY, None), {"producer_byte_rate": 1e6}, actor=OPERATOR
    )

    async def main() -> None:
        await book.load("acme")
        before = book.quotas_for("acme", account.id, "loader")
        assert before.producer_byte_rate == 1e6
        assert before.producer_key == SensorKey("acme", account.id, "")
        store.set_quotas(
            "acme",
            QuotaEntity(account.id, DEFAULT_ENTITY),
            {"producer_byte_rate": 5e6, "controller_mutation_rate": 2.0},
            actor=OPERATOR,
        )
        assert book.quotas_for("acme", account.id, "loader") == before  # until the feed says
        await book.refresh("acme")
        after = book.quotas_for("acme", account.id, "loader")
        assert (after.producer_byte_rate, after.controller_mutation_rate) == (5e6, 2.0)
        assert after.producer_key == SensorKey("acme", account.id, "loader")
        assert after.generation == book.generation("acme") != before.generation
        store.delete_quotas("acme", QuotaEntity(account.id, DEFAULT_ENTITY), actor=OPERATOR)
        await book.refresh("acme")
        assert book.quotas_for("acme", account.id, "loader").producer_byte_rate == 1e6

    asyncio.run(main())


def test_tenant_caps_set_in_the_store_apply_after_refresh(store: TenantStore) -> None:  # noqa: F811
    tenant = store.create_tenant(display_name="Acme", plan="free", tenant_id="acme", actor=OPERATOR)
    plan_quotas = {"producer_byte_rate": None, "consumer_byte_rate": None}  # the free plan's
    store.set_quotas("acme", QuotaEntity(DEFAULT_ENTITY, None), plan_quotas, actor=OPERATOR)
    account = store.create_service_account("acme", name="app", actor=OPERATOR)
    book = QuotaBook(store)

    async def main() -> None:
        await book.load("acme")
        before = book.quotas_for("acme", account.id, "loader")
        assert (before.tenant_producer_byte_rate, before.tenant_consumer_byte_rate) == (None, None)
        capped = replace(
            tenant.limits, max_producer_byte_rate=1_048_576, max_consumer_byte_rate=4_194_304
        )
        store.update_tenant("acme", limits=capped, actor=OPERATOR)
        assert book.quotas_for("acme", account.id, "loader") == before  # until the feed says
        await book.refresh("acme")
        after = book.quotas_for("acme", account.id, "loader")
        assert (after.tenant_producer_byte_rate, after.tenant_consumer_byte_rate) == (
            1_048_576.0,
            4_194_304.0,
        )
        assert after.producer_byte_rate is None  # no client quota: only the tenant cap applies
        assert after.generation == book.generation("acme") != before.generation
        store.update_tenant(
            "acme", limits=replace(capped, max_producer_byte_rate=None), actor=OPERATOR
        )
        await book.refresh("acme")
        again = book.quotas_for("acme", account.id, "loader")
        assert (again.tenant_producer_byte_rate, again.tenant_consumer_byte_rate) == (
            None,
            4_194_304.0,
        )

    asyncio.run(main())
