"""The billing part of the admin API's OpenAPI document: usage and invoice paths and schemas.

Kept apart from `openapi.py` (which assembles the document) so each stays small. Usage measures
are integers except `storage_byte_ms`, an exact decimal string; money is a decimal string with
two places. Pure; the caller caches the document.
"""

from __future__ import annotations

from collections.abc import Callable

from tenancy.api.openapi_schemas import DECIMAL_PATTERN, INT64_MAX, JsonSchema, ref

_COUNT: JsonSchema = {"type": "integer", "minimum": 0, "maximum": INT64_MAX}
_DECIMAL: JsonSchema = {"type": "string", "pattern": DECIMAL_PATTERN}
_SIGNED: JsonSchema = {"type": "string", "pattern": r"^-?[0-9]{1,26}(\.[0-9]{1,12})?$"}
_TEXT: JsonSchema = {"type": "string"}
_CSV = {"text/csv": {"schema": {"type": "string"}}}
_FORMAT = {"name": "format", "in": "query", "required": False, "schema": {"enum": ["json", "csv"]}}


def _query(name: str, schema: JsonSchema, *, required: bool = False) -> JsonSchema:
    return {"name": name, "in": "query", "required": required, "schema": schema}


def parameters() -> dict[str, JsonSchema]:
    return {
        "InvoiceId": {
            "name": "invoice",
            "in": "path",
            "required": True,
            "schema": {"type": "string", "minLength": 1, "maxLength": 64},
        },
        "UsageFrom": _query("from", {"type": "string", "format": "date-time"}, required=True),
        "UsageTo": _query("to", {"type": "string", "format": "date-time"}, required=True),
        "UsagePrincipal": _query("principal", {"type": "string", "maxLength": 255}),
        "UsageTopic": _query("topic", {"type": "string", "maxLength": 255}),
        "Granularity": _query("granularity", {"enum": ["hour", "day"]}),
        "Format": _FORMAT,
    }


def _obj(required: list[str], props: dict[str, JsonSchema]) -> JsonSchema:
    return {
        "type": "object",
        "required": required,
        "properties": props,
        "additionalProperties": False,
    }


def schemas() -> dict[str, JsonSchema]:
    measures = {
        name: _COUNT
        for name in (
            "bytes_in", "bytes_out", "requests", "throttle_ms", "connection_ms", "partition_ms",
            "records",
        )
    }  # fmt: skip
    usage = {
        "hour": {"type": "string", "format": "date-time"},
        "tenant": _TEXT,
        "principal": _TEXT,
        "client_id": _TEXT,
        "topic": {"type": ["string", "null"]},
        **measures,
        "storage_byte_ms": _DECIMAL,
    }
    line = _obj(
        ["kind", "for_period", "dimension", "measure", "quantity", "amount"],
        {
            "kind": {"enum": ["usage", "adjustment"]},
            "for_period": _TEXT,
            "dimension": _TEXT,
            "measure": _SIGNED,
            "quantity": _SIGNED,
            "amount": _SIGNED,
        },
    )
    summary = {
        "id": _TEXT,
        "period": {"type": "string", "pattern": "^[0-9]{4}-[0-9]{2}$"},
        "status": {"enum": ["draft", "final"]},
        "currency": _TEXT,
        "total": _SIGNED,
    }
    invoice = _obj(
        ["id", "tenant", "period", "status", "plan", "currency", "lines", "total", "provenance"],
        {
            **summary,
            "tenant": _TEXT,
            "plan": _TEXT,
            "lines": {"type": "array", "items": ref("InvoiceLine")},
            "provenance": {"type": "object"},
            "finalized_at": {"type": ["string", "null"]},
        },
    )
    return {
        "UsageRow": _obj(list(usage), usage),
        "UsagePage": _obj(["items"], {"items": {"type": "array", "items": ref("UsageRow")}}),
        "InvoiceLine": line,
        "InvoiceSummary": _obj(list(summary), summary),
        "InvoiceList": _obj(
            ["items"], {"items": {"type": "array", "items": ref("InvoiceSummary")}}
        ),
        "Invoice": invoice,
    }


def paths(op: Callable[..., JsonSchema], p: Callable[[str], JsonSchema]) -> dict[str, JsonSchema]:
    """`op` and `p` are openapi.py's operation and parameter-reference builders."""

    def either(schema: str, description: str) -> JsonSchema:
        content = {"application/json": {"schema": ref(schema)}, **_CSV}
        return {"200": {"description": description, "content": content}}

    usage = op(
        "getUsage",
        "A tenant's usage by UTC hour or day (format=csv: CSV)",
        either("UsagePage", "Usage rows, oldest first"),
        params=(
            "TenantId",
            "UsageFrom",
            "UsageTo",
            "UsagePrincipal",
            "UsageTopic",
            "Granularity",
            "Format",
        ),
    )
    invoices = op(
        "listInvoices",
        "A tenant's invoices, oldest period first",
        {
            "200": {
                "description": "Invoices",
                "content": {"application/json": {"schema": ref("InvoiceList")}},
            }
        },
        params=("TenantId",),
    )
    invoice = op(
        "getInvoice",
        "One invoice with its lines (format=csv: the lines as CSV)",
        either("Invoice", "The invoice"),
        params=("TenantId", "InvoiceId", "Format"),
    )
    del p
    return {
        "/v1/tenants/{id}/usage": {"get": usage},
        "/v1/tenants/{id}/invoices": {"get": invoices},
        "/v1/tenants/{id}/invoices/{invoice}": {"get": invoice},
    }
