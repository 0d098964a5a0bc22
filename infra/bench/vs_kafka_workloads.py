"""The hosted-fleet workloads of `infra.bench.vs_kafka` (issue 25), run on a server it started.

Owns, each against one running server (Pier or Kafka, the same code for both):
- `omb`: the OpenMessaging Benchmark's Kafka shape (`infra.bench.vs_kafka_omb`, re-exported:
  the maximum sustainable rate, then latencies per message at 50 % of it);
- `connections`: 1,000 connections of which 100 produce: 900 idle Kafka connections (an
  ApiVersions exchange each, then silence) while 100 confluent-kafka producers (4 processes x 25)
  send 1 KiB records uncompressed, acks=1, as fast as they can enqueue them for 15 s, then flush:
  throughput (every record acknowledged over the whole run, flush included), the server's CPU per
  GB, and what was acknowledged within the 15 s (a server whose answers lag lets the clients queue
  millions of records, sent afterwards in full batches; one that answers at once keeps their
  batches small: docs/benchmarks.md);
- `churn`: 100 topics of 10 partitions created, then deleted, one request at a time, in rounds
  until at least 10 s have passed (the idle window's length), the latency of each create (until every partition is led) and delete (until the topic is gone from
  metadata), and a bystander producer's p99 produce latency during the churn against its idle p99;
- `wide`: (on the 3-node cluster) 10,000 partitions created, time until every one is led.
The clients run on the same 2 cores as the servers: rows the clients saturate say so in the
document (`client_bound`) and carry the server's CPU per GB. Blocking; child processes are
joined (or killed) before a function returns.
"""

from __future__ import annotations

import multiprocessing as mp
import socket
import struct
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import confluent_kafka
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from infra.bench.vs_kafka_omb import omb, quantiles
from infra.probes import recv_exactly

RECORD = 1024
WIDE_PARTITIONS_PER_REQUEST = 5000  # Kafka: POLICY_VIOLATION "excessively large batch" above ~10k


@dataclass(frozen=True)
class WorkloadSizes:
    """How big each workload is; the short form proves the code path in CI."""

    omb_partitions: int = 100
    omb_producers: int = 16
    omb_consumers: int = 16
    omb_seconds: float = 20.0
    omb_warmup_seconds: float = (
        10.0  # OMB's warm-up before the measured period (its default: 1 min)
    )
    # the rate controller's first steps, not measured: OMB's warm-up (1 min), so a cold server's
    # first periods (a JVM's JIT; the first period once ran at 544 of 10,000 records/s) cut the
    # target where it still has time to climb back (each cut halves how fast it climbs)
    omb_max_warmup_seconds: float = 60.0
    connections: int = 1000
    active: int = 100
    active_processes: int = 4
    active_seconds: float = 15.0
    churn_topics: int = 100  # created one request each, then deleted one request each
    churn_loops: int = 1  # at least this many rounds (create all, then delete all)
    # ...and rounds until this long has passed: the bystander's p99 during the churn is then
    # over about as many samples as its idle one (~2,000), whichever server's speed (a faster
    # server's one round gave ~200: its p99 was the second-worst sample)
    churn_min_seconds: float = 10.0
    churn_partitions: int = 10
    wide: tuple[int, int] = (20, 500)  # topics x partitions on the 3-node cluster


FULL_WORKLOADS = WorkloadSizes()
SHORT_WORKLOADS = WorkloadSizes(
    omb_partitions=2, omb_producers=1, omb_consumers=1, omb_seconds=2.0, omb_warmup_seconds=0.5,
    omb_max_warmup_seconds=0.5,
    connections=20, active=4, active_processes=2, active_seconds=2.0,
    churn_topics=3, churn_partitions=2, churn_min_seconds=0.0, wide=(2, 10),
)  # fmt: skip


