"""The component schemas of the admin API's OpenAPI 3.1 document (JSON Schema 2020-12 dialect).

Owns: the shape of every request and response body. `openapi.py` assembles them with the paths;
`validation.py` validates request bodies against them and the tests check responses against
them. Money and allowances are decimal strings, never JSON numbers (plans are billed with
`Decimal`). Quotas have Kafka's types: the byte rates are integers (bytes/s, Kafka's LONG), the
others numbers. Tenant limits are integers; the tenant-wide byte-rate caps are integers or null (no
cap), optional on create, and a PATCH sets one to null to remove it. Immutable module data; safe
from any thread.
"""

from __future__ import annotations

from typing import Any

JsonSchema = dict[str, Any]

QUOTA_NAMES = (
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
)
BYTE_RATE_QUOTAS = ("producer_byte_rate", "consumer_byte_rate")
RESOURCE_TYPES = ["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"]
# Kafka's AclOperation names (ANY and UNKNOWN are filter-only in Kafka, so not creatable).
OPERATIONS = [
    "READ",
    "WRITE",
    "CREATE",
    "DELETE",
    "ALTER",
    "DESCRIBE",
    "DESCRIBE_CONFIGS",
    "ALTER_CONFIGS",
    "IDEMPOTENT_WRITE",
    "ALL",
]
TENANT_ID_PATTERN = "^[a-z][a-z0-9-]{2,15}$"
DECIMAL_PATTERN = r"^[0-9]{1,26}(\.[0-9]{1,12})?$"  # NUMERIC(38, 12)
INT64_MAX = 2**63 - 1


def ref(name: str) -> JsonSchema:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(required: list[str], props: dict[str, JsonSchema], **extra: Any) -> JsonSchema:
    return {
        "type": "object",
        "required": required,
        "properties": props,
        "additionalProperties": False,
        **extra,
    }


def _text(max_length: int, min_length: int = 0) -> JsonSchema:
    return {"type": "string", "minLength": min_length, "maxLength": max_length}


_TIME: JsonSchema = {"type": "string", "format": "date-time"}
_NULLABLE_TIME: JsonSchema = {"type": ["string", "null"], "format": "date-time"}
_COUNT: JsonSchema = {"type": "integer", "minimum": 0, "maximum": INT64_MAX}
_DECIMAL: JsonSchema = {"type": "string", "pattern": DECIMAL_PATTERN}
_ENTITY_NAME: JsonSchema = {"type": ["string", "null"], "minLength": 1, "maxLength": 255}
_LIMIT_NAMES = ["max_partitions", "max_storage_bytes", "max_connections", "max_request_bytes"]
_RATE_CAP_NAMES = ["max_producer_byte_rate", "max_consumer_byte_rate"]
_NAME_LIMIT_NAMES = ["max_groups", "max_transactional_ids"]
_AUTHORIZATION: JsonSchema = {
    "enum": ["acls", "open"],
    "description": "Whether the tenant's service accounts need ACLs. acls: only what an ALLOW "
    "binding grants (Kafka's allow.everyone.if.no.acl.found=false); open: a resource no binding "
    "names is open to them (=true). Explicit: deleting the last ACL never opens a tenant",
}
_RATE_CAP: JsonSchema = {
    "type": ["integer", "null"],
    "minimum": 1,
    "maximum": INT64_MAX,
    "description": "Tenant-wide cap in bytes/s over all the tenant's principals (Produce request "
    "bytes, or Fetch record bytes), enforced with the client quotas; null = no cap",
}
_NAME_LIMIT: JsonSchema = {
    "type": ["integer", "null"],
    "minimum": 1,
    "maximum": INT64_MAX,
    "description": "Consumer groups (max_groups) or transactional ids (max_transactional_ids) the "
    "tenant may hold on the fleet's coordinators; one more is refused GROUP_ / "
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED; null = the gateway's tenant.max.groups / "
    "tenant.max.transactional.ids",
}


def _page(item: str) -> JsonSchema:
    nullable_cursor = {"type": ["string", "null"]}
    return _obj(
        ["items", "next_cursor"],
        {"items": {"type": "array", "items": ref(item)}, "next_cursor": nullable_cursor},
    )


