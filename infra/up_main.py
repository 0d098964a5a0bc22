"""`infra/up`: run the local Pier stack in the foreground until Ctrl-C.

By default: a local ZooKeeper and three brokers in ZooKeeper mode (`infra.up_cluster`; ports
9092-9094, state under `<repo>/.pier/`), the operators' admin API (port 8080) on a SQLite
tenant store, `<repo>/.pier/tenancy.db`, and the tenant gateway in front of the brokers
(`infra.up_gateway`; port 9192, with a demo tenant and API key). `--standalone` runs one standalone broker instead (data in
`<repo>/.pier/data`), as before the cluster existed. The first run initialises the store and saves
the first operator's token in `<repo>/.pier/operator-token` (mode 0600); later runs upgrade the
schema and point at that file. The stack is described by a list of component starters
(`components`), each starting its processes on the shared `Stack` and returning the text that
tells the developer how to use them. Once up, `infra.up_watch` watches it: a broker that dies is
reported and the rest keep running; another process dying stops everything. The running stack is
recorded in `<root>/stack.json` (`infra.up_state`) from the moment the launcher starts: `infra/up`
run again with the same root while it runs asks that launcher to restart what died, prints what it
did, and exits; with nothing dead it says Pier is already running there (PID, processes, URLs) and
exits 3 (`infra.up_watch`). Every port the stack will listen on is checked before anything starts:
one taken by something else stops `infra/up` at once, naming the port and its option. Runs on the main
thread; SIGINT/SIGTERM only set an event, and the main thread stops every process through
`Stack.close()` (gateway, admin API, brokers newest first with controlled shutdown, then
ZooKeeper); SIGUSR1 (a restart request) only sets another.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from infra import up_state
from infra.connect_help import admin_snippets, client_snippets
from infra.errors import LaunchError
from infra.files import save_secret, shown
from infra.probes import port_in_use
from infra.stack import Stack, init_tenant_store
from infra.up_cluster import (
    FIRST_NODE_ID,
    add_arguments,
    planned_ports,
    start_cluster_brokers,
    start_local_zookeeper,
)
from infra.up_gateway import add_arguments as add_gateway_arguments
from infra.up_gateway import gateway_http_url, start_billing, start_gateway
from infra.up_watch import ALREADY_RUNNING, Watcher, ask_running_launcher

# State lives in the repository's .pier/ (git-ignored), wherever infra/up is run from.
DEFAULT_ROOT = Path(__file__).resolve().parents[1] / ".pier"
DEFAULT_PORT = 9092
DEFAULT_ADMIN_PORT = 8080
TENANT_STORE = "tenancy.db"
OPERATOR_TOKEN = "operator-token"

Starter = Callable[[Stack, argparse.Namespace], str]
EPILOG = f"""\
Examples:
  infra/up                          ZooKeeper, three brokers, the admin API, the gateway, billing
  infra/up --standalone --no-billing    one broker, the admin API and the gateway
  infra/up --root /tmp/pier2 --port 19092 --zookeeper-port 12181 --admin-port 18080 \\
      --gateway-port 19192 --gateway-http-port 18082 --metrics-port 0 --gateway-metrics-port 0
                                    a second, separate stack beside the first

Running it again with the same --root while a stack runs starts nothing new: if a process
of that stack died (a broker), the running launcher restarts it and this exits 0 (1 if the
restart failed); otherwise it prints "Pier is already running from ROOT" with the launcher's
PID, its processes and URLs, and exits {ALREADY_RUNNING}. A port that another program already
listens on stops infra/up before anything starts, naming the port and the option that moves
it (exit 1). Ctrl-C (or SIGTERM) stops every process; exit 0.