# The summary rows of these workloads: (row name, path into one system's results, which way is
# better). "fleet" results are the single node's, "wide" the 3-node cluster's.
CHURN_ELSEWHERE = "churn_elsewhere"
FLEET_ROWS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("OMB 1 topic x 100 partitions 1 KiB 16p/16c max MB/s", ("omb", "max", "mb_per_s"), "higher"),
    ("OMB max rate e2e p99 ms", ("omb", "max", "e2e", "p99_ms"), "lower"),
    ("OMB at 50% rate e2e p50 ms", ("omb", "half", "e2e", "p50_ms"), "lower"),
    ("OMB at 50% rate e2e p99 ms", ("omb", "half", "e2e", "p99_ms"), "lower"),
    ("OMB at 50% rate e2e p99.9 ms", ("omb", "half", "e2e", "p999_ms"), "lower"),
    ("OMB at 50% rate publish p99 ms", ("omb", "half", "publish", "p99_ms"), "lower"),
    ("OMB at 50% rate publish p99.9 ms", ("omb", "half", "publish", "p999_ms"), "lower"),
    ("OMB server CPU s/GB", ("omb", "server_cpu_s_per_gb"), "lower"),
    ("1000 connections (100 producing) 1 KiB MB/s", ("connections", "mb_per_s"), "higher"),
    ("1000 connections server CPU s/GB", ("connections", "server_cpu_s_per_gb"), "lower"),
    ("1000 connections: acknowledged while producing MB/s", ("connections", "window_mb_per_s"),
     "higher"),
    ("churn: create topic (10 partitions) p50 ms", ("churn", "create", "p50_ms"), "lower"),
    ("churn: create topic p99 ms", ("churn", "create", "p99_ms"), "lower"),
    ("churn: delete topic p50 ms", ("churn", "delete", "p50_ms"), "lower"),
    ("churn: delete topic p99 ms", ("churn", "delete", "p99_ms"), "lower"),
    ("churn: bystander produce p99 idle ms", ("churn", "bystander_idle", "p99_ms"), "lower"),
    ("churn: bystander produce p99 during churn ms", ("churn", "bystander_churn", "p99_ms"),
     "lower"),
    ("churn: bystander p99 during / idle", ("churn", "bystander_p99_churn_over_idle"), "lower"),
    # The same churn against a second server, the bystander alone on the first: the machine's
    # share of the ratio above (no target; issue 25's item 3).
    ("churn elsewhere: bystander p99 during churn ms",
     (CHURN_ELSEWHERE, "bystander_churn", "p99_ms"), "lower"),
    ("churn elsewhere: bystander p99 during / idle",
     (CHURN_ELSEWHERE, "bystander_p99_churn_over_idle"), "lower"),
)  # fmt: skip


def dig(found: dict[str, Any], path: Sequence[str]) -> float:
    value: Any = found
    for key in path:
        value = value[key]
    return float(value)


def _processes() -> Any:
    """Client processes fork from a clean server process that has imported this module once
    (the benchmark's own process holds librdkafka threads, which a plain fork would copy)."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([__name__, "confluent_kafka"])
    return ctx


def _admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def _led(admin: AdminClient, topic: str, count: int) -> bool:
    try:
        found = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
    except confluent_kafka.KafkaException:
        return False
    if found is None or found.error is not None:
        return False
    return sum(1 for p in found.partitions.values() if p.leader >= 0) >= count


def _poll(check: Callable[[], bool], timeout: float, what: str) -> None:
    """A benchmark's wait: poll until `check` holds (its time is part of the measurement)."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what}: not done after {timeout:g}s")
        time.sleep(0.01)


# --- many connections ----------------------------------------------------------------------------

_API_VERSIONS = struct.pack(">hhih", 18, 0, 1, 4) + b"idle"  # key, version 0, correlation, client


def _idle_connections(bootstrap: str, count: int) -> list[socket.socket]:
    """`count` Kafka connections that each finish an ApiVersions exchange, then stay silent."""
    host, port = bootstrap.rsplit(":", 1)
    sockets = []
    for _ in range(count):
        sock = socket.create_connection((host, int(port)), timeout=30)
        sock.sendall(struct.pack(">i", len(_API_VERSIONS)) + _API_VERSIONS)
        size = struct.unpack(">i", recv_exactly(sock, 4))[0]
        recv_exactly(sock, size)
        sockets.append(sock)
    return sockets