def _tenancy_schemas() -> dict[str, JsonSchema]:
    limits = {
        **{name: _COUNT for name in _LIMIT_NAMES},
        **{name: _RATE_CAP for name in _RATE_CAP_NAMES},
        **{name: _NAME_LIMIT for name in _NAME_LIMIT_NAMES},
    }
    return {
        "TenantLimits": _obj([*_LIMIT_NAMES, *_RATE_CAP_NAMES, *_NAME_LIMIT_NAMES], limits),
        # On create the rate caps and name limits may be left out (null); the others together.
        "TenantLimitsCreate": _obj(_LIMIT_NAMES, limits),
        "TenantLimitsPatch": _obj(
            [],
            limits,
            description="Only the limits given change; null removes a rate cap or a "
            "name limit (the gateway's setting applies)",
        ),
        "Tenant": _obj(
            [
                "id",
                "display_name",
                "plan",
                "status",
                "limits",
                "authorization",
                "created_at",
                "updated_at",
            ],
            {
                "id": {"type": "string"},
                "display_name": {"type": "string"},
                "plan": {"type": "string"},
                "status": {"enum": ["active", "suspended", "deleted"]},
                "limits": ref("TenantLimits"),
                "authorization": _AUTHORIZATION,
                "created_at": _TIME,
                "updated_at": _TIME,
            },
        ),
        "TenantCreate": _obj(
            ["display_name", "plan"],
            {
                "id": {"type": "string", "pattern": TENANT_ID_PATTERN},
                "display_name": _text(200, 1),
                "plan": _text(64, 1),
                "limits": ref("TenantLimitsCreate"),
                "authorization": {
                    **_AUTHORIZATION,
                    "description": "absent: the plan's. " + _AUTHORIZATION["description"],
                },
            },
        ),
        "TenantPatch": _obj(
            [],
            {
                "display_name": _text(200, 1),
                "plan": _text(64, 1),
                "limits": ref("TenantLimitsPatch"),
                "authorization": _AUTHORIZATION,
            },
        ),
        "TenantPage": _page("Tenant"),
    }


def _principal_schemas() -> dict[str, JsonSchema]:
    api_key_props: dict[str, JsonSchema] = {
        "key": {"type": "string"},
        "tenant_id": {"type": "string"},
        "service_account_id": {"type": "string"},
        "description": {"type": "string"},
        "created_at": _TIME,
        "expires_at": _NULLABLE_TIME,
        "revoked_at": _NULLABLE_TIME,
        "last_used_at": _NULLABLE_TIME,
    }
    return {
        "ServiceAccount": _obj(
            ["id", "tenant_id", "name", "description", "created_at"],
            {
                "id": {"type": "string"},
                "tenant_id": {"type": "string"},
                "name": {"type": "string"},
                "description": {"type": "string"},
                "created_at": _TIME,
            },
        ),
        "ServiceAccountCreate": _obj(["name"], {"name": _text(64, 1), "description": _text(1000)}),
        "ServiceAccountPage": _page("ServiceAccount"),
        "ApiKey": _obj(list(api_key_props), api_key_props),
        "ApiKeyWithSecret": _obj(
            [*api_key_props, "secret"], {**api_key_props, "secret": {"type": "string"}}
        ),
        "ApiKeyCreate": _obj(
            ["service_account_id"],
            {
                "service_account_id": _text(64, 1),
                "description": _text(1000),
                "expires_at": _NULLABLE_TIME,
            },
        ),
        "ApiKeyPage": _page("ApiKey"),
    }


def _quota_values(nullable: bool) -> JsonSchema:
    """Kafka's quota types: byte rates whole bytes/s (LONG), the other two numbers (DOUBLE)."""
    null = ["null"] if nullable else []
    rate = {
        "type": ["integer", *null],
        "minimum": 1,
        "maximum": INT64_MAX,
        "description": "bytes/s, a whole number (Kafka's LONG)",
    }
    number = {"type": ["number", *null], "exclusiveMinimum": 0, "maximum": 1e18}
    return _obj([], {name: rate if name in BYTE_RATE_QUOTAS else number for name in QUOTA_NAMES})


