"""The admin API's OpenAPI 3.1 document, built in code and served at `/openapi.json`.

Owns: paths, parameters, responses and security of the operator API. It is the contract the
request validator (`validation.py`) enforces and the Schemathesis tests check responses against,
so a route that is not described here is not reachable (the validator refuses it). Every
operation documents its problem responses plus a `default` one. Built once per process (the
result is cached and must not be mutated); safe from any thread.
"""

from __future__ import annotations

import functools
from typing import Any

from tenancy.api import openapi_billing, openapi_http_consumers
from tenancy.api.openapi_schemas import RESOURCE_TYPES, JsonSchema, component_schemas, ref

TITLE = "Pier admin API"
VERSION = "1.0.0"
PROBLEM = "application/problem+json"
_ERROR_TITLES = {
    "400": "The request does not match the API description",
    "401": "Missing or invalid operator token",
    "403": "The operation is not allowed on this resource",
    "404": "No such resource",
    "409": "Conflict with the current state (or an idempotent request still in flight)",
    "413": "Request body too large",
    "415": "Request body is not JSON",
    "422": "Idempotency-Key reused with a different request",
}


def _param(name: str, where: str, schema: JsonSchema, *, required: bool = False) -> JsonSchema:
    return {"name": name, "in": where, "required": required or where == "path", "schema": schema}


# Free-text parameters refuse control characters (PostgreSQL text cannot even hold NUL).
PRINTABLE: JsonSchema = {"type": "string", "pattern": "^[^\\x00-\\x1f\\x7f]*$"}
_ID: JsonSchema = {**PRINTABLE, "minLength": 1, "maxLength": 64}
_PARAMETERS: dict[str, JsonSchema] = {
    "TenantId": _param("id", "path", {**_ID}),
    "KeyId": _param("key", "path", {**_ID}),
    "AclId": _param("acl_id", "path", {**_ID}),
    "PlanName": _param(
        "name", "path", {"type": "string", "pattern": "^[a-z0-9][a-z0-9_.-]{0,63}$"}
    ),
    "Limit": _param("limit", "query", {"type": "integer", "minimum": 1, "maximum": 1000}),
    "Cursor": _param("cursor", "query", {"type": "string", "minLength": 1, "maxLength": 512}),
    "IdempotencyKey": _param(
        "Idempotency-Key", "header", {"type": "string", "minLength": 1, "maxLength": 255}
    ),
}


def _p(name: str) -> JsonSchema:
    return {"$ref": f"#/components/parameters/{name}"}


def _json(schema: JsonSchema, description: str, headers: JsonSchema | None = None) -> JsonSchema:
    response: JsonSchema = {
        "description": description,
        "content": {"application/json": {"schema": schema}},
    }
    if headers:
        response["headers"] = headers
    return response


def _problem_responses() -> dict[str, JsonSchema]:
    responses: dict[str, JsonSchema] = {
        code: {"description": title, "content": {PROBLEM: {"schema": ref("Problem")}}}
        for code, title in _ERROR_TITLES.items()
    }
    challenge = {"WWW-Authenticate": {"schema": {"type": "string"}, "required": True}}
    responses["401"]["headers"] = challenge
    responses["Error"] = {
        "description": "Any other error",
        "content": {PROBLEM: {"schema": ref("Problem")}},
    }
    return responses


def _op(
    op_id: str,
    summary: str,
    responses: dict[str, JsonSchema],
    *,
    params: tuple[str, ...] = (),
    body: str | None = None,
) -> JsonSchema:
    codes = ["400", "401", "403", "404"]
    if body is not None:
        codes += ["409", "413", "415", "422"]
    operation: JsonSchema = {
        "operationId": op_id,
        "summary": summary,
        "parameters": [_p(name) for name in params],
        "responses": {
            **responses,
            **{code: {"$ref": f"#/components/responses/{code}"} for code in codes},
            "default": {"$ref": "#/components/responses/Error"},
        },
    }
    if body is not None:
        operation["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": ref(body)}},
        }
    return operation