def _active_producers(bootstrap: str, topic: str, count: int, seconds: float, out: Any) -> None:
    """`count` producers (one connection each) in this process, records round-robin."""
    conf = {"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5, "compression.type": "none"}
    producers = [confluent_kafka.Producer(conf) for _ in range(count)]
    record = bytes(RECORD)
    acked = [0]
    produced = 0

    def delivered(err: Any, _msg: Any) -> None:
        acked[0] += err is None

    began = time.monotonic()
    while (window := time.monotonic() - began) < seconds:
        for producer in producers:
            for _ in range(20):
                try:
                    producer.produce(topic, record, on_delivery=delivered)
                except BufferError:
                    break
                produced += 1
            producer.poll(0)
    for producer in producers:
        producer.poll(0)  # the acknowledgements that arrived within the window
    in_window = acked[0]
    for producer in producers:
        producer.flush(60)
    out.put({"acked": acked[0], "seconds": time.monotonic() - began, "produced": produced,
             "acked_in_window": in_window, "window_s": window})  # fmt: skip


def connections(
    bootstrap: str, sizes: WorkloadSizes, create: Callable[..., None]
) -> dict[str, Any]:
    create(bootstrap, ["conns"], partitions=sizes.active)
    idle = _idle_connections(bootstrap, sizes.connections - sizes.active)
    ctx = _processes()
    outs = ctx.Queue()
    each = sizes.active // sizes.active_processes
    workers = [
        ctx.Process(target=_active_producers,
                    args=(bootstrap, "conns", each, sizes.active_seconds, outs))
        for _ in range(sizes.active_processes)
    ]  # fmt: skip
    try:
        for worker in workers:
            worker.start()
        results = [outs.get(timeout=sizes.active_seconds + 300) for _ in workers]
        still_open = sum(1 for s in idle if _still_open(s))
    finally:
        for worker in workers:
            if worker.pid is None:
                continue  # never started (the start itself failed)
            worker.join(30)
            if worker.is_alive():
                worker.kill()
        for sock in idle:
            sock.close()
    acked = sum(r["acked"] for r in results)
    seconds = max(r["seconds"] for r in results)
    in_window = sum(r["acked_in_window"] for r in results)
    window_s = max(r["window_s"] for r in results)
    return {
        "connections": sizes.connections,
        "active": each * sizes.active_processes,
        "idle_still_open": still_open,
        "records": acked,
        "seconds": round(seconds, 2),
        "mb_per_s": round(acked * RECORD / seconds / 1e6, 2),
        "produced_in_window": sum(r["produced"] for r in results),
        "acked_in_window": in_window,
        "window_mb_per_s": round(in_window * RECORD / window_s / 1e6, 2),
    }


def _still_open(sock: socket.socket) -> bool:
    sock.setblocking(False)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True  # nothing to read, not closed
    except OSError:
        return False


# --- topic churn with a bystander ----------------------------------------------------------------


def _bystander(bootstrap: str, topic: str, ready: Any, stop: Any, out: Any) -> None:
    """Produce 1 KiB at 200 records/s, acks=1, one at a time in flight: each one's latency;
    `ready` is set once the first record is delivered (connected, metadata known)."""
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0}
    )
    latencies: list[float] = []
    record = bytes(RECORD)
    while not stop.is_set():
        sent = time.perf_counter()
        producer.produce(topic, record)
        if producer.flush(30) == 0:  # delivered (or failed) within the flush
            if ready.is_set():
                latencies.append((time.perf_counter() - sent) * 1000)
            ready.set()
        time.sleep(max(0.0, 0.005 - (time.perf_counter() - sent)))
    out.put(latencies)


def _bystander_p99(
    bootstrap: str, during: Callable[[], Any], topic: str = "bystander"
) -> tuple[dict[str, float], Any]:
    """The bystander's latency quantiles while `during` runs, and what `during` returned."""
    ctx = _processes()
    ready, stop, outs = ctx.Event(), ctx.Event(), ctx.Queue()
    worker = ctx.Process(target=_bystander, args=(bootstrap, topic, ready, stop, outs))
    worker.start()
    try:
        # Its connection and metadata settle before the window measured (a fixed second was
        # not always enough on a loaded machine: a short churn then had no sample at all).
        _poll(ready.is_set, 120, "bystander's first record delivered")
        result = during()
        stop.set()
        latencies = outs.get(timeout=120)
    finally:
        stop.set()
        worker.join(30)
        if worker.is_alive():
            worker.kill()
    return quantiles(latencies), result


