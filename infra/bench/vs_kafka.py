"""Pier against Apache Kafka 4.1.1 on this machine: the same workloads, one run, ratios as headline.

Owns the side-by-side benchmark (issue 16). Each repetition starts each system afresh (a new data
dir, a new process), alternating which goes first, and runs on it:
- Kafka's own `ProducerPerformance` then `ConsumerPerformance` (the JVM tools of kafka-tools 4.1.1,
  through `infra/reference/kafka tool`) for 100 B and 1 KiB records x acks=1 and all x lz4 and zstd,
  one one-partition topic per workload, after an unmeasured warm-up produce;
- confluent-kafka produce and consume (`infra.bench.throughput`);
- end-to-end latency at a fixed rate (`infra.bench.latency`): p50, p99, p99.9;
- the server side's CPU seconds per GB moved (utime+stime of every server process and its
  children from /proc/<pid>/stat, before and after each tool run) and its peak RSS (VmHWM summed);
- then a 3-node cluster (Pier: ZooKeeper and 3 brokers via `infra.stack.Stack` with `infra/up`'s
  cluster defaults; Kafka: 3 combined KRaft nodes via `infra.reference_kafka`) with an RF 3 topic
  and `ProducerPerformance` at acks=all: throughput and CPU per GB of all server processes;
- then 5,000 partitions (10 topics x 500, RF 1) created on one node: time until every partition
  has a leader, and time for a restart until the server answers with all of them led again.
Pier is started with infra's own launchers, Kafka with `infra.reference_kafka` (heap -Xmx1g, as
shipped). Results: medians over the repetitions, ratios Pier/Kafka (for throughput above 1 is
better, for latency, CPU, memory and times below 1 is), all runs in the JSON (stdout and
`--out`, default `infra/bench/results/vs_kafka.json`), a chart of the ratios (`vs_kafka.png`) and
the Markdown table of docs/benchmarks.md on stderr. `--short` runs every part tiny, once, to prove
it works (CI).
Blocking, single-threaded apart from the latency run's consumer thread; progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import confluent_kafka
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from infra import reference_kafka
from infra.bench.latency import latency_samples, percentile
from infra.bench.throughput import consume_run, produce_run
from infra.bench.vs_kafka_workloads import (
    CHURN_ELSEWHERE,
    FLEET_ROWS,
    FULL_WORKLOADS,
    SHORT_WORKLOADS,
    WorkloadSizes,
    dig,
)
from infra.bench.vs_kafka_workloads import churn as churn_workload
from infra.bench.vs_kafka_workloads import connections as connections_workload
from infra.bench.vs_kafka_workloads import omb as omb_workload
from infra.bench.vs_kafka_workloads import wide as wide_workload
from infra.broker import PIER_PROGRAM
from infra.stack import BrokerProcess, Stack, start_broker
from infra.up_cluster import CLUSTER_DEFAULTS

SYSTEMS = ("pier", "kafka")
RESULTS = Path(__file__).resolve().parent / "results"
REFERENCE = reference_kafka.SCRIPT
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
# The producer settings of every ProducerPerformance run (both systems alike).
PERF_PRODUCER_PROPS = ("linger.ms=5", "batch.size=262144", "buffer.memory=67108864")
TICKS = os.sysconf("SC_CLK_TCK")
LATENCY_RATE_MB_S = 5.0
PIER_CLUSTER_CONFIG = {k: v for k, v in CLUSTER_DEFAULTS.items()}


@dataclass(frozen=True)
class Sizes:
    """How much each part moves; `--short` shrinks everything."""

    repetitions: int
    records: dict[int, int]  # record bytes -> records per perf-tool run
    perf_workloads: tuple[tuple[int, str, str], ...]  # (record bytes, acks, codec)
    client_records: int  # confluent-kafka produce/consume, 1 KiB
    latency_seconds: float
    cluster_records: int  # 1 KiB, acks=all, RF 3
    partitions: tuple[int, int]  # (topics, partitions each)
    codecs: tuple[str, ...] = ("lz4", "zstd")  # of the client and cluster runs
    warm_up: bool = True
    # Partition scale on its own fresh server (False: on the single-node server once its workloads
    # are done, saving two server starts in the short run).
    scale_apart: bool = True
    workloads: WorkloadSizes = FULL_WORKLOADS  # the hosted-fleet rows (vs_kafka_workloads)


FULL = Sizes(
    repetitions=3,
    records={100: 1_000_000, 1024: 200_000},
    perf_workloads=tuple(
        (size, acks, codec)
        for size in (100, 1024)
        for acks in ("1", "all")
        for codec in ("lz4", "zstd", "none")
    ),
    client_records=200_000,
    latency_seconds=20.0,
    cluster_records=200_000,
    partitions=(10, 500),
    codecs=("none", "lz4", "zstd"),  # uncompressed too, as the perf-tool matrix (issue 25)
)
# The hosted-fleet rows in full, with the perf-tool matrix cut to its uncompressed rows and
# smaller runs: what fits in a session's last half hour on a shared machine.
FLEET = Sizes(
    repetitions=1,
    records={100: 300_000, 1024: 60_000},
    perf_workloads=tuple((size, acks, "none") for size in (100, 1024) for acks in ("1", "all")),
    client_records=100_000,
    latency_seconds=10.0,
    cluster_records=60_000,
    partitions=(10, 500),
    codecs=("lz4",),
)
SHORT = Sizes(
    repetitions=1,
    records={100: 2_000, 1024: 1_000},
    perf_workloads=((1024, "all", "zstd"), (1024, "1", "none")),
    client_records=1_000,
    latency_seconds=2.0,
    cluster_records=1_000,
    partitions=(2, 10),
    codecs=("lz4",),
    warm_up=False,
    scale_apart=False,
    workloads=SHORT_WORKLOADS,
)


class Server(Protocol):
    """What the benchmark needs of a running system."""

    @property
    def bootstrap(self) -> str: ...

    def pids(self) -> list[int]: ...

    def restart(self) -> None: ...

    def close(self) -> None: ...


@dataclass
class PierSingle:
    broker: BrokerProcess

    @property
    def bootstrap(self) -> str:
        return self.broker.bootstrap

    def pids(self) -> list[int]:
        return [self.broker.pid]

    def restart(self) -> None:
        self.broker.restart(timeout=600)

    def close(self) -> None:
        self.broker.stop()


@dataclass
class PierCluster:
    stack: Stack

    @property
    def bootstrap(self) -> str:
        return self.stack.bootstrap

    def pids(self) -> list[int]:
        zookeeper = [self.stack.zookeeper.process.pid] if self.stack.zookeeper else []
        return zookeeper + [b.pid for b in self.stack.brokers]

    def restart(self) -> None:
        for broker in self.stack.brokers:
            broker.restart(timeout=600)

    def close(self) -> None:
        self.stack.close()


@dataclass
class Kafka:
    cluster: reference_kafka.KafkaCluster

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap

    def pids(self) -> list[int]:
        return self.cluster.pids

    def restart(self) -> None:
        self.cluster.restart(wait=600)

    def close(self) -> None:
        self.cluster.close()


def start(system: str, root: Path, nodes: int, program: Sequence[str] = PIER_PROGRAM) -> Server:
    """A fresh server; `program`: the Pier broker command (another checkout's, for a before)."""
    if system == "kafka":
        return Kafka(reference_kafka.start_kafka(root, nodes=nodes))
    if nodes == 1:
        return PierSingle(start_broker(root / "data", wait=120, program=program))
    stack = Stack(
        root,
        zookeeper=True,
        brokers=nodes,
        broker_config=PIER_CLUSTER_CONFIG,
        wait=120,
        broker_program=program,
    )
    cluster = PierCluster(stack.__enter__())
    try:  # every broker registered, as Kafka's launcher waits for every node
        reference_kafka.wait_brokers(cluster.bootstrap, nodes, 120)
    except BaseException:
        cluster.close()
        raise
    return cluster


@contextmanager
def running(
    system: str, nodes: int, scratch: Path, program: Sequence[str] = PIER_PROGRAM
) -> Iterator[Server]:
    """A fresh server in a fresh directory, stopped and its data removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix=f"{system}-{nodes}-", dir=scratch))
    server = start(system, root, nodes, program)
    try:
        yield server
    finally:
        server.close()
        shutil.rmtree(root, ignore_errors=True)


# --- measuring the server side -------------------------------------------------------------------


def process_tree(pids: Sequence[int]) -> list[int]:
    """`pids` and every live descendant (Pier may run worker processes)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(int(entry.name))
    found: list[int] = []
    todo = list(pids)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def cpu_seconds(pids: Sequence[int]) -> float:
    """CPU time of the processes and their descendants, and of their reaped children. A live
    process's own time is the larger of its threads' `/proc/PID/task/TID/schedstat` (nanoseconds
    on a CPU) and `stat`'s utime+stime, which count whole clock ticks (10 ms): a short run's
    sendfile-served consume costs less than one tick and would read as no CPU at all, while
    threads that have exited are only in `stat`."""
    total = 0.0
    for pid in process_tree(pids):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # after the name: state(0) ppid ... utime(11) stime(12) cutime(13) cstime(14)
        ticks = sum(int(fields[i]) for i in (11, 12)) / TICKS
        reaped = sum(int(fields[i]) for i in (13, 14)) / TICKS
        total += max(ticks, _threads_on_cpu_s(pid)) + reaped
    return total


def _threads_on_cpu_s(pid: int) -> float:
    total_ns = 0
    for task in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        try:
            total_ns += int(task.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that has just exited
    return total_ns / 1e9


def peak_rss_mib(pids: Sequence[int]) -> float:
    """Sum of VmHWM (peak resident set) over the processes and their descendants."""
    total_kib = 0
    for pid in process_tree(pids):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        match = re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)
        total_kib += int(match.group(1)) if match else 0
    return round(total_kib / 1024, 1)


@dataclass
class Run:
    """One measured tool run: what moved, how fast, what the server side spent."""

    system: str
    part: str  # e.g. "perf-produce", "perf-consume", "client-produce", "cluster-produce"
    workload: str
    records: int
    record_bytes: int
    seconds: float
    mb_per_s: float
    server_cpu_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def cpu_s_per_gb(self) -> float:
        gb = self.records * self.record_bytes / 1e9
        return self.server_cpu_s / gb if gb else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "part": self.part,
            "workload": self.workload,
            "records": self.records,
            "record_bytes": self.record_bytes,
            "seconds": round(self.seconds, 3),
            "mb_per_s": round(self.mb_per_s, 2),
            "server_cpu_s": round(self.server_cpu_s, 2),
            "cpu_s_per_gb": round(self.cpu_s_per_gb, 2),
            **self.extra,
        }


