"""Apache Kafka 4.1.1 in KRaft mode on loopback: the reference Pier is measured and tested against.

Starts 1 or 3 nodes, each a combined broker and controller (`process.roles=broker,controller`; with 3
nodes the three form the controller quorum, so the cluster is three JVMs as Pier's is three brokers
and a ZooKeeper), with the settings Pier's own stack gives its brokers (`infra.up_cluster`): Kafka's
defaults for segment size (1 GiB) and log flush (left to the OS), replication factor and min ISR 1
for one node, and `CLUSTER_DEFAULTS` (RF 3, min ISR 2, replica lag 10 s) for three. The jars come
from `infra/reference/kafka fetch-server` (Maven Central into a cache outside the repository). Each
node is formatted with `kafka.tools.StorageTool format` (what `kafka-storage.sh format` runs) and run
as `java <Kafka's own JVM flags, heap bounded> kafka.Kafka node-N/server.properties`, its output in
`node-N/kafka.log`, its data in `node-N/data`. Readiness: every node answers ApiVersions, then a
metadata request lists all nodes as brokers. Stopping is SIGTERM by PID (a controlled shutdown),
SIGKILL after a timeout.

Two ways in: `start_kafka(...)` returns a `KafkaCluster` whose processes die with the caller (tests,
the bench; `infra.process.spawn`), and `python -m infra.reference_kafka up|down --dir DIR` (what
`infra/reference/kafka up|down` runs) leaves the nodes running detached and records their PIDs in
`DIR/cluster.json` for `down`. Blocking; a `KafkaCluster` belongs to one thread.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from infra import process as proc
from infra.broker import format_properties
from infra.errors import LaunchError, NotReadyError
from infra.probes import free_port, kafka_ready

VERSION = "4.1.1"
SCRIPT = Path(__file__).resolve().parent / "reference" / "kafka"
STATE_FILE = "cluster.json"
# kafka-server-start.sh's KAFKA_JVM_PERFORMANCE_OPTS; the heap (Kafka's default -Xmx1G -Xms1G) is a
# parameter.
JVM_FLAGS = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)
# For tests and the benchmark's --short run, where start-up time matters and speed does not: the C1
# compiler only and the serial collector start a node in about two thirds of the time.
QUICK_JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true")
# The format step is a short-lived JVM: start it fast.
FORMAT_JVM_FLAGS = ("-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")
DEFAULT_HEAP = "1g"
# One node: nothing to replicate to (Kafka's internal topics default to RF 3 and would not be made).
# Topic-level defaults equal to Kafka's are left unset: a static broker setting shows in every
# topic's `kafka-topics --describe` (source STATIC_BROKER_CONFIG), where Pier's defaults do not.
SINGLE_NODE_DEFAULTS = {
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}
# Three nodes: infra.up_cluster.CLUSTER_DEFAULTS, less its ZooKeeper setting.
CLUSTER_DEFAULTS = {
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "replica.lag.time.max.ms": "10000",
}


@dataclass
class KafkaNode:
    """One combined broker+controller JVM; `restart` keeps its ports, data and settings."""

    node_id: int
    host: str
    port: int
    controller_port: int
    root: Path
    argv: list[str]
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def log_path(self) -> Path:
        return self.root / "kafka.log"

    @property
    def config_path(self) -> Path:
        return self.root / "server.properties"

    @property
    def pid(self) -> int:
        if self.process is None:
            raise LaunchError(f"Kafka node {self.node_id} is not running")
        return self.process.pid

    def start(self) -> None:
        self.process = proc.spawn(self.argv, self.log_path)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM (controlled shutdown), wait, SIGKILL after `timeout`; the exit status."""
        if self.process is None:
            return 0
        return proc.terminate(self.process, timeout)

    def kill(self) -> None:
        if self.process is not None:
            proc.kill(self.process)

    def wait_ready(self, timeout: float) -> None:
        if self.process is None:
            raise LaunchError(f"Kafka node {self.node_id} is not running")
        proc.wait_ready(
            self.process,
            lambda: kafka_ready(self.host, self.port),
            timeout=timeout,
            name=f"Kafka node {self.node_id} on {self.bootstrap}",
            log_path=self.log_path,
        )


@dataclass
class KafkaCluster:
    """The nodes of one reference cluster, stopped together (`close`, or the `with` block's end)."""

    root: Path
    nodes: list[KafkaNode]
    cluster_id: str

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def pids(self) -> list[int]:
        return [node.pid for node in self.nodes]

    def __enter__(self) -> KafkaCluster:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def start(self, wait: float) -> None:
        """Start every node (a quorum needs a majority up before any is ready), then wait."""
        for node in self.nodes:
            node.start()
        try:
            self.wait_ready(wait)
        except BaseException:
            self.kill()
            raise

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            node.wait_ready(max(0.1, deadline - time.monotonic()))
        wait_brokers(self.bootstrap, len(self.nodes), max(0.1, deadline - time.monotonic()))

    def restart(self, wait: float = 120.0) -> None:
        """Stop every node (newest first), start them again on the same data and ports."""
        self.close()
        self.start(wait)

    def close(self, timeout: float = 60.0) -> None:
        """SIGTERM every node at once, then wait for each: stopped one by one, the last nodes of a
        quorum lose their majority and hang in controlled shutdown until killed."""
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                node.process.send_signal(signal.SIGTERM)
        for node in self.nodes:
            node.stop(timeout)

    def kill(self) -> None:
        for node in self.nodes:
            node.kill()