def _quota_schemas() -> dict[str, JsonSchema]:
    effective = _obj(
        ["value", "source"],
        {"value": {"type": ["number", "null"]}, "source": {"type": ["string", "null"]}},
    )
    return {
        "QuotaEntity": _obj([], {"user": _ENTITY_NAME, "client_id": _ENTITY_NAME}),
        "QuotaValues": _quota_values(nullable=True),
        "PlanQuotas": _quota_values(nullable=False),
        "QuotaSet": _obj(
            ["entity", "quotas"], {"entity": ref("QuotaEntity"), "quotas": ref("QuotaValues")}
        ),
        "QuotaEntry": _obj(
            ["entity", "quotas"], {"entity": ref("QuotaEntity"), "quotas": ref("QuotaValues")}
        ),
        "QuotaList": _obj(["items"], {"items": {"type": "array", "items": ref("QuotaEntry")}}),
        "EffectiveQuota": effective,
        "EffectiveQuotas": _obj(
            ["user", "client_id", "quotas"],
            {
                "user": {"type": "string"},
                "client_id": {"type": "string"},
                "quotas": _obj(
                    list(QUOTA_NAMES), dict.fromkeys(QUOTA_NAMES, ref("EffectiveQuota"))
                ),
            },
        ),
    }


def _acl_schemas() -> dict[str, JsonSchema]:
    spec: dict[str, JsonSchema] = {
        "resource_type": {"enum": RESOURCE_TYPES},
        "pattern_type": {"enum": ["literal", "prefixed"]},
        "resource_name": _text(255, 1),
        "operation": {"enum": OPERATIONS},
        "permission": {"enum": ["allow", "deny"]},
        "principal": {"type": "string", "pattern": "^User:.{1,64}$"},
        "host": _text(255, 1),
    }
    full = {"id": {"type": "string"}, "tenant_id": {"type": "string"}, **spec}
    required = [
        "resource_type",
        "pattern_type",
        "resource_name",
        "operation",
        "permission",
        "principal",
    ]
    return {
        "Acl": _obj(list(full), full),
        "AclCreate": _obj(required, spec),
        "AclPage": _page("Acl"),
        "AclDeleted": _obj(["deleted"], {"deleted": {"type": "array", "items": ref("Acl")}}),
    }


def _plan_schemas() -> dict[str, JsonSchema]:
    tier = _obj(
        ["up_to", "unit_price"],
        {"up_to": {"type": ["string", "null"], "pattern": DECIMAL_PATTERN}, "unit_price": _DECIMAL},
    )
    dimension = _obj(
        ["included", "tiers"],
        {
            "included": _DECIMAL,
            "tiers": {"type": "array", "minItems": 1, "maxItems": 32, "items": ref("PlanTier")},
        },
    )
    dimensions = {
        "type": "object",
        "maxProperties": 64,
        "propertyNames": {"pattern": "^[a-z][a-z0-9_]{0,63}$"},
        "additionalProperties": ref("PlanDimension"),
    }
    terms = {
        "limits": ref("TenantLimitsCreate"),
        "quotas": ref("PlanQuotas"),
        "authorization": {**_AUTHORIZATION, "description": "absent: acls. What its tenants get"},
    }
    return {
        "PlanTier": tier,
        "PlanDimension": dimension,
        "Plan": _obj(
            ["name", "currency", "dimensions", "limits", "quotas", "authorization"],
            {
                "name": {"type": "string"},
                "currency": {"type": "string"},
                "dimensions": dimensions,
                "limits": ref("TenantLimits"),
                "quotas": ref("PlanQuotas"),
                "authorization": _AUTHORIZATION,
            },
        ),
        "PlanList": _obj(["items"], {"items": {"type": "array", "items": ref("Plan")}}),
        # limits absent: the store's defaults; quotas absent: none (docs/plans.md)
        "PlanPut": _obj(
            ["currency", "dimensions"],
            {
                "currency": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "dimensions": dimensions,
                **terms,
            },
        ),
    }


def _problem_schema() -> JsonSchema:
    field = _obj(["field", "message"], {"field": {"type": "string"}, "message": {"type": "string"}})
    return {
        "type": "object",
        "required": ["type", "title", "status", "detail", "instance"],
        "properties": {
            "type": {"type": "string"},
            "title": {"type": "string"},
            "status": {"type": "integer", "minimum": 400, "maximum": 599},
            "detail": {"type": "string"},
            "instance": {"type": "string"},
            "errors": {"type": "array", "items": field},
        },
    }


def component_schemas() -> dict[str, JsonSchema]:
    """Every named schema of the document, by name."""
    health = _obj(
        ["status"], {"status": {"enum": ["ok", "unavailable"]}, "version": {"type": "integer"}}
    )
    return {
        **_tenancy_schemas(),
        **_principal_schemas(),
        **_quota_schemas(),
        **_acl_schemas(),
        **_plan_schemas(),
        "Problem": _problem_schema(),
        "Health": health,
    }