def measured(
    server: Server, action: Callable[[], tuple[float, dict[str, Any]]]
) -> tuple[float, float, dict[str, Any]]:
    """Run `action` (returns its own MB/s and extras); add the server CPU it cost and wall time."""
    before = cpu_seconds(server.pids())
    start = time.perf_counter()
    mb_per_s, extra = action()
    seconds = time.perf_counter() - start
    cpu = max(0.0, cpu_seconds(server.pids()) - before)  # the two clocks may disagree by a tick
    return mb_per_s, cpu, {"wall_s": round(seconds, 2), **extra}


# --- the tools -----------------------------------------------------------------------------------


def tool(tool_class: str, *args: str, timeout: float = 900) -> str:
    ran = subprocess.run(
        [str(REFERENCE), "tool", tool_class, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if ran.returncode != 0:
        raise RuntimeError(f"{tool_class} {' '.join(args)} failed:\n{ran.stdout}\n{ran.stderr}")
    return ran.stdout


_PRODUCED = re.compile(
    r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency,"
    r" ([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99.9th"
)


def producer_perf(
    bootstrap: str, topic: str, records: int, size: int, acks: str, codec: str
) -> tuple[float, dict[str, Any]]:
    out = tool(
        PRODUCER_PERF,
        "--topic", topic, "--num-records", str(records), "--record-size", str(size),
        "--throughput", "-1", "--producer-props", f"bootstrap.servers={bootstrap}",
        f"acks={acks}", f"compression.type={codec}", *PERF_PRODUCER_PROPS,
    )  # fmt: skip
    matches = _PRODUCED.findall(out)
    if not matches:
        raise RuntimeError(f"ProducerPerformance printed no summary:\n{out}")
    sent, per_s, mb_s, avg, _peak, _p50, _p95, p99, p999 = matches[-1]
    if int(sent) != records:
        raise RuntimeError(f"ProducerPerformance sent {sent} of {records}:\n{out}")
    return float(mb_s) * 1.048576, {
        "records_per_s": float(per_s),
        "latency_avg_ms": float(avg),
        "latency_p99_ms": int(p99),
        "latency_p999_ms": int(p999),
    }


def consumer_perf(bootstrap: str, topic: str, records: int) -> tuple[float, dict[str, Any]]:
    out = tool(
        CONSUMER_PERF,
        "--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(records),
        "--timeout", "120000", "--group", f"perf-{uuid.uuid4().hex[:8]}",
    )  # fmt: skip
    lines = [line for line in out.splitlines() if line.strip()]
    header = [h.strip() for h in lines[-2].split(",")]
    values = dict(zip(header, (v.strip() for v in lines[-1].split(",")), strict=True))
    if int(values["data.consumed.in.nMsg"]) < records:
        raise RuntimeError(f"ConsumerPerformance read too few records:\n{out}")
    return float(values["fetch.MB.sec"]) * 1.048576, {
        "records_per_s": float(values["fetch.nMsg.sec"]),
        "rebalance_ms": int(values["rebalance.time.ms"]),
    }


def create_topics(
    bootstrap: str, names: Sequence[str], partitions: int = 1, replicas: int = 1
) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [NewTopic(n, num_partitions=partitions, replication_factor=replicas) for n in names],
        operation_timeout=120,
        request_timeout=300,
    )
    for future in futures.values():
        future.result(timeout=600)
    wait_led(bootstrap, set(names), len(names) * partitions, timeout=600)


def wait_led(bootstrap: str, topics: set[str], count: int, timeout: float) -> None:
    """Poll metadata until `count` partitions of `topics` have a leader (a bench, not a test: the
    polling is the measurement of when the server is done)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    led = 0
    while time.monotonic() < deadline:
        try:
            metadata = admin.list_topics(timeout=10)
        except confluent_kafka.KafkaException:
            time.sleep(0.05)
            continue
        led = sum(
            1
            for name in topics
            if name in metadata.topics and metadata.topics[name].error is None
            for p in metadata.topics[name].partitions.values()
            if p.leader >= 0 and p.error is None
        )
        if led >= count:
            return
        time.sleep(0.05)
    raise RuntimeError(f"{led} of {count} partitions led after {timeout:g}s at {bootstrap}")


_STARTED = time.monotonic()


def log(message: str) -> None:
    print(f"vs_kafka [{time.monotonic() - _STARTED:6.1f}s]: {message}", file=sys.stderr, flush=True)


# --- the parts -----------------------------------------------------------------------------------


def single_node(
    system: str, sizes: Sizes, scratch: Path, scale: bool, fleet: bool = True
) -> tuple[list[Run], dict[str, Any]]:
    """The single-node workloads on a fresh server, the hosted-fleet ones on it if `fleet`; then
    the partition scale on it if `scale`."""
    runs: list[Run] = []
    with running(system, 1, scratch) as server:
        b = server.bootstrap
        if sizes.warm_up:
            create_topics(b, ["warm-up"])
            producer_perf(b, "warm-up", sizes.records[100] // 4, 100, "1", "lz4")
        for size, acks, codec in sizes.perf_workloads:
            workload = f"{size}B/acks={acks}/{codec}"
            topic = f"perf-{size}-{acks}-{codec}"
            records = sizes.records[size]
            create_topics(b, [topic])
            log(f"{system}: ProducerPerformance {workload}")
            mb_s, cpu, extra = measured(
                server, partial(producer_perf, b, topic, records, size, acks, codec)
            )
            runs.append(Run(system, "perf-produce", workload, records, size, 0, mb_s, cpu, extra))
            log(f"{system}: ConsumerPerformance {workload}")
            mb_s, cpu, extra = measured(server, partial(consumer_perf, b, topic, records))
            runs.append(Run(system, "perf-consume", workload, records, size, 0, mb_s, cpu, extra))
        runs.extend(client_runs(system, server, sizes))
        latency = latency_part(system, server, sizes)
        extra = {"latency": latency, "peak_rss_mib": peak_rss_mib(server.pids())}
        if fleet:
            second = partial(running, system, 1, scratch)
            extra["fleet"] = fleet_part(system, server, sizes.workloads, second)
        if scale:
            extra["scale"] = partition_scale(system, server, sizes)
    return runs, extra


def client_runs(system: str, server: Server, sizes: Sizes) -> list[Run]:
    runs = []
    b = server.bootstrap
    for codec in sizes.codecs:
        topic = f"client-{codec}"
        create_topics(b, [topic])
        log(f"{system}: confluent-kafka produce/consume 1 KiB {codec}")

        def produce(topic: str = topic, codec: str = codec) -> tuple[float, dict[str, Any]]:
            conn = {"bootstrap.servers": b}
            run = produce_run(system, conn, topic, sizes.client_records, 1024, codec)
            return run.mb_per_s, {"records_per_s": round(run.records_per_s)}

        def consume(topic: str = topic, codec: str = codec) -> tuple[float, dict[str, Any]]:
            run = consume_run(b, topic, sizes.client_records, 1024, codec)
            return run.mb_per_s, {"records_per_s": round(run.records_per_s)}

        for part, action in (("client-produce", produce), ("client-consume", consume)):
            mb_s, cpu, extra = measured(server, action)
            runs.append(
                Run(
                    system,
                    part,
                    f"1024B/acks=1/{codec}",
                    sizes.client_records,
                    1024,
                    0,
                    mb_s,
                    cpu,
                    extra,
                )
            )
    return runs


def latency_part(system: str, server: Server, sizes: Sizes) -> dict[str, float]:
    create_topics(server.bootstrap, ["latency"])
    log(f"{system}: end-to-end latency at {LATENCY_RATE_MB_S} MB/s for {sizes.latency_seconds}s")
    counted = latency_samples(
        {"bootstrap.servers": server.bootstrap}, "latency", LATENCY_RATE_MB_S, sizes.latency_seconds
    )
    return {
        "records": len(counted),
        "p50_ms": round(statistics.median(counted), 2),
        "p99_ms": round(percentile(counted, 0.99), 2),
        "p999_ms": round(percentile(counted, 0.999), 2),
    }


def fleet_part(
    system: str,
    server: Server,
    sizes: WorkloadSizes,
    second: Callable[[], AbstractContextManager[Server]] | None = None,
) -> dict[str, Any]:
    """OMB's shape, many connections, topic churn: each with the server CPU it cost and the
    load average beside it (the clients share the machine). `second` starts another server of
    the system: the churn then runs once more against it, the bystander on `server` alone
    (`churn_elsewhere`: what the churn costs the bystander through the machine only)."""
    found: dict[str, Any] = {}
    for name, workload in (
        ("omb", omb_workload),
        ("connections", connections_workload),
        ("churn", churn_workload),
    ):
        log(f"{system}: {name} workload")
        before = cpu_seconds(server.pids())
        result = workload(server.bootstrap, sizes, create_topics)
        result["server_cpu_s"] = round(max(0.0, cpu_seconds(server.pids()) - before), 2)
        result["loadavg_1m"] = round(os.getloadavg()[0], 2)
        found[name] = result
    if second is not None:
        log(f"{system}: churn on a second server, the bystander on the first")
        with second() as other:
            found[CHURN_ELSEWHERE] = churn_workload(
                other.bootstrap, sizes, create_topics, bystander_at=server.bootstrap
            )
    moved_gb = sum(found["omb"][phase]["produced"] for phase in ("max", "half")) * 1024 / 1e9
    found["omb"]["server_cpu_s_per_gb"] = round(found["omb"]["server_cpu_s"] / moved_gb, 2)
    conns = found["connections"]
    conns["server_cpu_s_per_gb"] = round(conns["server_cpu_s"] / (conns["records"] * 1024 / 1e9), 2)
    return found


def cluster_part(
    system: str, sizes: Sizes, scratch: Path, program: Sequence[str] = PIER_PROGRAM
) -> tuple[list[Run], dict[str, Any]]:
    """3 nodes: the RF 3 acks=all produce, the peak RSS, then the wide partitions (time until
    led, the peak RSS with them and each server process's own peak)."""
    runs = []
    with running(system, 3, scratch, program) as server:
        b = server.bootstrap
        if sizes.warm_up:
            create_topics(b, ["warm-up"], partitions=3, replicas=3)
            producer_perf(b, "warm-up", sizes.cluster_records // 4, 1024, "all", "lz4")
        for codec in sizes.codecs:
            topic = f"rf3-{codec}"
            create_topics(b, [topic], partitions=3, replicas=3)
            log(f"{system}: 3 nodes, RF 3, acks=all, 1 KiB {codec}")
            mb_s, cpu, extra = measured(
                server,
                partial(producer_perf, b, topic, sizes.cluster_records, 1024, "all", codec),
            )
            runs.append(
                Run(system, "cluster-produce", f"1024B/acks=all/{codec}/rf3",
                    sizes.cluster_records, 1024, 0, mb_s, cpu, extra)
            )  # fmt: skip
        rss = peak_rss_mib(server.pids())
        log(f"{system}: 3 nodes, {sizes.workloads.wide[0] * sizes.workloads.wide[1]} partitions")
        wide = wide_workload(b, sizes.workloads, create_topics)
        wide["peak_rss_mib"] = peak_rss_mib(server.pids())  # with the wide partitions too
        wide["peak_rss_mib_each"] = [peak_rss_mib([pid]) for pid in server.pids()]
    return runs, {"peak_rss_mib": rss, "wide": wide}


def partitions_part(system: str, sizes: Sizes, scratch: Path) -> dict[str, float]:
    with running(system, 1, scratch) as server:
        return partition_scale(system, server, sizes)


def partition_scale(system: str, server: Server, sizes: Sizes) -> dict[str, float]:
    """Create the partitions, restart; time both until every partition has a leader."""
    topics, each = sizes.partitions
    names = [f"many-{i}" for i in range(topics)]
    log(f"{system}: creating {topics * each} partitions")
    start = time.perf_counter()
    create_topics(server.bootstrap, names, partitions=each)
    created = time.perf_counter() - start
    log(f"{system}: restarting with {topics * each} partitions")
    start = time.perf_counter()
    server.restart()
    wait_led(server.bootstrap, set(names), topics * each, timeout=900)
    restarted = time.perf_counter() - start
    return {
        "partitions": topics * each,
        "create_s": round(created, 2),
        "restart_s": round(restarted, 2),
        "peak_rss_mib_after_restart": peak_rss_mib(server.pids()),
    }


# --- the summary ---------------------------------------------------------------------------------


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values)) if values else float("nan")


def summarise(runs: Sequence[Run], singles: dict[str, list[dict[str, Any]]],
              clusters: dict[str, list[dict[str, Any]]],
              scale: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, Any]]:  # fmt: skip
    """Per metric: the median of each system and the ratio Pier/Kafka, with which way is better."""
    rows: dict[str, dict[str, Any]] = {}

    def row(name: str, pier: float, kafka: float, better: str) -> None:
        rows[name] = {
            "pier": round(pier, 3),
            "kafka": round(kafka, 3),
            "ratio": round(pier / kafka, 3) if kafka else None,
            "better": better,
        }

    keys = sorted({(r.part, r.workload) for r in runs})
    for part, workload in keys:
        per = {
            s: [r for r in runs if (r.system, r.part, r.workload) == (s, part, workload)]
            for s in SYSTEMS
        }
        row(f"{part} {workload} MB/s", median([r.mb_per_s for r in per["pier"]]),
            median([r.mb_per_s for r in per["kafka"]]), "higher")  # fmt: skip
    for part in sorted({r.part for r in runs}):
        cpu = {
            s: [r.cpu_s_per_gb for r in runs if (r.system, r.part) == (s, part)] for s in SYSTEMS
        }
        row(f"{part} server CPU s/GB", median(cpu["pier"]), median(cpu["kafka"]), "lower")
    for quantile in ("p50_ms", "p99_ms", "p999_ms"):
        row(f"e2e latency {quantile[:-3]} ms",
            median([s["latency"][quantile] for s in singles["pier"]]),
            median([s["latency"][quantile] for s in singles["kafka"]]), "lower")  # fmt: skip
    row("single node peak RSS MiB", median([s["peak_rss_mib"] for s in singles["pier"]]),
        median([s["peak_rss_mib"] for s in singles["kafka"]]), "lower")  # fmt: skip
    row("3 nodes peak RSS MiB", median([c["peak_rss_mib"] for c in clusters["pier"]]),
        median([c["peak_rss_mib"] for c in clusters["kafka"]]), "lower")  # fmt: skip
    for key in ("create_s", "restart_s"):
        row(f"{scale['pier'][0]['partitions']} partitions {key[:-2]} s",
            median([s[key] for s in scale["pier"]]), median([s[key] for s in scale["kafka"]]), "lower")  # fmt: skip
    fleet = {s: [x["fleet"] for x in singles[s] if "fleet" in x] for s in SYSTEMS}
    if all(fleet.values()):
        for name, path, better in FLEET_ROWS:
            row(name, median([dig(f, path) for f in fleet["pier"]]),
                median([dig(f, path) for f in fleet["kafka"]]), better)  # fmt: skip
    wide = {s: [c["wide"] for c in clusters[s] if "wide" in c] for s in SYSTEMS}
    if all(wide.values()):
        row(f"3 nodes: {wide['pier'][0]['partitions']} partitions create s",
            median([w["create_s"] for w in wide["pier"]]),
            median([w["create_s"] for w in wide["kafka"]]), "lower")  # fmt: skip
        row(f"3 nodes peak RSS MiB with {wide['pier'][0]['partitions']} partitions",
            median([w["peak_rss_mib"] for w in wide["pier"]]),
            median([w["peak_rss_mib"] for w in wide["kafka"]]), "lower")  # fmt: skip
    return rows


