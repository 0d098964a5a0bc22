"""`pier gateway`: run the tenant-facing Kafka gateway in front of a fleet.

Owns: the gateway's arguments, logging set-up and process lifecycle: SIGTERM/SIGINT drain and
stop (listeners closed, metered usage flushed), a bad argument or an unusable setting prints one
line and exits 2, a fleet or database that cannot be reached at start exits 1 with one line.
With `--workers N` (or `workers=N`) above 1 this process supervises N workers running the same
command (`gateway.supervisor`); each worker is an ordinary gateway told its slot by the supervisor.
`pier gateway status` (`pier.gateway_status`) is the fleet view read from the admin API instead.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import Any

from pier import event_loop, gateway_status, limits

EXIT_USAGE = 2
EXIT_UNAVAILABLE = 1
COMMANDS = ("gateway",)
_PARSERS: list[argparse.ArgumentParser] = []  # the gateway parser: a worker's argv is rebuilt


def add_parser(commands: Any) -> None:
    gateway = commands.add_parser(
        "gateway",
        help="run the tenant gateway (SASL, isolation, quotas, metering) in front of brokers",
        description=(
            "Serve tenants over the Kafka protocol: SASL PLAIN/SCRAM with API keys, every name "
            "in the tenant's namespace, ACLs, quotas and usage metering. Listens on --port "
            "(bootstrap) and on --broker-port-base + N for broker N. "
            "`pier gateway status` lists the running gateways and workers instead."
        ),
    )
    _PARSERS[:] = [gateway]
    gateway.add_argument("--bootstrap", help="HOST:PORT[,...] of the brokers (required)")
    gateway.add_argument(
        "--db", help="tenant store URL, sqlite:///… or postgresql+psycopg://… (required)"
    )
    gateway.add_argument("--port", type=int, help="bootstrap listener port (required)")
    gateway.add_argument("--host", default="127.0.0.1", help="listener address")
    gateway.add_argument("--advertised-host", default=None, help="host clients are told to use")
    gateway.add_argument(
        "--broker-port-base",
        type=int,
        default=None,
        help="broker N is served on this + N (default: --port + 1)",
    )
    gateway.add_argument("--metrics-port", type=int, default=None, help="Prometheus endpoint port")
    gateway.add_argument(
        "--metrics-host",
        default=None,
        help="Prometheus endpoint address (default: the metrics.host property, else 127.0.0.1; "
        "never --host, which tenants reach)",
    )
    gateway.add_argument(
        "--http-port",
        type=int,
        default=None,
        help="serve the tenant HTTP API (Confluent REST v3/v2) on this port (0: any free port)",
    )
    gateway.add_argument(
        "--gateway-id", default=None, help="id in usage-record ids (default gw-PORT)"
    )
    gateway.add_argument("--config", type=Path, default=None, help="gateway properties file")
    gateway.add_argument(
        "--zookeeper",
        default=None,
        help="HOST:PORT[,...][/chroot] of the fleet's ZooKeeper: register there and hold each "
        "tenant's rate quotas with the other gateways (wins over zookeeper.connect; default: "
        "quotas per gateway)",
    )
    gateway.add_argument(
        "--max-connections-per-ip",
        type=int,
        default=None,
        help="open connections allowed from one address (default 100; wins over the "
        "max.connections.per.ip property)",
    )
    gateway.add_argument(
        "--authentication-timeout-ms",
        type=int,
        default=None,
        help="close a connection not logged in this long after it was accepted (default 10000; "
        "wins over the authentication.timeout.ms property)",
    )
    gateway.add_argument(
        "--workers",
        type=int,
        default=None,
        help="serve the listeners from this many processes sharing their ports (SO_REUSEPORT), "
        "each its own event loop and gateway id ID.wK (default: the workers property, else the "
        "cores when the ports are fixed and --zookeeper is given, else 1)",
    )
    gateway.add_argument("--tls-cert", type=Path, default=None, help="PEM certificate (SASL_SSL)")
    gateway.add_argument("--tls-key", type=Path, default=None, help="PEM private key (SASL_SSL)")
    gateway.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log lines at this level and above, to stderr (%(default)s)",
    )
    gateway_status.add_parser(gateway)


def run(args: argparse.Namespace) -> int:
    import os

    from brokers.common.config import BrokerConfigError, read_properties
    from gateway.config import GatewayConfig, GatewayConfigError
    from gateway.supervisor import slot_from_env
    from pier.logs import configure

    if args.gateway_command == "status":
        return gateway_status.run(args)
    missing = [flag for flag in ("bootstrap", "db", "port") if getattr(args, flag) is None]
    if missing:
        needed = ", ".join(f"--{flag}" for flag in missing)
        print(f"pier: error: the following arguments are required: {needed}", file=sys.stderr)
        return EXIT_USAGE
    configure(args.log_level)
    limits.raise_open_file_limit()
    try:
        slot = slot_from_env(os.environ)
        loop_choice = event_loop.chosen(os.environ)
    except ValueError as exc:
        print(f"pier: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.workers is not None and not 1 <= args.workers <= 64:
        print(f"pier: error: --workers {args.workers} is not 1..64", file=sys.stderr)
        return EXIT_USAGE
    try:
        properties = read_properties(args.config) if args.config else {}
        for name, flag in (
            ("max.connections.per.ip", args.max_connections_per_ip),
            ("authentication.timeout.ms", args.authentication_timeout_ms),
            ("zookeeper.connect", args.zookeeper),
            ("workers", args.workers),
        ):
            if flag is not None:
                properties = {**properties, name: str(flag)}
        config = GatewayConfig(
            bootstrap=args.bootstrap,
            db_url=args.db,
            port=args.port,
            host=args.host,
            advertised_host=args.advertised_host,
            broker_port_base=args.broker_port_base,
            metrics_port=args.metrics_port,
            metrics_host=args.metrics_host,
            http_port=args.http_port,
            gateway_id=args.gateway_id,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            properties=properties,
            worker=slot,
        )
    except (BrokerConfigError, GatewayConfigError) as exc:
        print(f"pier: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if slot is None and config.setting("workers") > 1:
        return event_loop.run(loop_choice, _supervise(config, _worker_argv(args)))
    return event_loop.run(loop_choice, _serve(config))


def _worker_argv(args: argparse.Namespace) -> list[str]:
    """The command line of every worker: this one's options (a worker never supervises)."""
    argv = ["gateway"]
    for action in _PARSERS[0]._actions:
        value = getattr(args, action.dest, None)
        if action.option_strings and value is not None and action.dest not in ("help", "workers"):
            argv += [action.option_strings[0], str(value)]
    return argv