_LINK = {"Link": {"schema": {"type": "string"}, "description": 'RFC 8288, rel="next"'}}
_NO_CONTENT = {"204": {"description": "Done"}}
# Changes that take access away are answered once in force on every live gateway (at most 1 s).
_IN_FORCE: JsonSchema = {
    "Pier-Change-Version": {
        "schema": {"type": "string", "pattern": "^[0-9]+$"},
        "description": "The store's change version when the change was committed",
    },
    "Pier-Propagation": {
        "schema": {"enum": ["confirmed", "unconfirmed"]},
        "description": "confirmed: every live gateway applied the change before this answer; "
        "unconfirmed: 1 s passed first (Pier-Propagation-Pending names the gateways behind)",
    },
    "Pier-Propagation-Pending": {
        "schema": {"type": "string"},
        "description": "Comma-separated ids of the gateways that had not applied it",
    },
}
_DONE_IN_FORCE = {"204": {"description": "Done", "headers": _IN_FORCE}}


def _tenant_paths() -> dict[str, JsonSchema]:
    tenant = {"200": _json(ref("Tenant"), "The tenant")}
    changed = {"200": _json(ref("Tenant"), "The tenant, once in force", _IN_FORCE)}
    one = ("TenantId",)
    status_filter = _param("status", "query", {"enum": ["active", "suspended", "deleted"]})
    listing = _op(
        "listTenants",
        "List tenants",
        {"200": _json(ref("TenantPage"), "A page", _LINK)},
        params=("Limit", "Cursor"),
    )
    listing["parameters"].append(status_filter)
    return {
        "/v1/tenants": {
            "post": _op(
                "createTenant",
                "Create a tenant",
                {"201": _json(ref("Tenant"), "Created")},
                params=("IdempotencyKey",),
                body="TenantCreate",
            ),
            "get": listing,
        },
        "/v1/tenants/{id}": {
            "get": _op("getTenant", "Get a tenant", tenant, params=one),
            "patch": _op(
                "updateTenant", "Update a tenant", changed, params=one, body="TenantPatch"
            ),
            "delete": _op("deleteTenant", "Soft-delete a tenant", changed, params=one),
        },
        "/v1/tenants/{id}/suspend": {
            "post": _op(
                "suspendTenant", "Suspend a tenant", changed, params=(*one, "IdempotencyKey")
            ),
        },
        "/v1/tenants/{id}/resume": {
            "post": _op(
                "resumeTenant", "Resume a tenant", changed, params=(*one, "IdempotencyKey")
            ),
        },
    }


def _principal_paths() -> dict[str, JsonSchema]:
    paged = ("TenantId", "Limit", "Cursor")
    created = ("TenantId", "IdempotencyKey")
    return {
        "/v1/tenants/{id}/service-accounts": {
            "post": _op(
                "createServiceAccount",
                "Create a service account",
                {"201": _json(ref("ServiceAccount"), "Created")},
                params=created,
                body="ServiceAccountCreate",
            ),
            "get": _op(
                "listServiceAccounts",
                "List service accounts",
                {"200": _json(ref("ServiceAccountPage"), "A page", _LINK)},
                params=paged,
            ),
        },
        "/v1/tenants/{id}/api-keys": {
            "post": _op(
                "createApiKey",
                "Create an API key (the secret is returned once)",
                {"201": _json(ref("ApiKeyWithSecret"), "Created")},
                params=created,
                body="ApiKeyCreate",
            ),
            "get": _op(
                "listApiKeys",
                "List API keys (never secrets)",
                {"200": _json(ref("ApiKeyPage"), "A page", _LINK)},
                params=paged,
            ),
        },
        "/v1/api-keys/{key}": {
            "delete": _op(
                "revokeApiKey",
                "Revoke an API key",
                {"200": _json(ref("ApiKey"), "Revoked, once in force", _IN_FORCE)},
                params=("KeyId",),
            ),
        },
    }


