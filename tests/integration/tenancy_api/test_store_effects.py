"""What the admin API leaves in the real store: working credentials, audit entries by operator,
no secrets anywhere — on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from tenancy.store import TenantStore
from tests.unit.tenancy_api.harness import ServedApi

pytestmark = pytest.mark.integration


def test_api_key_from_the_api_authenticates_until_revoked(
    api: ServedApi, store: TenantStore
) -> None:
    api.post("/v1/tenants", {"id": "acme", "display_name": "Acme", "plan": "free"})
    account = api.post("/v1/tenants/acme/service-accounts", {"name": "app"}).json["id"]
    created = api.post("/v1/tenants/acme/api-keys", {"service_account_id": account}).json
    principal = store.verify_api_key(created["key"], created["secret"])
    assert principal is not None and principal.service_account_id == account
    assert store.verify_api_key(created["key"], created["secret"] + "x") is None
    assert api.delete(f"/v1/api-keys/{created['key']}").status == 200
    assert store.verify_api_key(created["key"], created["secret"]) is None


def test_suspending_through_the_api_stops_authentication(
    api: ServedApi, store: TenantStore
) -> None:
    api.post("/v1/tenants", {"id": "acme", "display_name": "Acme", "plan": "free"})
    account = api.post("/v1/tenants/acme/service-accounts", {"name": "app"}).json["id"]
    created = api.post("/v1/tenants/acme/api-keys", {"service_account_id": account}).json
    api.post("/v1/tenants/acme/suspend")
    assert store.verify_api_key(created["key"], created["secret"]) is None
    api.post("/v1/tenants/acme/resume")
    assert store.verify_api_key(created["key"], created["secret"]) is not None


def test_changes_are_audited_as_the_operator_without_secrets(
    api: ServedApi, store: TenantStore
) -> None:
    api.post("/v1/tenants", {"id": "acme", "display_name": "Acme", "plan": "free"})
    account = api.post("/v1/tenants/acme/service-accounts", {"name": "app"}).json["id"]
    secret = api.post("/v1/tenants/acme/api-keys", {"service_account_id": account}).json["secret"]
    entries = store.audit_log(tenant_id="acme").items
    assert len(entries) >= 3
    assert {entry.actor for entry in entries} == {"alice"}
    dumped = json.dumps([asdict(entry) for entry in entries], default=str)
    assert secret not in dumped
    assert api.token is not None and api.token not in dumped


def test_health_reports_the_store_version(api: ServedApi, store: TenantStore) -> None:
    api.post("/v1/tenants", {"id": "acme", "display_name": "Acme", "plan": "free"})
    health = api.get("/healthz", token=None).json
    assert health == {"status": "ok", "version": store.current_version()}
    assert health["version"] >= 1
