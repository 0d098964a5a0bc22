"""Every admin API endpoint: happy paths and 400/401/403/404/409/413/415/422, written once.

These scenarios need only an `api` fixture (a `ServedApi` with a valid operator token). Here it
serves the in-memory fake store; `tests/integration/tenancy_api/test_endpoints.py` re-runs the
same functions against the real store on SQLite and PostgreSQL.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.tenancy_api.harness import Reply, ServedApi

pytestmark = pytest.mark.unit
PROBLEM = "application/problem+json"
NO_CAPS = {
    "max_producer_byte_rate": None,
    "max_consumer_byte_rate": None,
    "max_groups": None,  # the gateway's tenant.max.groups
    "max_transactional_ids": None,
}


def problem(reply: Reply, status: int) -> dict[str, Any]:
    assert reply.status == status, reply.body
    assert reply.content_type == PROBLEM
    body: dict[str, Any] = reply.json
    assert body["status"] == status
    assert {"type", "title", "detail", "instance"} <= body.keys()
    assert "Traceback" not in reply.body.decode()
    return body


def new_tenant(api: ServedApi, tenant_id: str = "acme", **extra: Any) -> dict[str, Any]:
    reply = api.post(
        "/v1/tenants", {"id": tenant_id, "display_name": "Acme", "plan": "free", **extra}
    )
    assert reply.status == 201, reply.body
    return dict(reply.json)


def new_account(api: ServedApi, tenant_id: str, name: str = "app") -> dict[str, Any]:
    reply = api.post(f"/v1/tenants/{tenant_id}/service-accounts", {"name": name})
    assert reply.status == 201, reply.body
    return dict(reply.json)


def test_tenant_lifecycle(api: ServedApi) -> None:
    limits = {
        "max_partitions": 5,
        "max_storage_bytes": 1000,
        "max_connections": 7,
        "max_request_bytes": 4096,
    }
    created = new_tenant(api, limits=limits)
    assert created["id"] == "acme" and created["status"] == "active"
    assert created["limits"] == {**limits, **NO_CAPS}
    assert created["created_at"].endswith("Z")
    assert api.get("/v1/tenants/acme").json == created
    patched = api.patch(
        "/v1/tenants/acme", {"display_name": "Acme Corp", "limits": {"max_connections": 9}}
    )
    assert patched.status == 200
    assert patched.json["display_name"] == "Acme Corp"
    assert patched.json["limits"] == {**limits, **NO_CAPS, "max_connections": 9}
    assert api.post("/v1/tenants/acme/suspend").json["status"] == "suspended"
    assert api.post("/v1/tenants/acme/resume").json["status"] == "active"
    deleted = api.delete("/v1/tenants/acme")
    assert deleted.status == 200 and deleted.json["status"] == "deleted"
    assert api.get("/v1/tenants/acme").json["status"] == "deleted"


def test_tenant_group_and_transactional_id_limits(api: ServedApi) -> None:
    """`max_groups` / `max_transactional_ids`: null (the gateway's setting) unless set, set and
    removed by PATCH, positive integers only."""
    created = new_tenant(api)
    assert (created["limits"]["max_groups"], created["limits"]["max_transactional_ids"]) == (
        None,
        None,
    )
    set_ = api.patch("/v1/tenants/acme", {"limits": {"max_groups": 20, "max_transactional_ids": 5}})
    assert set_.status == 200, set_.body
    assert (set_.json["limits"]["max_groups"], set_.json["limits"]["max_transactional_ids"]) == (
        20,
        5,
    )
    removed = api.patch("/v1/tenants/acme", {"limits": {"max_groups": None}})
    assert removed.json["limits"]["max_groups"] is None
    assert removed.json["limits"]["max_transactional_ids"] == 5
    for bad in (0, -1, 1.5, "10", 2**63):
        reply = api.patch("/v1/tenants/acme", {"limits": {"max_groups": bad}})
        assert problem(reply, 400)["errors"][0]["field"] == "body.limits.max_groups"
    assert api.get("/v1/tenants/acme").json == removed.json


def test_tenant_rate_caps(api: ServedApi) -> None:
    assert new_tenant(api, "aaa")["limits"]["max_producer_byte_rate"] is None  # default: no cap
    limits = {
        "max_partitions": 5,
        "max_storage_bytes": 1000,
        "max_connections": 7,
        "max_request_bytes": 4096,
        "max_producer_byte_rate": 1_048_576,
    }
    created = new_tenant(api, limits=limits)
    assert created["limits"] == {**NO_CAPS, **limits}
    patched = api.patch("/v1/tenants/acme", {"limits": {"max_consumer_byte_rate": 2048}})
    assert patched.status == 200, patched.body
    assert patched.json["limits"] == {**NO_CAPS, **limits, "max_consumer_byte_rate": 2048}
    removed = api.patch("/v1/tenants/acme", {"limits": {"max_producer_byte_rate": None}})
    assert removed.json["limits"] == {
        **NO_CAPS,
        **limits,
        "max_producer_byte_rate": None,
        "max_consumer_byte_rate": 2048,
    }
    assert api.get("/v1/tenants/acme").json == removed.json
    for bad in (0, -1, 1.5, "1000", 2**63):
        reply = api.patch("/v1/tenants/acme", {"limits": {"max_producer_byte_rate": bad}})
        assert problem(reply, 400)["errors"][0]["field"] == "body.limits.max_producer_byte_rate"
    partial = problem(
        api.post(
            "/v1/tenants",
            {"display_name": "x", "plan": "free", "limits": {"max_consumer_byte_rate": 1}},
        ),
        400,
    )
    assert partial["errors"][0]["field"].startswith("body.limits.max_")
    assert api.get("/v1/tenants/acme").json == removed.json


def test_generated_tenant_id(api: ServedApi) -> None:
    reply = api.post("/v1/tenants", {"display_name": "Anon", "plan": "free"})
    assert reply.status == 201
    assert reply.headers["Location"] == f"/v1/tenants/{reply.json['id']}"
    assert api.get(reply.headers["Location"]).status == 200


def test_tenant_pagination_with_cursor_and_link(api: ServedApi) -> None:
    for name in ("aaa", "bbb", "ccc"):
        new_tenant(api, name)
    seen: list[str] = []
    path = "/v1/tenants?limit=2"
    while path:
        reply = api.get(path)
        assert reply.status == 200
        seen += [t["id"] for t in reply.json["items"]]
        cursor = reply.json["next_cursor"]
        if cursor is None:
            assert "Link" not in reply.headers
            break
        link = reply.headers["Link"]
        assert link.endswith('>; rel="next"') and "limit=2" in link
        path = link[1 : link.index(">")]
    assert sorted(seen) == ["aaa", "bbb", "ccc"]


def test_list_tenants_by_status(api: ServedApi) -> None:
    new_tenant(api, "aaa")
    new_tenant(api, "bbb")
    api.post("/v1/tenants/bbb/suspend")
    reply = api.get("/v1/tenants?status=suspended")
    assert [t["id"] for t in reply.json["items"]] == ["bbb"]


def test_tenant_errors(api: ServedApi) -> None:
    new_tenant(api)
    problem(api.post("/v1/tenants", {"id": "acme", "display_name": "Again", "plan": "free"}), 409)
    problem(api.get("/v1/tenants/nobody"), 404)
    missing = problem(api.post("/v1/tenants", {"plan": "free"}), 400)
    assert missing["errors"][0]["field"] == "body.display_name"
    bad_id = problem(
        api.post("/v1/tenants", {"id": "A!", "display_name": "x", "plan": "free"}), 400
    )
    assert bad_id["errors"][0]["field"] == "body.id"
    extra = problem(
        api.post("/v1/tenants", {"display_name": "x", "plan": "free", "colour": 1}), 400
    )
    assert extra["errors"][0]["field"] == "body.colour"
    negative = problem(api.patch("/v1/tenants/acme", {"limits": {"max_partitions": -1}}), 400)
    assert negative["errors"][0]["field"] == "body.limits.max_partitions"
    problem(api.get("/v1/tenants?limit=0"), 400)
    assert problem(api.get("/v1/tenants?stauts=x"), 400)["errors"][0]["field"] == "query.stauts"
    assert problem(api.get("/v1/tenants?limit=ten"), 400)["errors"][0]["field"] == "query.limit"


def test_deleted_tenant_refuses_changes(api: ServedApi) -> None:
    # Deleted tenants are read-only: the store refuses changes with TenantDeletedError → 403.
    new_tenant(api)
    api.delete("/v1/tenants/acme")
    for reply in (
        api.patch("/v1/tenants/acme", {"display_name": "Back"}),
        api.post("/v1/tenants/acme/service-accounts", {"name": "late"}),
        api.post("/v1/tenants/acme/resume"),
    ):
        problem(reply, 403)
    assert api.get("/v1/tenants/acme").json["status"] == "deleted"


def test_auth_required_with_bearer_challenge(api: ServedApi) -> None:
    for headers, token in (
        ({}, None),
        ({}, "wrong-token"),
        ({"Authorization": "Basic YTpi"}, None),
    ):
        reply = api.get("/v1/tenants", headers=headers, token=token)
        problem(reply, 401)
        assert reply.headers["WWW-Authenticate"].startswith("Bearer")
    problem(api.post("/v1/tenants", {"display_name": "x", "plan": "free"}, token=None), 401)
    for public in ("/healthz", "/metrics", "/openapi.json"):
        assert api.get(public, token=None).status == 200


def test_media_type_size_and_syntax(api: ServedApi) -> None:
    text = {"Content-Type": "text/plain"}
    problem(api.request("POST", "/v1/tenants", data=b"{}", headers=text), 415)
    problem(api.request("POST", "/v1/tenants"), 415)
    json_type = {"Content-Type": "application/json"}
    problem(api.request("POST", "/v1/tenants", data=b"{not json", headers=json_type), 400)
    problem(api.request("POST", "/v1/tenants", data=b'{"x": NaN}', headers=json_type), 400)
    huge = b'{"display_name": "' + b"x" * (1 << 20) + b'", "plan": "free"}'
    problem(api.request("POST", "/v1/tenants", data=huge, headers=json_type), 413)


def test_head_is_served_like_get(api: ServedApi) -> None:
    new_tenant(api)
    assert api.request("HEAD", "/v1/tenants/acme").status == 200
    assert api.request("HEAD", "/v1/tenants?limit=0").status == 400


def test_unknown_route_and_method_are_problems(api: ServedApi) -> None:
    problem(api.get("/v1/nothing-here"), 404)
    reply = api.request("PUT", "/v1/tenants")
    problem(reply, 405)
    assert "GET" in reply.headers["Allow"]


def test_service_accounts(api: ServedApi) -> None:
    new_tenant(api)
    account = new_account(api, "acme")
    assert account["id"].startswith("sa-") and account["tenant_id"] == "acme"
    listed = api.get("/v1/tenants/acme/service-accounts")
    assert [a["id"] for a in listed.json["items"]] == [account["id"]]
    problem(api.post("/v1/tenants/acme/service-accounts", {"name": "app"}), 409)
    problem(api.post("/v1/tenants/nobody/service-accounts", {"name": "app"}), 404)
    problem(api.get("/v1/tenants/nobody/service-accounts"), 404)
    problem(api.post("/v1/tenants/acme/service-accounts", {"name": ""}), 400)


def test_api_keys_secret_once_and_revocation(api: ServedApi) -> None:
    new_tenant(api)
    account = new_account(api, "acme")
    created = api.post(
        "/v1/tenants/acme/api-keys", {"service_account_id": account["id"], "description": "ci"}
    )
    assert created.status == 201
    secret, key = created.json["secret"], created.json["key"]
    assert len(secret) >= 32 and created.json["revoked_at"] is None
    listed = api.get("/v1/tenants/acme/api-keys")
    assert [k["key"] for k in listed.json["items"]] == [key]
    assert secret not in listed.body.decode() and "secret" not in listed.json["items"][0]
    revoked = api.delete(f"/v1/api-keys/{key}")
    assert revoked.status == 200 and revoked.json["revoked_at"] is not None
    assert secret not in revoked.body.decode()
    problem(api.delete("/v1/api-keys/NOSUCHKEY0000000"), 404)


def test_api_key_errors(api: ServedApi) -> None:
    new_tenant(api, "acme")
    new_tenant(api, "other")
    foreign = new_account(api, "other")
    problem(api.post("/v1/tenants/acme/api-keys", {"service_account_id": foreign["id"]}), 403)
    dangling = api.post("/v1/tenants/acme/api-keys", {"service_account_id": "sa-nobody0000"})
    assert problem(dangling, 400)["errors"][0]["field"].endswith("service_account_id")
    account = new_account(api, "acme")
    body = {"service_account_id": account["id"], "expires_at": "next tuesday"}
    assert (
        problem(api.post("/v1/tenants/acme/api-keys", body), 400)["errors"][0]["field"]
        == "body.expires_at"
    )
    expiring = {"service_account_id": account["id"], "expires_at": "2999-01-01T00:00:00Z"}
    reply = api.post("/v1/tenants/acme/api-keys", expiring)
    assert reply.status == 201 and reply.json["expires_at"].startswith("2999-01-01T00:00:00")


def test_quotas_and_effective_chain(api: ServedApi) -> None:
    assert api.put("/v1/plans/bare", PLAN).status == 200  # no default quotas: only these
    new_tenant(api, plan="bare")
    account = new_account(api, "acme")
    user = account["id"]
    put = api.put(
        "/v1/tenants/acme/quotas",
        {
            "entity": {"user": user, "client_id": "<default>"},
            "quotas": {"producer_byte_rate": 1000},
        },
    )
    assert put.status == 200
    assert put.json == {
        "entity": {"user": user, "client_id": "<default>"},
        "quotas": {"producer_byte_rate": 1000},
    }
    api.put(
        "/v1/tenants/acme/quotas",
        {
            "entity": {"client_id": "<default>"},
            "quotas": {"consumer_byte_rate": 50, "request_percentage": 25},
        },
    )
    listed = api.get("/v1/tenants/acme/quotas").json["items"]
    assert len(listed) == 2
    effective = api.get(f"/v1/tenants/acme/quotas/effective?user={user}&client_id=app-1")
    assert effective.status == 200
    quotas = effective.json["quotas"]
    assert quotas["producer_byte_rate"] == {
        "value": 1000,
        "source": f"/config/users/{user}/clients/<default>",
    }
    assert quotas["consumer_byte_rate"] == {"value": 50, "source": "/config/clients/<default>"}
    assert quotas["controller_mutation_rate"] == {"value": None, "source": None}
    removed = api.put(
        "/v1/tenants/acme/quotas",
        {"entity": {"client_id": "<default>"}, "quotas": {"request_percentage": None}},
    )
    assert removed.json["quotas"] == {"consumer_byte_rate": 50}
    assert api.delete("/v1/tenants/acme/quotas?client_id=%3Cdefault%3E").status == 204
    assert len(api.get("/v1/tenants/acme/quotas").json["items"]) == 1


def test_quota_errors(api: ServedApi) -> None:
    new_tenant(api)
    entity = {"user": "<default>"}
    bad_name = api.put("/v1/tenants/acme/quotas", {"entity": entity, "quotas": {"bytes": 1}})
    assert problem(bad_name, 400)["errors"][0]["field"] == "body.quotas.bytes"
    problem(
        api.put(
            "/v1/tenants/acme/quotas", {"entity": entity, "quotas": {"producer_byte_rate": -5}}
        ),
        400,
    )
    problem(
        api.put("/v1/tenants/acme/quotas", {"entity": {}, "quotas": {"producer_byte_rate": 5}}), 400
    )
    problem(api.get("/v1/tenants/acme/quotas/effective?user=u"), 400)
    problem(api.get("/v1/tenants/nobody/quotas/effective?user=u&client_id=c"), 404)


def acl_body(principal: str, **extra: str) -> dict[str, str]:
    return {
        "resource_type": "TOPIC",
        "pattern_type": "prefixed",
        "resource_name": "orders",
        "operation": "READ",
        "permission": "allow",
        "principal": principal,
        **extra,
    }


def test_acls(api: ServedApi) -> None:
    new_tenant(api)
    principal = "User:" + new_account(api, "acme")["id"]
    read = api.post("/v1/tenants/acme/acls", acl_body(principal))
    assert read.status == 201 and read.json["host"] == "*" and read.json["tenant_id"] == "acme"
    write = api.post("/v1/tenants/acme/acls", acl_body(principal, operation="WRITE"))
    group = api.post(
        "/v1/tenants/acme/acls",
        acl_body(principal, resource_type="GROUP", pattern_type="literal", resource_name="g1"),
    )
    listed = api.get("/v1/tenants/acme/acls")
    assert {a["id"] for a in listed.json["items"]} == {
        read.json["id"],
        write.json["id"],
        group.json["id"],
    }
    assert api.delete(f"/v1/tenants/acme/acls/{group.json['id']}").status == 204
    problem(api.delete(f"/v1/tenants/acme/acls/{group.json['id']}"), 404)
    deleted = api.delete("/v1/tenants/acme/acls?resource_type=TOPIC&operation=WRITE")
    assert [a["id"] for a in deleted.json["deleted"]] == [write.json["id"]]
    assert [a["id"] for a in api.get("/v1/tenants/acme/acls").json["items"]] == [read.json["id"]]


def test_acl_errors(api: ServedApi) -> None:
    new_tenant(api, "acme")
    new_tenant(api, "other")
    foreign = "User:" + new_account(api, "other")["id"]
    problem(api.post("/v1/tenants/acme/acls", acl_body(foreign)), 403)
    principal = "User:" + new_account(api, "acme")["id"]
    bad = problem(api.post("/v1/tenants/acme/acls", acl_body(principal, operation="FLY")), 400)
    assert bad["errors"][0]["field"] == "body.operation"
    # the whole list of operations, not a message cut off mid-way
    assert bad["errors"][0]["message"] == (
        "must be one of READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, "
        "ALTER_CONFIGS, IDEMPOTENT_WRITE, ALL"
    )
    typo = problem(api.post("/v1/tenants/acme/acls", {**acl_body(principal), "hots": "*"}), 400)
    assert typo["errors"] == [
        {
            "field": "body.hots",
            "message": "unknown property; the properties are resource_type, pattern_type, "
            "resource_name, operation, permission, principal, host",
        }
    ]
    problem(api.delete("/v1/tenants/acme/acls"), 400)
    problem(api.get("/v1/tenants/nobody/acls"), 404)


PLAN = {
    "currency": "EUR",
    "dimensions": {
        "ingress_gib": {
            "included": "10",
            "tiers": [
                {"up_to": "100", "unit_price": "0.09"},
                {"up_to": None, "unit_price": "0.05"},
            ],
        },
        "requests": {"included": "1000000", "tiers": [{"up_to": None, "unit_price": "0.000001"}]},
    },
}


DEFAULT_TERMS: dict[str, Any] = {
    "limits": {
        "max_partitions": 100,
        "max_storage_bytes": 10 * 2**30,
        "max_connections": 100,
        "max_request_bytes": 2**20,
        "max_producer_byte_rate": None,
        "max_consumer_byte_rate": None,
        "max_groups": None,
        "max_transactional_ids": None,
    },
    "quotas": {},
    "authorization": "acls",  # a plan's tenants need ACLs unless it says "open"
}


def test_plans(api: ServedApi) -> None:
    problem(api.get("/v1/plans/pro"), 404)
    put = api.put("/v1/plans/pro", PLAN)
    assert put.status == 200, put.body
    assert put.json == {"name": "pro", **PLAN, **DEFAULT_TERMS}
    assert api.get("/v1/plans/pro").json == {"name": "pro", **PLAN, **DEFAULT_TERMS}
    listed = api.get("/v1/plans")
    assert listed.status == 200, listed.body
    assert [p["name"] for p in listed.json["items"]] == ["enterprise", "free", "pro", "standard"]
    terms: dict[str, Any] = {
        "limits": {**DEFAULT_TERMS["limits"], "max_partitions": 5},
        "quotas": {"producer_byte_rate": 1048576, "request_percentage": 12.5},
        "authorization": "open",
    }
    assert api.put("/v1/plans/pro", {**PLAN, **terms}).json == {"name": "pro", **PLAN, **terms}
    fraction = {**PLAN, "quotas": {"producer_byte_rate": 1.5}}
    assert problem(api.put("/v1/plans/pro", fraction), 400)["errors"] == [
        {"field": "body.quotas.producer_byte_rate", "message": "must be a whole number"}
    ]
    bad = {**PLAN, "dimensions": {"ingress_gib": {"included": "ten", "tiers": []}}}
    problem(api.put("/v1/plans/pro", bad), 400)
    problem(api.put("/v1/plans/pro", {**PLAN, "currency": 978}), 400)


def test_unknown_plans_are_refused_naming_the_known_ones(api: ServedApi) -> None:
    body = {"id": "acme", "display_name": "Acme", "plan": "gold"}
    refused = problem(api.post("/v1/tenants", body), 400)
    assert refused["errors"][0]["field"] == "plan"
    assert "the plans are: enterprise, free, standard" in refused["errors"][0]["message"]
    assert api.get("/v1/tenants").json["items"] == []
    new_tenant(api)
    problem(api.patch("/v1/tenants/acme", {"plan": "gold"}), 400)
    assert api.patch("/v1/tenants/acme", {"plan": "standard"}).json["plan"] == "standard"


def test_idempotent_post_replays(api: ServedApi) -> None:
    body = {"id": "acme", "display_name": "Acme", "plan": "free"}
    key = {"Idempotency-Key": "k-1"}
    first = api.post("/v1/tenants", body, headers=key)
    again = api.post("/v1/tenants", body, headers=key)
    assert first.status == again.status == 201
    assert again.json == first.json and again.headers["Idempotent-Replayed"] == "true"
    assert again.headers["Location"] == "/v1/tenants/acme"
    assert [t["id"] for t in api.get("/v1/tenants").json["items"]] == ["acme"]
    problem(api.post("/v1/tenants", {**body, "display_name": "Other"}, headers=key), 422)
    problem(api.post("/v1/tenants", body, headers={"Idempotency-Key": "k-2"}), 409)


def test_idempotent_api_key_creation_returns_the_same_secret(api: ServedApi) -> None:
    new_tenant(api)
    account = new_account(api, "acme")
    key = {"Idempotency-Key": "create-key-1"}
    body = {"service_account_id": account["id"]}
    first = api.post("/v1/tenants/acme/api-keys", body, headers=key)
    again = api.post("/v1/tenants/acme/api-keys", body, headers=key)
    assert first.json == again.json
    assert len(api.get("/v1/tenants/acme/api-keys").json["items"]) == 1


def test_failed_idempotent_post_can_be_retried(api: ServedApi) -> None:
    key = {"Idempotency-Key": "retry-me"}
    problem(api.post("/v1/tenants/acme/service-accounts", {"name": "app"}, headers=key), 404)
    new_tenant(api)
    assert api.post("/v1/tenants/acme/service-accounts", {"name": "app"}, headers=key).status == 201


def test_health_and_metrics(api: ServedApi) -> None:
    health = api.get("/healthz", token=None)
    assert health.status == 200 and health.json["status"] == "ok"
    new_tenant(api)
    api.get("/v1/tenants/nobody")
    metrics = api.get("/metrics", token=None).body.decode()
    assert (
        'pier_admin_requests_total{method="POST",route="/v1/tenants",status="201"} 1.0' in metrics
    )
    assert 'route="/v1/tenants/{id}",status="404"' in metrics


def test_openapi_document_is_served(api: ServedApi) -> None:
    document = api.get("/openapi.json", token=None).json
    assert document["openapi"].startswith("3.1")
    assert "/v1/tenants/{id}/quotas/effective" in document["paths"]


def test_secrets_stay_out_of_access_logs(api: ServedApi, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")
    new_tenant(api)
    account = new_account(api, "acme")
    secret = api.post("/v1/tenants/acme/api-keys", {"service_account_id": account["id"]}).json[
        "secret"
    ]
    api.get("/v1/tenants?limit=5")
    logged = "\n".join(record.getMessage() for record in caplog.records)
    assert "path=/v1/tenants/acme/api-keys status=201" in logged
    assert api.token is not None and api.token not in logged
    assert secret not in logged and "limit=5" not in logged and "Authorization" not in logged
