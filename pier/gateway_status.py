"""`pier gateway status`: the fleet view of running gateways and their workers.

Owns: the `status` subcommand of `pier gateway`. One `GET /v1/gateways` to the admin API with the
operator token (as `pier admin` sends it: `--url`/`$PIER_ADMIN_URL`, `--token`/`$PIER_ADMIN_TOKEN`)
gives every gateway process that reported within the store's stale bound; a worker of
`pier gateway --workers N` reports as its own, and the answer names its `gateway` and `worker`.
Printed as one row per worker grouped under its gateway (connections summed per gateway), with
`ZK` yes/no when the admin API reads the fleet's ZooKeeper (`--zookeeper`), a summary line first; `--json` prints the API's answer. Exit 0 when the admin API answered, 1 when it
did not or refused (one line on stderr, never a traceback), 2 for bad usage. One invocation, one
thread (blocking `urllib`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from pier.admin_client import TOKEN_ENV, Call, OperationError, UsageError, _send, _table

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
COLUMNS = ("gateway", "worker", "connections", "tenants", "behind", "zk", "last_seen", "id")
REGISTERED = {True: "yes", False: "no", None: "-"}  # its fleet znode exists (`--zookeeper`)


def add_parser(gateway: argparse.ArgumentParser) -> None:
    """Add `status` under the `pier gateway` parser (serving takes no subcommand)."""
    commands = gateway.add_subparsers(dest="gateway_command", metavar="{status}")
    status = commands.add_parser(
        "status",
        help="list the live gateways and their workers (admin API)",
        description="The fleet view: every live gateway and each of its workers (id "
        "<gateway>.w<k>) with the connections and tenants it holds and how far behind the "
        "store's changes it is, from the admin API's GET /v1/gateways.",
    )
    status.add_argument(
        "--url",
        default=os.environ.get("PIER_ADMIN_URL"),
        help="admin API base URL (default: $PIER_ADMIN_URL)",
    )
    status.add_argument("--token", default=None, help=f"operator token (default: ${TOKEN_ENV})")
    status.add_argument("--json", action="store_true", help="print the API's JSON answer")
    status.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the API")


def run(args: argparse.Namespace) -> int:
    try:
        body = _fetch(args)
    except UsageError as exc:
        print(f"pier: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OperationError as exc:
        print(f"pier: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print(json.dumps(body, indent=2, sort_keys=True) if args.json else render(body))
    return EXIT_OK


def _fetch(args: argparse.Namespace) -> Mapping[str, Any]:
    token = args.token or os.environ.get(TOKEN_ENV)
    if not args.url:
        raise UsageError(
            "the admin API's URL is needed: --url URL or $PIER_ADMIN_URL "
            "(infra/up serves it on http://127.0.0.1:8080)"
        )
    if not token:
        raise UsageError(f"an operator token is needed: --token TOKEN or ${TOKEN_ENV}")
    if not args.timeout > 0:
        raise UsageError(f"--timeout {args.timeout} is not a positive number of seconds")
    _status, body = _send(args.url, token, Call("GET", "/v1/gateways"), args.timeout)
    if not isinstance(body, Mapping) or not isinstance(body.get("items"), list):
        raise OperationError(f"the admin API at {args.url} answered without a gateway list")
    return body


def render(body: Mapping[str, Any]) -> str:
    """A summary line, then a row per worker grouped by gateway (a total row per gateway)."""
    items: Sequence[Mapping[str, Any]] = body["items"]
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for item in sorted(items, key=lambda i: (i["gateway"], i["worker"] or 0, i["id"])):
        groups.setdefault(item["gateway"], []).append(item)
    rows: list[list[str]] = []
    for gateway, workers in groups.items():
        rows += [_row(item) for item in workers]
        if len(workers) > 1:
            total = sum(int(item["connections"]) for item in workers)
            rows.append([gateway, "all", str(total), "", "", "", "", f"{len(workers)} workers"])
    connections = sum(int(item["connections"]) for item in items)
    summary = (
        f"{len(groups)} gateways, {len(items)} processes, {connections} connections; "
        f"store version {body.get('version')} (live: reported within {body.get('stale_after_s')} s)"
        + _zookeeper(body.get("zookeeper"))
    )
    return summary + ("\n" + _table(rows, COLUMNS) if rows else "")


def _zookeeper(state: Any) -> str:
    if not isinstance(state, Mapping):
        return "; ZooKeeper not read (admin-api --zookeeper)"
    readable = "registrations" if state.get("readable") else "UNREADABLE"
    return f"; ZooKeeper {state.get('connect')}: {readable}"


def _row(item: Mapping[str, Any]) -> list[str]:
    worker = "-" if item["worker"] is None else f"w{item['worker']}"
    return [
        str(item["gateway"]),
        worker,
        str(item["connections"]),
        str(item["tenants"]),
        str(item["behind"]),
        REGISTERED.get(item.get("registered"), "-"),
        str(item["last_seen"]),
        str(item["id"]),
    ]
