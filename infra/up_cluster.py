"""`infra/up`'s cluster: a local ZooKeeper and N brokers in ZooKeeper mode (docs/cluster.md,
"Cluster mode (ZooKeeper)").

Owns the two component starters `infra.up_main` runs by default, and the text that tells the
developer how to reach the cluster. ZooKeeper keeps its snapshots in `<root>/zookeeper` and broker
N (ids 1..N) its log dir in `<root>/broker-N/data`, so a second run finds the same cluster: same
cluster id, topics and offsets. Brokers listen on consecutive ports from `--port` (9092, 9093,
9094) and serve Prometheus metrics on consecutive ports from `--metrics-port` (7071...; 0: none).
Every port is checked before anything starts, so a busy one fails fast with the option to change.
The brokers get a development cluster's defaults (replication factor 3, min.insync.replicas 2,
shorter ZooKeeper session and replica lag timeouts than Kafka's, so a killed broker is noticed
within seconds); `--broker-config KEY=VALUE` overrides any of them. Stopping is `Stack.close()`:
brokers newest first, each by SIGTERM (controlled shutdown), then ZooKeeper.
Blocking; runs on the launcher's main thread.
"""

from __future__ import annotations

import argparse

from infra.connect_help import client_snippets
from infra.errors import LaunchError
from infra.probes import port_in_use
from infra.stack import Stack

DEFAULT_BROKERS = 3
DEFAULT_ZOOKEEPER_PORT = 2181
DEFAULT_METRICS_PORT = 7071
FIRST_NODE_ID = 1
# A laptop cluster: replicated by default, and quick to notice a dead broker (Kafka: 18 s / 30 s).
CLUSTER_DEFAULTS = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "zookeeper.session.timeout.ms": "6000",
    "replica.lag.time.max.ms": "10000",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--brokers", type=int, default=DEFAULT_BROKERS, help="cluster size (%(default)s)"
    )
    parser.add_argument(
        "--zookeeper-port",
        type=int,
        default=DEFAULT_ZOOKEEPER_PORT,
        help="the local ZooKeeper's client port (%(default)s)",
    )
    parser.add_argument(
        "--metrics-port",
        type=int,
        default=DEFAULT_METRICS_PORT,
        help="first broker's Prometheus port, the others follow (%(default)s; 0: off)",
    )
    parser.add_argument(
        "--broker-config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a broker setting for every broker (repeatable)",
    )


def broker_settings(pairs: list[str]) -> dict[str, str]:
    """CLUSTER_DEFAULTS overridden by `--broker-config KEY=VALUE` pairs."""
    settings = dict(CLUSTER_DEFAULTS)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise LaunchError(f"--broker-config wants KEY=VALUE, got {pair!r}")
        settings[key.strip()] = value.strip()
    return settings


def planned_ports(args: argparse.Namespace) -> list[tuple[str, int]]:
    """(option, port) of everything the cluster will listen on."""
    if args.brokers < 1:
        raise LaunchError("--brokers must be at least 1")
    ports = [("--zookeeper-port", args.zookeeper_port)]
    ports += [("--port", args.port + i) for i in range(args.brokers)]
    if args.metrics_port:
        ports += [("--metrics-port", args.metrics_port + i) for i in range(args.brokers)]
    return ports


def start_local_zookeeper(stack: Stack, args: argparse.Namespace) -> str:
    """Check every port the cluster needs, then start ZooKeeper (it must serve sessions)."""
    for option, port in planned_ports(args):
        if port_in_use(args.host, port):
            raise LaunchError(f"port {port} on {args.host} is in use; pick another with {option}")
    zookeeper = stack.start_zookeeper(port=args.zookeeper_port)
    return f"ZooKeeper: {zookeeper.connect}  (data and log in {zookeeper.data_dir})"


def start_cluster_brokers(stack: Stack, args: argparse.Namespace) -> str:
    """Start the brokers one by one (each registers before the next starts), then describe them."""
    settings = broker_settings(args.broker_config)
    lines = []
    for i in range(args.brokers):
        metrics_port = args.metrics_port + i if args.metrics_port else None
        broker = stack.add_broker(
            node_id=FIRST_NODE_ID + i,
            port=args.port + i,
            config=settings,
            metrics_port=metrics_port,
        )
        metrics = f", metrics http://{args.host}:{metrics_port}/metrics" if metrics_port else ""
        lines.append(
            f"broker {broker.node_id}: {broker.bootstrap}  (log {broker.log_path}{metrics})"
        )
    return "\n".join(lines) + "\n\n" + cluster_snippets(stack.bootstrap, args.pier)


def cluster_snippets(bootstrap: str, pier: str) -> str:
    """The bootstrap list, `pier cluster`, a replicated topic with kcat, then every client."""
    first = bootstrap.split(",", 1)[0]
    return (
        f"bootstrap.servers: {bootstrap}\n\n"
        "--- the cluster ---\n"
        f"{pier} cluster --bootstrap {bootstrap}   # brokers, controller, partition health\n"
        f"{pier} cluster --bootstrap {first} --json\n\n" + client_snippets(bootstrap)
    )
