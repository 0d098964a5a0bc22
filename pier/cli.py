"""The `pier` command: one entry point, a subcommand per component.

Owns: argument parsing and process lifecycle (signals, exit codes). Bad arguments or an unusable
data dir print one line and exit 2 — never a stack trace. This is the composition root, so it may
import any component.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Coroutine, Sequence
from pathlib import Path
from typing import Any

from pier import (
    billing_cli,
    cluster_cli,
    event_loop,
    gateway_cli,
    groups_cli,
    limits,
    tenancy_cli,
    transactions,
)

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"pier: error: {message}\n")


def version() -> str:
    """This installation's version, from the package metadata (`pyproject.toml`'s)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed_version

    try:
        return installed_version("pier")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed: pip install -e .)"


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pier",
        description="Pier: a Kafka-protocol messaging service.",
        epilog="`pier COMMAND --help` lists a command's options. With infra/up running:\n"
        "  pier cluster --bootstrap 127.0.0.1:9092\n"
        "  pier admin --url http://127.0.0.1:8080 tenants list   (token: $PIER_ADMIN_TOKEN)\n"
        "Exit status: 0 success, 1 the request failed, 2 bad usage.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"pier {version()}", help="print the version"
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    broker = commands.add_parser("broker", help="run a standalone broker")
    broker.add_argument("--data-dir", required=True, type=Path, help="log directory")
    broker.add_argument("--port", required=True, type=int, help="listener port (0 = any free)")
    broker.add_argument("--host", default="127.0.0.1", help="listener address")
    broker.add_argument("--advertised-host", default=None, help="host clients are told to use")
    broker.add_argument("--node-id", default=0, type=int, help="broker id")
    broker.add_argument("--config", type=Path, default=None, help="Kafka broker properties file")
    broker.add_argument("--metrics-port", type=int, default=None, help="Prometheus endpoint port")
    broker.add_argument(
        "--zookeeper", default=None, help="HOST:PORT[/chroot]: join a cluster (ZooKeeper mode)"
    )
    broker.add_argument("--rack", default=None, help="this broker's rack (rack-aware assignment)")
    broker.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log lines at this level and above, to stderr (%(default)s)",
    )
    groups_cli.add_parser(commands)
    transactions.add_parser(commands)
    cluster_cli.add_parser(commands)
    tenancy_cli.add_parser(commands)
    gateway_cli.add_parser(commands)
    billing_cli.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "broker":
        return _run_broker(args)
    if args.command == "groups":
        return groups_cli.run(args)
    if args.command == "transactions":
        return transactions.run(args)
    if args.command == "cluster":
        return cluster_cli.run(args)
    if args.command == "billing":
        return billing_cli.run(args)
    if args.command in tenancy_cli.COMMANDS:
        return tenancy_cli.run(args)
    if args.command in gateway_cli.COMMANDS:
        return gateway_cli.run(args)
    return EXIT_USAGE


def _fail(message: str) -> int:
    print(f"pier: error: {message}", file=sys.stderr)
    return EXIT_USAGE


def _run_broker(args: argparse.Namespace) -> int:
    from brokers.common.config import BrokerConfig, BrokerConfigError, read_properties
    from brokers.log.errors import LogDirError
    from pier.logs import configure

    configure(args.log_level)
    limits.raise_open_file_limit()
    try:
        loop_choice = event_loop.chosen(os.environ)
        properties = read_properties(args.config) if args.config else {}
        config = BrokerConfig(
            data_dir=args.data_dir,
            node_id=args.node_id,
            host=args.host,
            port=args.port,
            advertised_host=args.advertised_host,
            metrics_port=args.metrics_port,
            rack=args.rack,
            properties=properties,
            zookeeper=args.zookeeper,
        )
        config.validate()
        _check_data_dir(args.data_dir)
        return event_loop.run(loop_choice, _serve(config))
    except (BrokerConfigError, LogDirError, event_loop.EventLoopChoiceError) as exc:
        return _fail(str(exc))
    except OSError as exc:
        return _fail(f"{exc.strerror or exc}: {getattr(exc, 'filename', '') or ''}".rstrip(": "))
    except Exception as exc:
        from brokers.controller.errors import ControllerError
        from brokers.log.errors import LogError

        if isinstance(exc, LogError | ValueError | ControllerError):
            return _fail(str(exc))
        raise


def _check_data_dir(path: Path) -> None:
    from brokers.log.errors import LogDirError

    if path.exists() and not path.is_dir():
        raise LogDirError(f"data dir {path} exists and is not a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".pier-write-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise LogDirError(f"data dir {path} is not usable: {exc.strerror}") from None


async def _serve(config: object) -> int:
    from brokers.app.build import build_broker
    from brokers.common.config import BrokerConfig
    from brokers.server.allocator import keep_heap
    from brokers.server.loop_health import settle_heap

    assert isinstance(config, BrokerConfig)
    broker = build_broker(config)
    keep_heap()  # request buffers reused, not re-faulted (allocator)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    if not await _started_unless_stopped(broker.start(), stop):
        # SIGTERM while starting (e.g. waiting for a dead session's registration to expire):
        # stop now rather than after the start-up wait, which may outlast a launcher's patience.
        logging.getLogger("pier.broker").info("event=stopped_while_starting")
        await broker.stop()
        return 0
    settle_heap()  # start-up state frozen out of the collector's scans (loop_health)
    print(
        f"pier broker ready node_id={config.node_id} listener={config.host}:{broker.port}"
        f" event_loop={event_loop.running_loop_name()}",
        file=sys.stderr,
        flush=True,
    )
    await stop.wait()
    await broker.stop()
    logging.getLogger("pier.broker").info("event=shutdown clean=true")
    return 0


async def _started_unless_stopped(start: Coroutine[Any, Any, None], stop: asyncio.Event) -> bool:
    """Run `start` to completion (its errors propagate) unless `stop` is set first: then cancel
    it and answer False."""
    starting = asyncio.ensure_future(start)
    stopping = asyncio.ensure_future(stop.wait())
    await asyncio.wait({starting, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if starting.done():
        stopping.cancel()
        starting.result()
        return True
    starting.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await starting
    return False