The first run sets up .venv with Pier and the Kafka clients the README uses;
`source .venv/bin/activate` puts `pier` on PATH."""


def start_standalone_broker(stack: Stack, args: argparse.Namespace) -> str:
    if port_in_use(args.host, args.port):
        raise LaunchError(f"port {args.port} on {args.host} is in use; pick another with --port")
    broker = stack.add_broker(port=args.port, data_dir=args.data_dir)
    where = f"data {broker.data_dir}, log {broker.log_path}"
    return f"broker {broker.node_id}: {broker.bootstrap}  ({where})\n\n" + client_snippets(
        broker.bootstrap
    )


def start_admin_api(stack: Stack, args: argparse.Namespace) -> str:
    """Initialise (or upgrade) the SQLite tenant store, then run the admin API on it."""
    if port_in_use(args.host, args.admin_port):
        raise LaunchError(
            f"port {args.admin_port} on {args.host} is in use; pick another with --admin-port"
        )
    db_path = args.root / TENANT_STORE
    db_url = f"sqlite:///{db_path}"
    token_note = operator_token_note(init_tenant_store(db_url), args.root / OPERATOR_TOKEN)
    # The admin API's operator view lists the gateway's HTTP consumer instances.
    http = None if args.no_gateway else gateway_http_url(args)
    api = stack.start_admin_api(db_url, port=args.admin_port, gateway_http=(http,) if http else ())
    where = f"tenant store {shown(db_path)}, log {shown(api.log_path)}"
    token_file = shlex.quote(shown(args.root / OPERATOR_TOKEN))
    console = f"operator console: {api.url}/console/ (sign in with the operator token)\n"
    return f"admin API: {api.url}  ({where})\n{console}{token_note}\n\n" + admin_snippets(
        api.url, token_file, args.pier
    )


def operator_token_note(token: str | None, token_path: Path) -> str:
    """Save a new operator token (0600) and show it; otherwise say where the saved one is."""
    if token is not None:
        save_secret(token_path, token)
        return (
            f"operator token (saved in {shown(token_path)}, mode 0600;"
            f" `pier tenancy init` never shows it again):\n{token}"
        )
    if token_path.is_file():
        return f"operator token: in {shown(token_path)} (created on the first run)"
    return (
        f"operator token: {shown(token_path)} is missing and the store already has an operator;"
        f" delete {shown(token_path.with_name(TENANT_STORE))} to start the store afresh"
    )


def pier_command() -> str:
    """`pier` when that is this virtualenv's script on PATH, else the script's path."""
    script = Path(sys.executable).with_name("pier")
    on_path = shutil.which("pier")
    if on_path is not None and Path(on_path).resolve() == script.resolve():
        return "pier"
    if script.is_file():
        return shlex.quote(shown(script))
    return f"{shlex.quote(sys.executable)} -m pier"


STANDALONE: list[Starter] = [start_standalone_broker, start_admin_api, start_gateway, start_billing]
CLUSTER: list[Starter] = [
    start_local_zookeeper,
    start_cluster_brokers,
    start_admin_api,
    start_gateway,
    start_billing,
]


def wanted_ports(args: argparse.Namespace) -> list[tuple[str, int]]:
    """(option, port) of every listener the chosen components will open."""
    if args.standalone:
        ports = [("--port", args.port)]
        node_ids = [0]
    else:
        ports = planned_ports(args)
        node_ids = [FIRST_NODE_ID + i for i in range(args.brokers)]
    ports.append(("--admin-port", args.admin_port))
    if not args.no_gateway:
        ports.append(("--gateway-port", args.gateway_port))
        ports += [("--gateway-port", args.gateway_port + 1 + node) for node in node_ids]
        if args.gateway_metrics_port:
            ports.append(("--gateway-metrics-port", args.gateway_metrics_port))
        if gateway_http_url(args) is not None:  # a taken default is moved to a free port
            ports.append(("--gateway-http-port", args.gateway_http_port))
    return ports


def check_ports(args: argparse.Namespace) -> None:
    """LaunchError naming the first port something else listens on, and the option to change."""
    for option, port in wanted_ports(args):
        if port_in_use(args.host, port):
            raise LaunchError(
                f"port {port} on {args.host} is in use by another program; pick another with"
                f" {option} (or stop what listens there)"
            )


def endpoints(stack: Stack, args: argparse.Namespace) -> list[tuple[str, str]]:
    """The running stack's addresses, as a second `infra/up` shows them."""
    found = [("bootstrap.servers", stack.bootstrap)]
    if stack.admin_api is not None:
        found += [("admin API", stack.admin_api.url)]
        found += [("operator console", f"{stack.admin_api.url}/console/")]
    if stack.gateway is not None:
        found.append(("gateway (Kafka, SASL)", stack.gateway.bootstrap))
        if args.gateway_http_port:
            http = f"http://{args.host}:{args.gateway_http_port}"
            found += [("tenant HTTP API", http), ("tenant console", f"{http}/console/")]
    return found


def components(args: argparse.Namespace) -> list[Starter]:
    chosen = STANDALONE if args.standalone else CLUSTER
    left_out = {start_gateway} if args.no_gateway else set()
    if args.no_billing or args.no_gateway:  # no gateway: no usage to roll up
        left_out.add(start_billing)
    return [starter for starter in chosen if starter not in left_out]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="infra/up",
        description="Run Pier locally until Ctrl-C.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EPILOG,
    )
    parser.add_argument("--host", default="127.0.0.1", help="listen address (default %(default)s)")
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help="(first) broker port (%(default)s)"
    )
    parser.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="state dir (%(default)s)")
    parser.add_argument(
        "--admin-port", type=int, default=DEFAULT_ADMIN_PORT, help="admin API port (%(default)s)"
    )
    parser.add_argument(
        "--standalone", action="store_true", help="one standalone broker, no ZooKeeper"
    )
    parser.add_argument("--data-dir", type=Path, help="standalone broker data (default ROOT/data)")
    parser.add_argument("--no-gateway", action="store_true", help="run without the tenant gateway")
    add_arguments(parser)
    add_gateway_arguments(parser)
    return parser


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    args.root = args.root.resolve()
    args.data_dir = (args.data_dir or args.root / "data").resolve()
    args.pier = pier_command()
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    running = up_state.find_launcher(args.root)
    if running is not None:
        return ask_running_launcher(args.root, running)
    try:
        check_ports(args)
    except LaunchError as exc:
        print(f"infra/up: {exc}", file=sys.stderr)
        return 1
    up_state.save_starting(args.root)
    stop, restart_wanted = threading.Event(), threading.Event()

    def request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    def request_restart(signum: int, frame: FrameType | None) -> None:
        restart_wanted.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(up_state.RESTART_SIGNAL, request_restart)
    try:
        with Stack(args.root, host=args.host) as stack:
            for starter in components(args):
                print(starter(stack, args), flush=True)
            print("Pier is up. Press Ctrl-C to stop.", flush=True)
            return Watcher(stack, args.root, endpoints(stack, args)).run(stop, restart_wanted)
    except LaunchError as exc:
        print(f"infra/up: {exc}", file=sys.stderr)
        return 1
    finally:
        up_state.remove(args.root)
        print("infra/up: stopped.", file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
