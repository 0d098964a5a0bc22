"""`infra/up`'s tenant door: the gateway in front of the brokers, and a demo tenant to try it.

Owns the gateway's component starter and its demo credentials. The first run creates, in the
tenant store the admin API uses, a tenant `demo` on the `standard` plan (so its quotas are that
plan's: per user 10 MiB/s produce, 20 MiB/s fetch, 100 % request time; docs/plans.md) with a
service account `demo-app` and an API key, and saves the
key in `<root>/demo-credentials.json` (mode 0600: the secret is shown once by the store, so this
file is the only copy; it is never printed); later runs reuse that file while the key still
works. `<root>/demo-client.properties` (0600) is a Java client / Kafka tools config for it. The gateway listens
on `--gateway-port` (9192) for bootstrap and on `--gateway-port + 1 + N` for broker N, and its
metrics on `--gateway-metrics-port`, and its tenant HTTP API on `--gateway-http-port` (8082). The text returned tells a developer how to connect each
Kafka client through it with SASL. Blocking; runs on the launcher's main thread.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from infra.connect_help import java_client_properties, sasl_snippets
from infra.errors import LaunchError
from infra.files import save_secret, shown
from infra.probes import free_port, port_in_use
from infra.stack import Stack
from tenancy.store import TenantStore

DEFAULT_GATEWAY_PORT = 9192
DEFAULT_GATEWAY_METRICS_PORT = 7170
DEFAULT_GATEWAY_HTTP_PORT = 8082  # Confluent REST Proxy's usual port
DEMO_TENANT = "demo"
DEMO_ACCOUNT = "demo-app"
DEMO_PLAN = "standard"  # its quotas: 10 MiB/s produce, 20 MiB/s fetch per user
CREDENTIALS_FILE = "demo-credentials.json"
JAVA_PROPERTIES = "demo-client.properties"
OPERATOR = "infra-up"
BILLING_TRIGGER = "30s"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gateway-port",
        type=int,
        default=DEFAULT_GATEWAY_PORT,
        help="gateway bootstrap port; broker N is served on this + 1 + N (%(default)s)",
    )
    parser.add_argument(
        "--no-billing", action="store_true", help="run without the billing rollup stream"
    )
    parser.add_argument(
        "--billing-trigger",
        "--billing-every",  # the name from when the rollup was a batch loop
        dest="billing_trigger",
        default=BILLING_TRIGGER,
        help="micro-batch interval of `pier billing stream` (%(default)s)",
    )
    parser.add_argument(
        "--gateway-http-port",
        type=int,
        default=DEFAULT_GATEWAY_HTTP_PORT,
        help="the gateway's tenant HTTP API port (%(default)s; 0: off)",
    )
    parser.add_argument(
        "--gateway-metrics-port",
        type=int,
        default=DEFAULT_GATEWAY_METRICS_PORT,
        help="gateway Prometheus port (%(default)s; 0: off)",
    )


def start_billing(stack: Stack, args: argparse.Namespace) -> str:
    """The rollup as a stream, so the demo tenant's usage appears within a minute by itself."""
    db_url = f"sqlite:///{args.root / 'tenancy.db'}"
    stream = stack.start_billing_stream(
        db_url, trigger=args.billing_trigger, state_dir=args.root / "billing-state"
    )
    return (
        f"billing: `pier billing stream`, a micro-batch every {args.billing_trigger}"
        f" (log {stream.log_path}; checkpoint {stream.checkpoint}; restarted with backoff if it"
        " dies; `pier billing run` for backfills)\n"
        f"{args.pier} billing usage --db {db_url} --tenant {DEMO_TENANT} --from YYYY-MM-DD"
        " --to YYYY-MM-DD [--csv] [--chart usage.png]\n"
    )


def gateway_http_url(args: argparse.Namespace) -> str | None:
    """The tenant HTTP API's base URL (None when turned off). The default port, when taken, is
    replaced by a free one once, so the admin API (started first) and the gateway agree on it."""
    if not args.gateway_http_port:
        return None
    if args.gateway_http_port == DEFAULT_GATEWAY_HTTP_PORT and port_in_use(
        args.host, args.gateway_http_port
    ):
        args.gateway_http_port = free_port(args.host)  # any port, printed with the endpoints
    return f"http://{args.host}:{args.gateway_http_port}"