async def _supervise(config: Any, argv: list[str]) -> int:
    from gateway.supervisor import Supervisor

    count = config.setting("workers")
    if config.zookeeper_connect is None:  # docs/gateway-options.md, "Workers"
        logging.getLogger("pier.gateway").warning(
            "event=workers_without_zookeeper workers=%d detail=%s",
            count,
            "each worker enforces the whole of every quota; give --zookeeper to share them",
        )
    supervisor = Supervisor((sys.executable, "-m", "pier"), argv, count)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def ready() -> None:
        print(
            f"pier gateway ready bootstrap={config.public_host}:{config.port} workers={count}"
            f" event_loop={event_loop.running_loop_name()}"
            + (
                f" http={config.public_host}:{config.tenant_http_port}"
                if config.tenant_http_port
                else ""
            ),
            file=sys.stderr,
            flush=True,
        )

    code = await supervisor.run(stop, ready)
    logging.getLogger("pier.gateway").info("event=shutdown clean=%s", str(code == 0).lower())
    return code


def _dump_tasks(gateway: Any) -> None:
    """SIGUSR1: log every connection's state and where every task waits (for a stuck request)."""
    import io

    log = logging.getLogger("pier.gateway")
    if gateway.listeners is not None:
        for line in gateway.listeners.describe():
            log.warning("event=connection_dump %s", line)
    for task in asyncio.all_tasks():
        out = io.StringIO()
        task.print_stack(limit=12, file=out)
        log.warning("event=task_dump task=%s\n%s", task.get_name(), out.getvalue())


async def _serve(config: Any) -> int:
    from brokers.client.errors import ClientError
    from gateway.app import Gateway, GatewayStartError

    gateway = Gateway(config)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_signal_handler(signal.SIGUSR1, _dump_tasks, gateway)
    try:
        await gateway.start()
    except GatewayStartError as exc:
        print(f"pier: error: {exc}", file=sys.stderr)
        await gateway.stop()
        return EXIT_UNAVAILABLE
    except ClientError as exc:
        print(f"pier: error: no broker of {config.bootstrap} answers: {exc}", file=sys.stderr)
        await gateway.stop()
        return EXIT_UNAVAILABLE
    except OSError as exc:
        print(
            f"pier: error: cannot listen on {config.host}:{config.port}: {exc.strerror}",
            file=sys.stderr,
        )
        await gateway.stop()
        return EXIT_UNAVAILABLE
    except Exception as exc:  # the tenant store (SQLAlchemy) or TLS files
        print(
            f"pier: error: gateway cannot start: {exc.__class__.__name__}: {exc}", file=sys.stderr
        )
        await gateway.stop()
        return EXIT_UNAVAILABLE
    from brokers.server.allocator import keep_heap
    from brokers.server.loop_health import settle_heap

    keep_heap()  # frames of a MiB reused, not re-faulted, as in the broker (allocator)
    # Start-up state frozen out of the collector's scans, young collections rarer, as the broker
    # does: full collections over the gateway's heap cost a streamed HTTP record ~14 us of ~23.
    settle_heap()
    worker = "" if config.worker is None else f" worker {config.worker.index}"
    print(
        f"pier gateway{worker} ready bootstrap={config.public_host}:{gateway.bootstrap_port}"
        f" brokers={sorted(gateway.fleet.broker_ids()) if gateway.fleet else []}"
        + (f" http={config.public_host}:{gateway.http_port}" if gateway.http_port else "")
        + f" event_loop={event_loop.running_loop_name()}",
        file=sys.stderr,
        flush=True,
    )
    if config.worker is not None:  # tell the supervisor (gateway.supervisor)
        from gateway.supervisor import READY_LINE

        sys.stdout.buffer.write(READY_LINE)
        sys.stdout.flush()
    await stop.wait()
    await gateway.stop()
    logging.getLogger("pier.gateway").info("event=shutdown clean=true")
    return 0