def _quota_paths() -> dict[str, JsonSchema]:
    name = {**PRINTABLE, "minLength": 1, "maxLength": 255}
    client = {**PRINTABLE, "maxLength": 255}  # Kafka clients may send an empty client id
    delete = _op(
        "deleteQuotas", "Delete every quota of one entity", _NO_CONTENT, params=("TenantId",)
    )
    delete["parameters"] += [_param("user", "query", name), _param("client_id", "query", name)]
    effective = _op(
        "effectiveQuotas",
        "Resolve the quota chain for (user, client-id)",
        {"200": _json(ref("EffectiveQuotas"), "Each quota and its source")},
        params=("TenantId",),
    )
    effective["parameters"] += [
        _param("user", "query", name, required=True),
        _param("client_id", "query", client, required=True),
    ]
    return {
        "/v1/tenants/{id}/quotas": {
            "put": _op(
                "setQuotas",
                "Set (null: remove) quotas of one entity",
                {"200": _json(ref("QuotaEntry"), "The entity's quotas now")},
                params=("TenantId",),
                body="QuotaSet",
            ),
            "get": _op(
                "listQuotas",
                "List quota entities",
                {"200": _json(ref("QuotaList"), "Every entity")},
                params=("TenantId",),
            ),
            "delete": delete,
        },
        "/v1/tenants/{id}/quotas/effective": {"get": effective},
    }


def _acl_paths() -> dict[str, JsonSchema]:
    text = {**PRINTABLE, "minLength": 1, "maxLength": 255}
    filters = [
        _param("resource_type", "query", {"enum": RESOURCE_TYPES}),
        _param("pattern_type", "query", {"enum": ["literal", "prefixed"]}),
        _param("resource_name", "query", text),
        _param("operation", "query", text),
        _param("permission", "query", {"enum": ["allow", "deny"]}),
        _param("principal", "query", text),
        _param("host", "query", text),
    ]
    delete = _op(
        "deleteAcls",
        "Delete the ACLs matching every given filter (Kafka DeleteAcls)",
        {"200": _json(ref("AclDeleted"), "The deleted ACLs, once in force", _IN_FORCE)},
        params=("TenantId",),
    )
    delete["parameters"] += filters
    return {
        "/v1/tenants/{id}/acls": {
            "post": _op(
                "createAcl",
                "Create an ACL",
                {"201": _json(ref("Acl"), "Created, once in force", _IN_FORCE)},
                params=("TenantId", "IdempotencyKey"),
                body="AclCreate",
            ),
            "get": _op(
                "listAcls",
                "List ACLs",
                {"200": _json(ref("AclPage"), "A page", _LINK)},
                params=("TenantId", "Limit", "Cursor"),
            ),
            "delete": delete,
        },
        "/v1/tenants/{id}/acls/{acl_id}": {
            "delete": _op(
                "deleteAcl", "Delete one ACL", _DONE_IN_FORCE, params=("TenantId", "AclId")
            ),
        },
    }


def _plan_paths() -> dict[str, JsonSchema]:
    plan = {"200": _json(ref("Plan"), "The plan")}
    return {
        "/v1/plans": {
            "get": _op(
                "listPlans",
                "List every plan (the defaults: free, standard, enterprise)",
                {"200": _json(ref("PlanList"), "Every plan, by name")},
            ),
        },
        "/v1/plans/{name}": {
            "get": _op("getPlan", "Get a plan", plan, params=("PlanName",)),
            "put": _op(
                "putPlan", "Create or replace a plan", plan, params=("PlanName",), body="PlanPut"
            ),
        },
    }