def target(name: str, better: str) -> tuple[str, Callable[[float, float], bool]] | None:
    """Issue 25's target for a summary row: its text and a test of (Pier/Kafka, Pier's value);
    None for a row without one."""
    if name == "churn: bystander p99 during / idle":  # on Pier's own value, not the ratio
        return "≤ 2 (Pier's)", lambda _ratio, pier: pier <= 2.0
    if "RSS" in name:
        return "≤ 0.2", lambda ratio, _pier: ratio <= 0.2
    if "CPU s/GB" in name:
        return "≤ 0.5", lambda ratio, _pier: ratio <= 0.5
    if name.startswith("OMB at 50% rate") and ("p99 " in name or "p99.9 " in name):
        return "≤ 0.8", lambda ratio, _pier: ratio <= 0.8
    if name.endswith("partitions create s"):
        return "≤ 1.0", lambda ratio, _pier: ratio <= 1.0
    if better == "higher":
        return "≥ 1.1", lambda ratio, _pier: ratio >= 1.1
    return None


def markdown(summary: dict[str, dict[str, Any]]) -> str:
    """The table of docs/benchmarks.md: each row's medians, the ratio and its target (✓ met)."""
    lines = [
        "| measure | Pier | Kafka | Pier/Kafka | better | target |",
        "|---|---:|---:|---:|---|---|",
    ]
    for name, r in summary.items():
        goal = target(name, r["better"])
        mark = ""
        if goal is not None and r["ratio"] is not None:
            mark = f"{goal[0]} {'✓' if goal[1](r['ratio'], r['pier']) else '✗'}"
        lines.append(
            f"| {name} | {r['pier']:g} | {r['kafka']:g} | {r['ratio']} | {r['better']} | {mark} |"
        )
    return "\n".join(lines)


