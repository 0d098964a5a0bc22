"""`QuotaBook` on a real `TenantStore` (SQLite): a quota set after the book loaded the tenant is
answered after `refresh`, with the sensor key of the entity that now matches."""

from __future__ import annotations

import asyncio

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
    return "sqlite"  # the book only reads through `list_quotas`; one backend is enough here


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
