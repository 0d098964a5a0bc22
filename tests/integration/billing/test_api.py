"""The admin API's billing endpoints over a real store with rollups and invoices in it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from billing.invoice.issue import issue
from tenancy.store import TenantStore
from tests.integration.billing.test_invoice import GIB, JAN, PLAN, Runs
from tests.unit.tenancy_api.harness import ServedApi

pytestmark = pytest.mark.integration
HOUR = 3_600_000


@pytest.fixture
def api(store: TenantStore) -> Iterator[ServedApi]:
    served = ServedApi(store, token=store.create_operator("alice", actor="test")).start()
    try:
        yield served
    finally:
        served.stop()


def test_usage_and_invoices(api: ServedApi, store: TenantStore) -> None:
    store.put_plan(PLAN, actor="op")
    store.create_tenant(display_name="Acme", plan="pro", tenant_id="acme", actor="op")
    runs = Runs(store)
    runs.add("acme", JAN + HOUR, bytes_in=GIB, requests=5)
    runs.add("acme", JAN + 2 * HOUR, bytes_in=2 * GIB, requests=7)
    runs.add("acme", JAN + 30 * HOUR, bytes_in=3, requests=1)
    window = "from=2026-01-01T00:00:00Z&to=2026-01-03T00:00:00Z"
    hourly = api.get(f"/v1/tenants/acme/usage?{window}")
    assert hourly.status == 200, hourly.body
    items = hourly.json["items"]
    assert [(i["hour"], i["bytes_in"], i["requests"]) for i in items] == [
        ("2026-01-01T01:00:00Z", GIB, 5),
        ("2026-01-01T02:00:00Z", 2 * GIB, 7),
        ("2026-01-02T06:00:00Z", 3, 1),
    ]
    assert items[0]["topic"] == "orders" and items[0]["storage_byte_ms"] == "0"
    daily = api.get(f"/v1/tenants/acme/usage?{window}&granularity=day&topic=orders").json["items"]
    assert [(i["hour"], i["bytes_in"]) for i in daily] == [
        ("2026-01-01T00:00:00Z", 3 * GIB),
        ("2026-01-02T00:00:00Z", 3),
    ]
    assert api.get(f"/v1/tenants/acme/usage?{window}&principal=nobody").json["items"] == []
    as_csv = api.get(f"/v1/tenants/acme/usage?{window}&format=csv")
    assert as_csv.content_type == "text/csv"
    assert (
        as_csv.body.decode().splitlines()[1].startswith("2026-01-01T01:00:00Z,acme,sa-1,,orders,")
    )
    bad = api.get("/v1/tenants/acme/usage?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z")
    assert bad.status == 400 and bad.content_type == "application/problem+json"
    assert api.get(f"/v1/tenants/nobody/usage?{window}").status == 404

    issue(store, "2026-01", now=datetime(2026, 2, 10, tzinfo=UTC))
    listed = api.get("/v1/tenants/acme/invoices").json["items"]
    assert [(i["id"], i["status"]) for i in listed] == [("acme-2026-01", "final")]
    one = api.get("/v1/tenants/acme/invoices/acme-2026-01")
    assert one.status == 200 and one.json["total"] == listed[0]["total"]
    lines = api.get("/v1/tenants/acme/invoices/acme-2026-01?format=csv").body.decode().splitlines()
    assert lines[0] == "kind,for_period,dimension,measure,quantity,amount"
    assert len(lines) == 1 + len(one.json["lines"])
    assert api.get("/v1/tenants/acme/invoices/acme-2026-02").status == 404