def chart(summary: dict[str, dict[str, Any]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n, r in summary.items() if r["ratio"]]
    ratios = [summary[n]["ratio"] for n in names]
    good = [
        (r >= 1.0) if summary[n]["better"] == "higher" else (r <= 1.0)
        for n, r in zip(names, ratios, strict=True)
    ]
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(names) + 1.5))
    ax.barh(names, ratios, color=["tab:green" if g else "tab:red" for g in good])
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel("Pier / Kafka (green: Pier better; throughput: higher, the rest: lower)")
    ax.set_title(title, fontsize=9)
    ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _client_version() -> str:
    version: Any = confluent_kafka.version()  # a (text, number) pair, a bare text in some builds
    return str(version[0] if isinstance(version, tuple) else version)


def environment() -> dict[str, Any]:
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    model = ""
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        found = re.search(r"^model name\s*:\s*(.+)$", cpuinfo.read_text(), re.MULTILINE)
        model = found.group(1) if found else ""
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "java": (java.stderr.splitlines() or [""])[0],
        "kafka": reference_kafka.VERSION,
        "confluent_kafka": _client_version(),
        "librdkafka": confluent_kafka.libversion()[0],
    }


def run(sizes: Sizes, scratch: Path, parts: set[str]) -> dict[str, Any]:
    runs: list[Run] = []
    singles: dict[str, list[dict[str, Any]]] = {s: [] for s in SYSTEMS}
    clusters: dict[str, list[dict[str, Any]]] = {s: [] for s in SYSTEMS}
    scale: dict[str, list[dict[str, float]]] = {s: [] for s in SYSTEMS}
    for rep in range(sizes.repetitions):
        order = SYSTEMS if rep % 2 == 0 else SYSTEMS[::-1]
        scale_here = "partitions" in parts and rep == 0 and not sizes.scale_apart
        for system in order:
            log(f"repetition {rep + 1}/{sizes.repetitions}: {system}, one node")
            part_runs, extra = single_node(
                system, sizes, scratch, scale_here, fleet="fleet" in parts
            )
            runs += part_runs
            if "scale" in extra:
                scale[system].append(extra.pop("scale"))
            singles[system].append(extra)
        if "cluster" in parts:
            for system in order:
                log(f"repetition {rep + 1}/{sizes.repetitions}: {system}, three nodes")
                part_runs, extra = cluster_part(system, sizes, scratch)
                runs += part_runs
                clusters[system].append(extra)
        if "partitions" in parts and rep == 0 and sizes.scale_apart:  # minutes each: once
            for system in order:
                scale[system].append(partitions_part(system, sizes, scratch))
    summary = (
        summarise(runs, singles, clusters, scale) if clusters["pier"] and scale["pier"] else {}
    )
    if not summary:  # a selection without the cluster or partitions parts
        summary = summarise_partial(runs, singles)
    return {
        "benchmark": "vs_kafka",
        "sizes": {"repetitions": sizes.repetitions, "records": sizes.records},
        "environment": environment(),
        "summary": summary,
        "singles": singles,
        "clusters": clusters,
        "partition_scale": scale,
        "runs": [r.as_json() for r in runs],
    }