def start_gateway(stack: Stack, args: argparse.Namespace) -> str:
    """Create (or reuse) the demo tenant, then run the gateway in front of the brokers."""
    base = args.gateway_port + 1
    wanted = [("--gateway-port", args.gateway_port)]
    wanted += [("--gateway-port", base + broker.node_id) for broker in stack.brokers]
    if args.gateway_metrics_port:
        wanted.append(("--gateway-metrics-port", args.gateway_metrics_port))
    if gateway_http_url(args) is not None:
        wanted.append(("--gateway-http-port", args.gateway_http_port))
    for option, port in wanted:
        if port_in_use(args.host, port):
            raise LaunchError(f"port {port} on {args.host} is in use; pick another with {option}")
    db_url = f"sqlite:///{args.root / 'tenancy.db'}"
    credentials = demo_credentials(db_url, args.root / CREDENTIALS_FILE)
    settings = {"http.port": str(args.gateway_http_port)} if args.gateway_http_port else {}
    if stack.zookeeper is not None:  # cluster mode: gateways hold quotas together (docs/gateway.md)
        settings["zookeeper.connect"] = stack.zookeeper.connect
    gateway = stack.start_gateway(
        db_url,
        port=args.gateway_port,
        broker_port_base=base,
        metrics_port=args.gateway_metrics_port or None,
        properties=settings or None,
    )
    metrics = (
        f", metrics http://{args.host}:{args.gateway_metrics_port}/metrics"
        if args.gateway_metrics_port
        else ""
    )
    properties = args.root / JAVA_PROPERTIES
    save_secret(properties, java_client_properties(gateway.bootstrap, credentials))
    http = (
        f"tenant HTTP API: http://{args.host}:{args.gateway_http_port}"
        f" (HTTP Basic: API key id and secret; OpenAPI at /openapi.json; docs/gateway-http.md)\n"
        f"tenant console: http://{args.host}:{args.gateway_http_port}/console/"
        " (sign in with an API key; docs/console.md)\n"
        if args.gateway_http_port
        else ""
    )
    return (
        f"gateway: {gateway.bootstrap}  (log {gateway.log_path}{metrics})\n"
        + http
        + f"demo tenant {credentials['tenant']}: API key {credentials['key_id']},"
        f" secret in {shown(args.root / CREDENTIALS_FILE)} (mode 0600)\n\n"
        + sasl_snippets(gateway.bootstrap, shown(args.root / CREDENTIALS_FILE), shown(properties))
    )


def demo_credentials(db_url: str, path: Path) -> dict[str, str]:
    """The saved demo key if it still authenticates; otherwise a new one (tenant made if needed)."""
    with TenantStore.open(db_url) as store:
        saved = _read(path)
        if saved is not None and store.verify_api_key(saved["key_id"], saved["secret"]) is not None:
            return saved
        if not any(t.id == DEMO_TENANT for t in store.list_tenants(limit=100).items):
            store.create_tenant(  # open: the demo key may use any topic without ACLs
                display_name="Demo",
                plan=DEMO_PLAN,
                tenant_id=DEMO_TENANT,
                authorization="open",
                actor=OPERATOR,
            )
        account = store.create_service_account(DEMO_TENANT, name=DEMO_ACCOUNT, actor=OPERATOR)
        key, secret = store.create_api_key(
            DEMO_TENANT, service_account_id=account.id, description="infra/up demo", actor=OPERATOR
        )
    credentials = {"tenant": DEMO_TENANT, "key_id": key.key_id, "secret": str(secret)}
    save_secret(path, json.dumps(credentials))
    return credentials


def _read(path: Path) -> dict[str, str] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not {"tenant", "key_id", "secret"} <= set(data):
        return None
    return {k: str(data[k]) for k in ("tenant", "key_id", "secret")}