def _gateway_paths() -> dict[str, JsonSchema]:
    count = {"type": "integer", "minimum": 0}
    gateway = {
        "type": "object",
        "required": [
            "id",
            "gateway",
            "worker",
            "applied_version",
            "behind",
            "started_at",
            "last_seen",
            "connections",
            "tenants",
            "registered",
        ],
        "additionalProperties": False,
        "properties": {
            "id": {"type": "string"},
            "gateway": {
                "type": "string",
                "description": "the id without `.w<k>` and `/<incarnation>`",
            },
            "worker": {
                "type": ["integer", "null"],
                "minimum": 0,
                "description": "k of a `--workers N` gateway's worker `<gateway>.w<k>`; else null",
            },
            "applied_version": count,
            "behind": count,
            "started_at": {"type": "string", "format": "date-time"},
            "last_seen": {"type": "string", "format": "date-time"},
            "connections": count,
            "tenants": count,
            "registered": {
                "type": ["boolean", "null"],
                "description": "its fleet znode exists in ZooKeeper (null: admin API without "
                "--zookeeper, or ZooKeeper unreadable)",
            },
        },
    }
    zookeeper = {
        "type": ["object", "null"],
        "required": ["connect", "readable"],
        "additionalProperties": False,
        "properties": {"connect": {"type": "string"}, "readable": {"type": "boolean"}},
    }
    listing = {
        "type": "object",
        "required": ["version", "stale_after_s", "propagation_timeout_s", "zookeeper", "items"],
        "additionalProperties": False,
        "properties": {
            "version": count,
            "stale_after_s": {"type": "number"},
            "propagation_timeout_s": {"type": "number"},
            "zookeeper": zookeeper,
            "items": {"type": "array", "items": gateway},
        },
    }
    return {
        "/v1/gateways": {
            "get": _op(
                "listGateways",
                "The live gateways and the change version each has applied (what a change that "
                "takes access away waits for)",
                {"200": _json(listing, "The store's version and every live gateway")},
            ),
        },
    }


def _service_paths() -> dict[str, JsonSchema]:
    text = {"text/plain": {"schema": {"type": "string"}}}
    public: list[JsonSchema] = []
    return {
        "/healthz": {
            "get": {
                "operationId": "health",
                "summary": "Liveness and store reachability",
                "security": public,
                "responses": {
                    "200": _json(ref("Health"), "Healthy"),
                    "503": _json(ref("Health"), "Store unreachable"),
                },
            }
        },
        "/metrics": {
            "get": {
                "operationId": "metrics",
                "summary": "Prometheus metrics",
                "security": public,
                "responses": {"200": {"description": "Prometheus text format", "content": text}},
            }
        },
        "/openapi.json": {
            "get": {
                "operationId": "openapi",
                "summary": "This document",
                "security": public,
                "responses": {"200": _json({"type": "object"}, "OpenAPI 3.1")},
            }
        },
    }


@functools.cache
def document() -> dict[str, Any]:
    """The whole OpenAPI 3.1 document (cached: treat as read-only)."""
    return {
        "openapi": "3.1.0",
        "info": {"title": TITLE, "version": VERSION},
        "security": [{"operatorToken": []}],
        "paths": {
            **_tenant_paths(),
            **_principal_paths(),
            **_quota_paths(),
            **_acl_paths(),
            **_plan_paths(),
            **openapi_billing.paths(_op, _p),
            **openapi_http_consumers.paths(_op, _p),
            **_gateway_paths(),
            **_service_paths(),
        },
        "components": {
            "securitySchemes": {"operatorToken": {"type": "http", "scheme": "bearer"}},
            "parameters": {
                **_PARAMETERS,
                **openapi_billing.parameters(),
                **openapi_http_consumers.parameters(),
            },
            "responses": _problem_responses(),
            "schemas": {
                **component_schemas(),
                **openapi_billing.schemas(),
                **openapi_http_consumers.schemas(),
            },
        },
    }


def public_paths() -> frozenset[str]:
    """Path templates that need no operator token (their operations declare `security: []`)."""
    return frozenset(
        path
        for path, item in document()["paths"].items()
        if all(op.get("security") == [] for op in item.values())
    )