def summarise_partial(
    runs: Sequence[Run], singles: dict[str, list[dict[str, Any]]]
) -> dict[str, dict[str, Any]]:
    empty_cluster = {s: [{"peak_rss_mib": float("nan")}] for s in SYSTEMS}
    empty_scale = {
        s: [{"partitions": 0, "create_s": float("nan"), "restart_s": float("nan")}] for s in SYSTEMS
    }
    rows = summarise(runs, singles, empty_cluster, empty_scale)
    return {name: r for name, r in rows.items() if r["pier"] == r["pier"]}  # the parts not run: NaN


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="everything tiny, once (CI)")
    parser.add_argument("--repetitions", type=int, help="override the number of repetitions")
    parser.add_argument(
        "--fleet", action="store_true",
        help="issue 25's rows in full, the perf-tool matrix only uncompressed and smaller",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=RESULTS / "vs_kafka.json")
    parser.add_argument("--chart", type=Path, help="PNG path (default: beside --out)")
    parser.add_argument("--dir", type=Path, help="scratch directory (default: a temporary one)")
    parser.add_argument(
        "--skip", action="append", default=[], choices=("cluster", "partitions", "fleet"),
        help="leave out a part (repeatable)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    sizes = SHORT if args.short else FLEET if args.fleet else FULL
    if args.repetitions:
        sizes = Sizes(**{**sizes.__dict__, "repetitions": args.repetitions})
    reference_kafka.fetch_server()
    fetched = subprocess.run([str(REFERENCE), "fetch"], capture_output=True, text=True, check=False)
    if fetched.returncode != 0:
        raise SystemExit(f"infra/reference/kafka fetch failed:\n{fetched.stderr}")
    parts = {"cluster", "partitions", "fleet"} - set(args.skip)
    scratch_parent = args.dir or Path(tempfile.gettempdir())
    scratch_parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="vs-kafka-", dir=scratch_parent))
    try:
        document = run(sizes, scratch, parts)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    document["short"] = args.short
    text = json.dumps(document, indent=2, allow_nan=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text + "\n")
    env = document["environment"]
    chart(
        document["summary"],
        args.chart or args.out.with_suffix(".png"),
        f"Pier / Apache Kafka {env['kafka']}, {env['date']}, {env['cpus']} CPUs"
        f"{' (short run: not a measurement)' if args.short else ''}",
    )
    print(text)
    print(markdown(document["summary"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
