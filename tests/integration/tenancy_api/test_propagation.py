"""The admin API answers a change that takes access away once every live gateway has applied it
(`tenancy.api.propagation`), on both stores: `Pier-Propagation: confirmed` when they have (or
there is none), `unconfirmed` with the laggards named after the bound; a gateway that stopped
reporting is not waited for. Also the tenant's `authorization` over HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from tenancy.api.propagation import Propagation
from tenancy.store import TenantStore
from tests.tenancy_fixtures import TenancyClock
from tests.unit.tenancy_api.harness import Reply, ServedApi

pytestmark = pytest.mark.integration
BOUND_S = 0.3


@pytest.fixture
def api(store: TenantStore) -> Iterator[ServedApi]:
    token = store.create_operator("alice", actor="test")
    served = ServedApi(store, token=token, propagation=Propagation(timeout_s=BOUND_S)).start()
    try:
        yield served
    finally:
        served.stop()


def _tenant_with_account(api: ServedApi) -> str:
    created = api.post("/v1/tenants", {"id": "acme", "display_name": "Acme", "plan": "free"})
    assert created.status == 201, created.body
    assert created.json["authorization"] == "acls"
    account = api.post("/v1/tenants/acme/service-accounts", {"name": "app"})
    return str(account.json["id"])


def _acl(account: str) -> dict[str, str]:
    return {
        "resource_type": "TOPIC",
        "pattern_type": "literal",
        "resource_name": "orders",
        "operation": "WRITE",
        "permission": "deny",
        "principal": f"User:{account}",
    }


def _version(reply: Reply) -> int:
    return int(reply.headers["Pier-Change-Version"])


def test_without_gateways_a_change_is_confirmed_at_once(api: ServedApi, store: TenantStore) -> None:
    account = _tenant_with_account(api)
    created = api.post("/v1/tenants/acme/acls", _acl(account))
    assert created.status == 201, created.body
    assert created.headers["Pier-Propagation"] == "confirmed"
    assert _version(created) == store.current_version()


def test_a_lagging_gateway_makes_the_answer_wait_then_say_unconfirmed(
    api: ServedApi, store: TenantStore
) -> None:
    account = _tenant_with_account(api)
    store.report_gateway("gw-behind/1", store.current_version())
    created = api.post("/v1/tenants/acme/acls", _acl(account))
    assert created.status == 201
    assert created.headers["Pier-Propagation"] == "unconfirmed"
    assert created.headers["Pier-Propagation-Pending"] == "gw-behind/1"


def test_the_answer_comes_once_the_gateway_has_applied_the_change(
    api: ServedApi, store: TenantStore
) -> None:
    account = _tenant_with_account(api)
    store.report_gateway("gw-following/1", store.current_version())
    target = store.current_version() + 1  # the ACL's change

    def gateway_applies() -> None:  # what a gateway's follower does once it has applied it
        while store.current_version() < target:
            threading.Event().wait(0.01)
        store.report_gateway("gw-following/1", target)

    follower = threading.Thread(target=gateway_applies)
    follower.start()
    created = api.post("/v1/tenants/acme/acls", _acl(account))
    follower.join(timeout=30)
    assert created.headers["Pier-Propagation"] == "confirmed", created.headers
    assert _version(created) == target


def test_a_silent_gateway_is_not_waited_for(
    api: ServedApi, store: TenantStore, tenancy_clock: TenancyClock
) -> None:
    account = _tenant_with_account(api)
    store.report_gateway("gw-gone/1", 0)
    tenancy_clock.advance(Propagation().stale_after_s + 1)
    created = api.post("/v1/tenants/acme/acls", _acl(account))
    assert created.headers["Pier-Propagation"] == "confirmed"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/v1/tenants/acme/suspend"),
        ("PATCH", "/v1/tenants/acme"),
        ("DELETE", "/v1/tenants/acme"),
    ],
)
def test_tenant_changes_carry_the_propagation_headers(
    api: ServedApi, method: str, path: str
) -> None:
    _tenant_with_account(api)
    body = {"authorization": "open"} if method == "PATCH" else None
    answer = api.request(method, path, json_body=body)
    assert answer.status == 200, answer.body
    assert answer.headers["Pier-Propagation"] == "confirmed"


def test_revocation_carries_the_propagation_headers(api: ServedApi) -> None:
    account = _tenant_with_account(api)
    key = api.post("/v1/tenants/acme/api-keys", {"service_account_id": account}).json["key"]
    revoked = api.delete(f"/v1/api-keys/{key}")
    assert revoked.status == 200, revoked.body
    assert revoked.headers["Pier-Propagation"] == "confirmed"


def test_authorization_is_validated_and_settable(api: ServedApi) -> None:
    bad = api.post(
        "/v1/tenants",
        {"id": "acme", "display_name": "A", "plan": "free", "authorization": "sometimes"},
    )
    assert bad.status == 400
    assert bad.json["errors"][0]["field"] == "body.authorization"
    opened = api.post(
        "/v1/tenants", {"id": "beta", "display_name": "B", "plan": "free", "authorization": "open"}
    )
    assert opened.json["authorization"] == "open"
    closed = api.patch("/v1/tenants/beta", {"authorization": "acls"})
    assert closed.json["authorization"] == "acls"
    assert api.get("/v1/tenants/beta").json["authorization"] == "acls"


def test_the_operator_view_lists_the_live_gateways_and_how_far_behind(
    api: ServedApi, store: TenantStore, tenancy_clock: TenancyClock
) -> None:
    store.report_gateway("gw-old/1", 0)
    tenancy_clock.advance(Propagation().stale_after_s + 1)
    _tenant_with_account(api)
    store.report_gateway("gw-live/1", 1)
    listed = api.get("/v1/gateways")
    assert listed.status == 200, listed.body
    version = store.current_version()
    assert listed.json["version"] == version
    assert [(g["id"], g["applied_version"], g["behind"]) for g in listed.json["items"]] == [
        ("gw-live/1", 1, version - 1)
    ]
    live = listed.json["items"][0]
    assert live["started_at"] <= live["last_seen"] and live["started_at"].endswith("Z")
    assert listed.json["propagation_timeout_s"] == BOUND_S  # the fixture's
    assert (live["connections"], live["tenants"]) == (0, 0)


def test_the_operator_view_counts_each_gateways_held_connections(
    api: ServedApi, store: TenantStore
) -> None:
    """The connection slots each gateway holds in the store (`tenancy.limit_holdings`), summed
    over tenants; a slot given back is no longer counted."""
    _tenant_with_account(api)
    assert (
        api.post("/v1/tenants", {"id": "bolt", "display_name": "B", "plan": "free"}).status == 201
    )
    for gateway in ("gw-a/1", "gw-b/1"):
        store.report_gateway(gateway, store.current_version())
    assert store.hold_connections("acme", "gw-a/1", 2, stale_s=10).granted
    assert store.hold_connections("bolt", "gw-a/1", 1, stale_s=10).granted
    assert store.hold_connections("bolt", "gw-b/1", 1, stale_s=10).granted
    assert store.hold_connections("bolt", "gw-b/1", 0, stale_s=10).granted  # released

    def counts() -> list[tuple[str, int, int]]:
        items = api.get("/v1/gateways").json["items"]
        return [(g["id"], g["connections"], g["tenants"]) for g in items]

    assert counts() == [("gw-a/1", 3, 2), ("gw-b/1", 0, 0)]
