"""The operator view of tenants' HTTP consumer instances in the admin API's OpenAPI document.

Kept apart from `openapi.py` (which assembles the document), as the billing part is. The admin
API asks each gateway it was given (`pier tenancy api --gateway-http URL`) and merges what they
answer. Pure; the caller caches the document.
"""

from __future__ import annotations

from collections.abc import Callable

from tenancy.api.openapi_schemas import JsonSchema, ref

_TEXT: JsonSchema = {"type": "string"}
_NAME: JsonSchema = {"type": "string", "minLength": 1, "maxLength": 255}


def parameters() -> dict[str, JsonSchema]:
    return {
        "ConsumerGroup": {"name": "group", "in": "path", "required": True, "schema": _NAME},
        "ConsumerInstance": {"name": "instance", "in": "path", "required": True, "schema": _NAME},
    }


def schemas() -> dict[str, JsonSchema]:
    partition: JsonSchema = {
        "type": "object",
        "required": ["topic", "partition"],
        "properties": {"topic": _TEXT, "partition": {"type": "integer"}},
    }
    instance: JsonSchema = {
        "type": "object",
        "required": ["gateway", "group", "instance_id", "format", "subscription", "assignment"],
        "properties": {
            "gateway": _TEXT,
            "tenant_id": _TEXT,
            "group": _TEXT,
            "instance_id": _TEXT,
            "format": _TEXT,
            "member_id": {"type": ["string", "null"]},
            "subscription": {"type": "array", "items": _TEXT},
            "assignment": {"type": "array", "items": partition},
            "idle_ms": {"type": "integer"},
            "principal": _TEXT,
        },
    }
    return {
        "HttpConsumer": instance,
        "HttpConsumerList": {
            "type": "object",
            "required": ["items", "unreachable"],
            "properties": {
                "items": {"type": "array", "items": ref("HttpConsumer")},
                "unreachable": {"type": "array", "items": _TEXT},
            },
        },
    }


def paths(op: Callable[..., JsonSchema], p: Callable[[str], JsonSchema]) -> dict[str, JsonSchema]:
    listing = op(
        "listHttpConsumers",
        "List the tenant's HTTP (v2) consumer instances on every known gateway",
        {
            "200": {
                "description": "The instances, and the gateways that did not answer",
                "content": {"application/json": {"schema": ref("HttpConsumerList")}},
            }
        },
        params=("TenantId",),
    )
    delete = op(
        "deleteHttpConsumer",
        "Close one HTTP consumer instance (it leaves its group)",
        {"204": {"description": "Done"}},
        params=("TenantId", "ConsumerGroup", "ConsumerInstance"),
    )
    return {
        "/v1/tenants/{id}/http-consumers": {"get": listing},
        "/v1/tenants/{id}/http-consumers/{group}/{instance}": {"delete": delete},
    }