def churn(
    bootstrap: str,
    sizes: WorkloadSizes,
    create: Callable[..., None],
    *,
    bystander_at: str | None = None,
) -> dict[str, Any]:
    """Topics created and deleted in a loop on `bootstrap`, with a bystander producing beside it:
    the latencies of each and the bystander's p99 idle and during. `bystander_at`: the
    bystander's own server instead (another server of the same system doing nothing else), so
    what the churn costs it through the machine alone (cores, kernel) is measured: the floor
    of the row on this machine."""
    bystander = bystander_at or bootstrap
    topic = "bystander" if bystander_at is None else "bystander-elsewhere"
    create(bystander, [topic], partitions=1)
    admin = _admin(bootstrap)

    def loop() -> dict[str, Any]:
        creates: list[float] = []
        deletes: list[float] = []
        began, round_ = time.monotonic(), 0
        while round_ < sizes.churn_loops or time.monotonic() - began < sizes.churn_min_seconds:
            names = [
                f"churn-{round_}-{i}-{uuid.uuid4().hex[:6]}" for i in range(sizes.churn_topics)
            ]
            for name in names:
                creates.append(_create_one(admin, name, sizes.churn_partitions))
            for name in names:
                deletes.append(_delete_one(admin, name))
            round_ += 1
        return {"create": quantiles(creates), "delete": quantiles(deletes), "loops": round_,
                "seconds": round(time.monotonic() - began, 2)}  # fmt: skip

    idle, _ = _bystander_p99(bystander, partial(time.sleep, max(2.0, sizes.omb_seconds / 2)), topic)
    during, latencies = _bystander_p99(bystander, loop, topic)
    ratio = during["p99_ms"] / idle["p99_ms"] if idle["p99_ms"] else float("nan")
    return {"topics": sizes.churn_topics,
            "bystander_p99_churn_over_idle": round(ratio, 2),
            "partitions": sizes.churn_partitions,
            "bystander_idle": idle, "bystander_churn": during, **latencies}  # fmt: skip


def _create_one(admin: AdminClient, name: str, partitions: int) -> float:
    """Milliseconds from the CreateTopics request until every partition is led."""
    began = time.perf_counter()
    topic = NewTopic(name, num_partitions=partitions, replication_factor=1)
    admin.create_topics([topic], operation_timeout=60)[name].result(timeout=120)
    _poll(partial(_led, admin, name, partitions), 120, f"{name} led")
    return (time.perf_counter() - began) * 1000


def _delete_one(admin: AdminClient, name: str) -> float:
    """Milliseconds from the DeleteTopics request until metadata no longer lists the topic."""
    began = time.perf_counter()
    admin.delete_topics([name], operation_timeout=60)[name].result(timeout=120)
    _poll(partial(_gone, admin, name), 120, f"{name} gone")
    return (time.perf_counter() - began) * 1000


def _gone(admin: AdminClient, name: str) -> bool:
    try:
        return name not in admin.list_topics(timeout=10).topics
    except confluent_kafka.KafkaException:
        return False


# --- many partitions over three nodes ------------------------------------------------------------


def wide(bootstrap: str, sizes: WorkloadSizes, create: Callable[..., None]) -> dict[str, Any]:
    topics, each = sizes.wide
    names = [f"wide-{i}" for i in range(topics)]
    per_request = max(1, WIDE_PARTITIONS_PER_REQUEST // each)
    began = time.perf_counter()
    for first in range(0, topics, per_request):  # KRaft refuses >10,000 records in one request
        create(bootstrap, names[first : first + per_request], partitions=each)
    return {"partitions": topics * each, "create_s": round(time.perf_counter() - began, 2)}


__all__ = [
    "CHURN_ELSEWHERE",
    "FLEET_ROWS",
    "FULL_WORKLOADS",
    "SHORT_WORKLOADS",
    "WorkloadSizes",
    "churn",
    "connections",
    "dig",
    "omb",
    "wide",
]