def server_cache() -> Path:
    """The broker's jar cache (`infra/reference/kafka server-dir`)."""
    out = subprocess.run(
        [str(SCRIPT), "server-dir"], capture_output=True, text=True, check=True, timeout=30
    )
    return Path(out.stdout.strip())


def fetch_server(timeout: float = 600.0) -> Path:
    """Resolve the broker's jars into their cache (a checksum comparison once done); its path."""
    ran = subprocess.run(
        [str(SCRIPT), "fetch-server"], capture_output=True, text=True, timeout=timeout, check=False
    )
    if ran.returncode != 0:
        raise LaunchError(f"infra/reference/kafka fetch-server failed:\n{ran.stdout}{ran.stderr}")
    return server_cache()


def new_cluster_id() -> str:
    """A KRaft cluster id: a random UUID in Kafka's URL-safe base64 without padding, drawn again
    when it starts with "-" (as Kafka's `Uuid.randomUuid` does: it would read as an option)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def node_settings(
    node_id: int,
    host: str,
    port: int,
    controller_port: int,
    voters: str,
    data_dir: Path,
    defaults: Mapping[str, str],
    config: Mapping[str, str],
) -> dict[str, str]:
    """server.properties of one combined node."""
    return {
        **defaults,
        "process.roles": "broker,controller",
        "node.id": str(node_id),
        "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{host}:{port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.quorum.voters": voters,
        "log.dirs": str(data_dir),
        **config,
    }


def java_argv(
    classpath: Path, heap: str, log_level: str, main: Sequence[str], jvm_flags: Sequence[str]
) -> list[str]:
    return [
        "java",
        f"-Xmx{heap}",
        f"-Xms{heap}",
        *jvm_flags,
        f"-Dorg.slf4j.simpleLogger.defaultLogLevel={log_level}",
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-cp",
        f"{classpath}/*",
        *main,
    ]


def prepare(
    root: Path,
    *,
    nodes: int = 1,
    host: str = "127.0.0.1",
    first_node_id: int = 1,
    ports: Sequence[int] | None = None,
    config: Mapping[str, str] | None = None,
    heap: str = DEFAULT_HEAP,
    log_level: str = "info",
    jvm_flags: Sequence[str] = JVM_FLAGS,
) -> KafkaCluster:
    """Write each node's server.properties and format its storage; nothing left running."""
    if nodes < 1:
        raise LaunchError("a Kafka cluster needs at least one node")
    classpath = fetch_server()
    ports = list(ports) if ports is not None else [free_port(host) for _ in range(nodes)]
    if len(ports) != nodes:
        raise LaunchError(f"{nodes} nodes need {nodes} ports, got {ports}")
    controller_ports = [free_port(host) for _ in range(nodes)]
    ids = [first_node_id + i for i in range(nodes)]
    voters = ",".join(f"{i}@{host}:{c}" for i, c in zip(ids, controller_ports, strict=True))
    defaults = SINGLE_NODE_DEFAULTS if nodes == 1 else CLUSTER_DEFAULTS
    cluster = KafkaCluster(root=root, nodes=[], cluster_id=new_cluster_id())
    for node_id, port, controller_port in zip(ids, ports, controller_ports, strict=True):
        node_root = root / f"node-{node_id}"
        node_root.mkdir(parents=True, exist_ok=True)
        settings = node_settings(
            node_id, host, port, controller_port, voters, node_root / "data", defaults, config or {}
        )
        (node_root / "server.properties").write_text(
            f"# written by infra.reference_kafka for node {node_id}\n" + format_properties(settings)
        )
        main = ["kafka.Kafka", str(node_root / "server.properties")]
        argv = java_argv(classpath, heap, log_level, main, jvm_flags)
        cluster.nodes.append(KafkaNode(node_id, host, port, controller_port, node_root, argv))
    format_storage(classpath, cluster)
    return cluster


def format_storage(classpath: Path, cluster: KafkaCluster) -> None:
    """`kafka-storage.sh format -t ID -c server.properties` for every node, in parallel."""
    running = []
    for node in cluster.nodes:
        argv = [
            "java",
            *FORMAT_JVM_FLAGS,
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            f"{classpath}/*",
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster.cluster_id,
            "-c",
            str(node.config_path),
        ]
        running.append(
            subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        )
    failures = []
    for node, formatting in zip(cluster.nodes, running, strict=True):
        out, _ = formatting.communicate(timeout=120)
        if formatting.returncode != 0:
            failures.append(f"node {node.node_id}: {out.strip()}")
    if failures:
        raise LaunchError("kafka.tools.StorageTool format failed:\n" + "\n".join(failures))


