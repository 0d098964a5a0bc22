"""`pier admin`: a thin blocking client of the admin HTTP API, with tables or JSON output.

Owns: turning `pier admin <resource> <verb>` arguments into one API call (`Call`), sending it with
stdlib `urllib` (Bearer token; `Idempotency-Key` when asked), and printing the answer as a table
(lists, effective quotas) or field/value rows (one object) — or the API's JSON with `--json`.
API problems become `OperationError` with the problem's status, title and detail (or failing
fields); arguments that cannot work become `UsageError`. List commands show one page; the next
cursor is named on stderr. One invocation, one thread.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOKEN_ENV = "PIER_ADMIN_TOKEN"
QUOTA_NAMES = (
    "producer_byte_rate",
    "consumer_byte_rate",
    "request_percentage",
    "controller_mutation_rate",
)
BYTE_RATE_QUOTAS = ("producer_byte_rate", "consumer_byte_rate")  # Kafka: longs, bytes/s
DEFAULT_ENTITY = "<default>"  # Kafka's default user / client-id entity
LIMIT_FLAGS = ("max_partitions", "max_storage_bytes", "max_connections", "max_request_bytes")
RATE_CAP_FLAGS = ("max_producer_byte_rate", "max_consumer_byte_rate")  # bytes/s; optional
NAME_LIMIT_FLAGS = ("max_groups", "max_transactional_ids")  # optional: none = the gateway's
NO_CAP = "none"  # a rate-cap or name-limit flag's value that sends null (update: remove it)


class OperationError(Exception):
    """A request that failed (exit status 1)."""


class UsageError(Exception):
    """Arguments that cannot work (exit status 2)."""


# -- admin client ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Call:
    method: str
    path: str
    body: Any = None
    query: Mapping[str, Any] = field(default_factory=dict)
    columns: tuple[str, ...] = ()  # table columns for list results
    headers: Mapping[str, str] = field(default_factory=dict)


def _q(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


def _drop_none(values: Mapping[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _limits(args: argparse.Namespace) -> dict[str, int | None]:
    limits: dict[str, int | None] = _drop_none({name: getattr(args, name) for name in LIMIT_FLAGS})
    for name in (*RATE_CAP_FLAGS, *NAME_LIMIT_FLAGS):
        value = getattr(args, name)
        if value is not None:
            limits[name] = None if value == NO_CAP else value
    return limits


def _page_query(args: argparse.Namespace, **extra: Any) -> dict[str, Any]:
    return _drop_none({"limit": args.limit, "cursor": args.cursor, **extra})


def _tenant_call(args: argparse.Namespace) -> Call:
    tenant_columns = ("id", "display_name", "plan", "status", "authorization", "created_at")
    verb = args.verb
    if verb == "create":
        body = _drop_none(
            {
                "id": args.id,
                "display_name": args.display_name,
                "plan": args.plan,
                "authorization": args.authorization,
            }
        )
        limits = _limits(args)
        if limits and not all(name in limits for name in LIMIT_FLAGS):
            raise UsageError(
                "tenants create: give all four --max-* limits or none (--max-*-byte-rate, "
                "--max-groups and --max-transactional-ids need them too)"
            )
        if limits:
            body["limits"] = limits
        key = {"Idempotency-Key": args.idempotency_key} if args.idempotency_key else {}
        return Call("POST", "/v1/tenants", body, headers=key)
    if verb == "list":
        return Call(
            "GET",
            "/v1/tenants",
            query=_page_query(args, status=args.status),
            columns=tenant_columns,
        )
    path = f"/v1/tenants/{_q(args.tenant)}"
    if verb == "update":
        body = _drop_none(
            {
                "display_name": args.display_name,
                "plan": args.plan,
                "authorization": args.authorization,
            }
        )
        if _limits(args):
            body["limits"] = _limits(args)
        return Call("PATCH", path, body)
    if verb in ("suspend", "resume"):
        return Call("POST", f"{path}/{verb}")
    return Call("DELETE" if verb == "delete" else "GET", path)


def _account_call(args: argparse.Namespace) -> Call:
    path = f"/v1/tenants/{_q(args.tenant)}/service-accounts"
    if args.verb == "create":
        return Call("POST", path, _drop_none({"name": args.name, "description": args.description}))
    return Call(
        "GET", path, query=_page_query(args), columns=("id", "name", "description", "created_at")
    )


def _key_call(args: argparse.Namespace) -> Call:
    if args.verb == "revoke":
        return Call("DELETE", f"/v1/api-keys/{_q(args.key)}")
    path = f"/v1/tenants/{_q(args.tenant)}/api-keys"
    if args.verb == "create":
        body = {
            "service_account_id": args.service_account,
            "description": args.description,
            "expires_at": args.expires_at,
        }
        return Call("POST", path, _drop_none(body))
    return Call(
        "GET",
        path,
        query=_page_query(args),
        columns=("key", "service_account_id", "description", "expires_at", "revoked_at"),
    )


def _quota_call(args: argparse.Namespace) -> Call:
    path = f"/v1/tenants/{_q(args.tenant)}/quotas"
    if args.verb == "set":
        entity = {"user": args.user, "client_id": args.client_id}
        return Call("PUT", path, {"entity": _drop_none(entity), "quotas": dict(args.quota)})
    if args.verb == "delete":
        return Call(
            "DELETE", path, query=_drop_none({"user": args.user, "client_id": args.client_id})
        )
    if args.verb == "effective":
        return Call(
            "GET", f"{path}/effective", query={"user": args.user, "client_id": args.client_id}
        )
    return Call("GET", path, columns=("entity", "quotas"))


_ACL_FIELDS = (
    "resource_type",
    "pattern_type",
    "resource_name",
    "operation",
    "permission",
    "principal",
    "host",
)


def _acl_call(args: argparse.Namespace) -> Call:
    path = f"/v1/tenants/{_q(args.tenant)}/acls"
    values = _drop_none({name: getattr(args, name, None) for name in _ACL_FIELDS})
    if args.verb == "create":
        return Call("POST", path, values)
    if args.verb == "delete":
        if args.acl_id is not None:
            return Call("DELETE", f"{path}/{_q(args.acl_id)}")
        return Call("DELETE", path, query=values, columns=("id", *_ACL_FIELDS))
    return Call("GET", path, query=_page_query(args), columns=("id", *_ACL_FIELDS))


def _plan_call(args: argparse.Namespace) -> Call:
    if args.verb == "list":
        return Call("GET", "/v1/plans", columns=("name", "currency", "limits", "quotas"))
    path = f"/v1/plans/{_q(args.name)}"
    if args.verb == "get":
        return Call("GET", path)
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
        return Call("PUT", path, json.loads(text))
    except OSError as exc:
        raise UsageError(f"--file: cannot read {args.file}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise UsageError(
            f"--file: {args.file} is not JSON ({exc}); docs/plans.md shows a plan document"
        ) from None


def _gateway_call(args: argparse.Namespace) -> Call:
    columns = ("id", "gateway", "worker", "applied_version", "behind", "started_at", "last_seen")
    return Call("GET", "/v1/gateways", columns=(*columns, "connections", "tenants", "registered"))


_CALLS: dict[str, Callable[[argparse.Namespace], Call]] = {
    "tenants": _tenant_call,
    "service-accounts": _account_call,
    "api-keys": _key_call,
    "quotas": _quota_call,
    "acls": _acl_call,
    "plans": _plan_call,
    "gateways": _gateway_call,
}


def run_admin(args: argparse.Namespace) -> None:
    token = args.token or os.environ.get(TOKEN_ENV)
    if not args.url:
        raise UsageError(
            "the admin API's URL is needed: --url URL or $PIER_ADMIN_URL "
            "(infra/up serves it on http://127.0.0.1:8080)"
        )
    if not token:
        raise UsageError(
            f"an operator token is needed: --token TOKEN or ${TOKEN_ENV} "
            "(`pier tenancy init` prints the first one; infra/up saves it in .pier/operator-token)"
        )
    call = _CALLS[args.resource](args)
    status, body = _send(args.url, token, call, args.timeout)
    _render(call, status, body, as_json=args.json)
    if args.resource == "api-keys" and args.verb == "create" and not args.json:
        print("pier: store the secret now; it is not shown again", file=sys.stderr)


def _send(base_url: str, token: str, call: Call, timeout: float) -> tuple[int, Any]:
    query = f"?{urllib.parse.urlencode(call.query)}" if call.query else ""
    data = None if call.body is None else json.dumps(call.body).encode()
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json", **call.headers}
    if data is not None:
        headers["Content-Type"] = "application/json"
    url = base_url.rstrip("/") + call.path + query
    request = urllib.request.Request(url, data=data, headers=headers, method=call.method)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        raise OperationError(_problem_text(exc)) from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise OperationError(
            f"cannot reach the admin API at {base_url}: {reason}; is it running "
            "(`pier admin-api`, or infra/up) and is the URL right?"
        ) from None


def _problem_text(exc: urllib.error.HTTPError) -> str:
    try:
        problem = json.loads(exc.read())
        fields = "; ".join(f"{e['field']}: {e['message']}" for e in problem.get("errors", []))
        detail = fields or problem.get("detail", "")
        return f"{exc.code} {problem.get('title', exc.reason)}: {detail}"
    except (ValueError, AttributeError, TypeError, KeyError):
        return f"{exc.code} {exc.reason}"


# -- output ----------------------------------------------------------------------------------------
def _render(call: Call, status: int, body: Any, *, as_json: bool) -> None:
    if as_json:
        print(json.dumps(body, indent=2, sort_keys=True) if body is not None else "{}")
        return
    if body is None:
        print("done" if status == 204 else "")
        return
    if "items" in body or "deleted" in body:
        rows = body.get("items", body.get("deleted", []))
        print(_table([[_cell(row.get(c)) for c in call.columns] for row in rows], call.columns))
        if body.get("next_cursor"):
            print(f"pier: more results: --cursor {body['next_cursor']}", file=sys.stderr)
        return
    if "quotas" in body and "user" in body and "client_id" in body:
        rows = [[name, _cell(q["value"]), _cell(q["source"])] for name, q in body["quotas"].items()]
        print(_table(rows, ("quota", "value", "source")))
        return
    print(_table([[key, _cell(value)] for key, value in _flatten(body)], ("field", "value")))


def _flatten(body: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in body.items():
        if isinstance(value, Mapping) and value:
            rows += _flatten(value, f"{prefix}{key}.")
        else:
            rows.append((prefix + key, value))
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, Mapping):
        return ",".join(f"{k}={_cell(v)}" for k, v in value.items() if v is not None) or "-"
    if isinstance(value, list):
        return json.dumps(value)
    return str(value)


def _table(rows: list[list[str]], columns: tuple[str, ...]) -> str:
    header = [c.upper().replace("_", "-") for c in columns]
    widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows, strict=False)]
    lines = [header, *rows]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=False)).rstrip()
        for line in lines
    )