def start_kafka(
    root: Path,
    *,
    nodes: int = 1,
    host: str = "127.0.0.1",
    first_node_id: int = 1,
    ports: Sequence[int] | None = None,
    config: Mapping[str, str] | None = None,
    heap: str = DEFAULT_HEAP,
    log_level: str = "info",
    jvm_flags: Sequence[str] = JVM_FLAGS,
    wait: float = 120.0,
) -> KafkaCluster:
    """Format and start a reference cluster under `root`; return it once every node is a broker."""
    cluster = prepare(
        root,
        nodes=nodes,
        host=host,
        first_node_id=first_node_id,
        ports=ports,
        config=config,
        heap=heap,
        log_level=log_level,
        jvm_flags=jvm_flags,
    )
    cluster.start(wait)
    return cluster


def wait_brokers(bootstrap: str, count: int, timeout: float) -> None:
    """Poll Metadata until `count` brokers are listed (each node registered and unfenced)."""
    from confluent_kafka.admin import AdminClient  # the launcher's only client dependency

    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    seen = 0
    while time.monotonic() < deadline:
        try:
            seen = len(admin.list_topics(timeout=2).brokers)
        except Exception:  # KafkaException while the cluster comes up: retried
            seen = 0
        if seen >= count:
            return
        time.sleep(0.1)
    raise NotReadyError(f"Kafka at {bootstrap}: {seen} of {count} brokers after {timeout:g}s")


# --- the detached command line: infra/reference/kafka up|down ----------------------------------


def up(args: argparse.Namespace) -> int:
    root = Path(args.dir).resolve()
    state = root / STATE_FILE
    if state.exists() and any(_alive(pid, root) for pid in _recorded_pids(state)):
        raise LaunchError(f"Kafka already runs from {root} (see {state}); `down --dir` first")
    config = dict(pair.split("=", 1) for pair in args.config)
    ports = [args.port + i for i in range(args.nodes)] if args.port else None
    cluster = prepare(
        root,
        nodes=args.nodes,
        host=args.host,
        first_node_id=args.node_id,
        ports=ports,
        config=config,
        heap=args.heap,
        log_level=args.log_level,
    )
    for node in cluster.nodes:  # detached: outlive this command, no death signal
        log = node.log_path.open("ab")
        node.process = subprocess.Popen(
            node.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        log.close()
    state.write_text(
        json.dumps(
            {
                "bootstrap": cluster.bootstrap,
                "cluster_id": cluster.cluster_id,
                "nodes": [
                    {"node_id": n.node_id, "pid": n.pid, "port": n.port, "log": str(n.log_path)}
                    for n in cluster.nodes
                ],
            },
            indent=2,
        )
    )
    try:
        cluster.wait_ready(args.wait)
    except BaseException:
        _stop_pids(_recorded_pids(state), root, timeout=10)
        raise
    print(cluster.bootstrap)
    return 0


def down(args: argparse.Namespace) -> int:
    root = Path(args.dir).resolve()
    state = root / STATE_FILE
    if not state.exists():
        print(f"infra/reference/kafka: nothing recorded in {state}", file=sys.stderr)
        return 0
    _stop_pids(_recorded_pids(state), root, timeout=args.timeout)
    state.unlink()
    return 0


def _recorded_pids(state: Path) -> list[int]:
    return [int(node["pid"]) for node in json.loads(state.read_text())["nodes"]]


def _alive(pid: int, root: Path) -> bool:
    """True when `pid` runs and is a Kafka node of `root` (not a reused PID)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return False
    return proc.pid_running(pid) and str(root) in cmdline and "kafka.Kafka" in cmdline


def _stop_pids(pids: Sequence[int], root: Path, timeout: float) -> None:
    """SIGTERM every node at once (as `KafkaCluster.close`), wait; SIGKILL what outlives `timeout`."""
    running = [pid for pid in pids if _alive(pid, root)]
    for pid in running:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(_alive(pid, root) for pid in running) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in running:
        if _alive(pid, root):
            os.kill(pid, signal.SIGKILL)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="infra/reference/kafka", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    start = commands.add_parser("up", help="format and start Kafka in the background")
    start.add_argument("--nodes", type=int, choices=(1, 3), default=1)
    start.add_argument("--dir", required=True, help="data, logs, PIDs (cluster.json)")
    start.add_argument("--host", default="127.0.0.1")
    start.add_argument("--port", type=int, default=0, help="first node's port (0: free ports)")
    start.add_argument("--node-id", type=int, default=1, help="first node's id (%(default)s)")
    start.add_argument("--heap", default=DEFAULT_HEAP, help="JVM -Xmx/-Xms (%(default)s)")
    start.add_argument("--log-level", default="info")
    start.add_argument("--wait", type=float, default=120.0)
    start.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    stop = commands.add_parser("down", help="stop what `up --dir DIR` started")
    stop.add_argument("--dir", required=True)
    stop.add_argument("--timeout", type=float, default=60.0)
    args = parser.parse_args(argv)
    try:
        return up(args) if args.command == "up" else down(args)
    except LaunchError as exc:
        print(f"infra/reference/kafka: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
