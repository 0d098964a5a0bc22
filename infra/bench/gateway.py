"""Gateway benchmark: what the tenant gateway costs next to a direct connection to the broker.

Usage: `python -m infra.bench.gateway [--quick] [--out DIR] [--profile]` from the repository root
(see infra/bench/README.md). Starts one broker (`infra.stack.start_broker`), a SQLite tenant store
and `pier gateway` in front (`infra.gateway.start_gateway`, default settings) in a temporary
directory, with three tenants: `bench` (no quota; its connection limit raised for phase 1),
`noisy` (`producer_byte_rate` 2 MB/s for its default user) and `quiet` (no quota). Then:
1. memory: N idle PLAIN-authenticated connections (1,000; 200 with `--quick`); the gateway's
   VmRSS before and after, KiB per connection (target ≤ 30 KiB);
2. SCRAM-SHA-256 logins per second (`gateway_logins`): cold (the first login of each of K distinct
   keys) and warm (the same keys again, from the gateway's verification cache);
3. throughput: `produce_consume`'s workloads (100 B and 1 KiB records, none and lz4), direct and
   through the gateway (SASL/PLAIN) alternately after a warm-up of both, produce then consume
   (target gateway ÷ direct ≥ 0.85);
4. latency: `latency.py`'s method at 5 MB/s, direct then through the gateway; p50/p99/p99.9 and
   the added p99 (target ≤ 1 ms);
5. noisy neighbour (`noisy_neighbour`): the quiet tenant's produce latency at 1 MB/s alone, then
   while the noisy tenant offers 20 MB/s, 10× its quota (target p99 change ≤ +20 %).
Around every throughput run the CPU time (user + system) of the gateway (its workers included) and
of the broker is read: `cpu_s_per_gb` per run, gateway ÷ broker (target ≤ 0.5), with the 1-minute
load average at its end (`load_1m`: the machine is shared).
6. workers: the aggregate produce rate of `WORKER_CLIENTS` producer processes (1 KiB records, each
   its own topic) through this one-worker gateway, then through a second gateway started with
   `workers=2`; the broker's CPU share during each run says whether it was the bottleneck
   (target 2 workers ÷ 1 ≥ 1.6 where it is not).
7. http: `http_api.py`'s HTTP rows through this gateway's HTTP API (single-record and streamed
   produce, v2 consume, latency, gateway and broker CPU µs per record), in the document's `http`.
`--times N` multiplies the throughput workloads' record counts; `--phases a,b` runs only those
phases (memory, logins, throughput, latency, noisy, workers, http).
Prints one JSON document, writes it to `<out>/gateway.json` and a chart `<out>/gateway.png`.
`--quick` uses 10× fewer records, 5 s latency and noisy runs, 40 cold keys and 200 connections
(about 2 minutes); `--profile` records the gateway with py-spy during phases 2 and 3
(`gateway_logins_flamegraph.svg`, `gateway_throughput_flamegraph.svg`). Every process started
is stopped on exit, also on error, Ctrl-C or SIGTERM. Runs on the main thread (the latency run
adds a consumer thread, the noisy tenant a child process).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import resource
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType
from typing import Any

from gateway.kafka.namespace import TenantNamespace
from infra.bench.gateway_logins import SCRAM, LoginRun, ScramKey, idle_connections, login_rate
from infra.bench.gateway_report import (
    cpu_row,
    document,
    latency_section,
    memory_section,
    noisy_section,
    workers_section,
)
from infra.bench.gateway_report import write_chart as write_gateway_chart
from infra.bench.latency import latency_samples
from infra.bench.noisy_neighbour import NoisyProducer, NoisyReport, quiet_latencies
from infra.bench.produce_consume import (
    CODECS,
    LATENCY_RATE_MB_S,
    LATENCY_SECONDS,
    QUICK_LATENCY_SECONDS,
    WORKLOADS,
    create_topics,
    progress,
    stored_codec,
    topic_for,
)
from infra.bench.profiling import py_spy_recording
from infra.bench.report import write_json
from infra.bench.throughput import Throughput, consume_run, produce_run
from infra.gateway import GatewayProcess, start_gateway
from infra.probes import free_port
from infra.stack import BrokerProcess, start_broker
from tenancy.domain import DEFAULT_ENTITY, DEFAULT_LIMITS, QuotaEntity
from tenancy.quota_chain import QUOTA_NAMES
from tenancy.store import TenantStore

RESULTS = Path(__file__).resolve().parent / "results"
OPERATOR = "op-bench"
FULL = {"scale": 1, "cold_keys": 200, "idle": 1000, "noisy_s": 8.0, "noisy_rounds": 3}
QUICK = {"scale": 10, "cold_keys": 40, "idle": 200, "noisy_s": 5.0, "noisy_rounds": 1}
WARM_LOGIN_ROUNDS = 3  # warm logins = rounds × cold keys
LOGIN_CONCURRENCY = 8
WARM_UP_RECORDS = 100_000  # 100 B records each way before the timed runs (÷ scale)
NOISY_QUOTA_BYTES_S = 2_000_000.0
NOISY_OFFERED_MB_S = 20.0
QUIET_RATE_MB_S = 1.0
NOISY_HEAD_START_S = 2.0  # past the burst that Kafka's 11 × 1 s quota window lets through
SETTLE_S = 1.0  # after opening the idle connections, before reading RSS
PHASES = ("memory", "logins", "throughput", "latency", "noisy", "workers", "http")
HTTP_RECORDS = 30_000  # 100-byte records per HTTP produce phase (÷ scale; http_api.py's rows)
WORKER_CLIENTS = 4  # producer processes of the workers phase
WORKER_RECORDS = 100_000  # 1 KiB records per producer process (÷ scale)


@dataclass(frozen=True)
class Key:
    tenant: str
    key_id: str
    secret: str


@dataclass(frozen=True)
class Tenants:
    bench: Key
    noisy: Key
    quiet: Key
    scram: list[ScramKey]


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, shorter runs")
    parser.add_argument("--out", type=Path, default=RESULTS, help="output directory")
    parser.add_argument(
        "--profile", action="store_true", help="py-spy the gateway (logins, throughput)"
    )
    parser.add_argument(
        "--times",
        type=int,
        default=1,
        help="multiply the throughput workloads' record counts (steadier CPU per GB figures)",
    )
    parser.add_argument(
        "--phases",
        default=",".join(PHASES),
        help=f"comma-separated phases to run (default all: {','.join(PHASES)})",
    )
    args = parser.parse_args(argv)
    args.phases = [p for p in args.phases.split(",") if p]
    unknown = set(args.phases) - set(PHASES)
    if unknown:
        parser.error(f"unknown phases {sorted(unknown)}; known: {', '.join(PHASES)}")
    return args


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through the `finally` blocks that stop processes


def raise_fd_limit(needed: int) -> None:
    """The bench holds the idle connections, the gateway twice as many (client + upstream); the
    children inherit the soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


CpuTimes = tuple[float, float]  # user, system CPU seconds


def cpu_times(pid: int, *, children_of: bool = False) -> CpuTimes:
    """User and system CPU seconds of `pid` (fields 14 and 15 of /proc/<pid>/stat), with those of
    its live children when `children_of` (a multi-worker gateway's workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    user = system = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue  # gone meanwhile
        if int(entry.name) == pid or (children_of and int(fields[1]) == pid):
            user += int(fields[11]) / tick
            system += int(fields[12]) / tick
    return user, system


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of `pid` and its live children."""
    return sum(cpu_times(pid, children_of=True))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


# -- the tenant store --------------------------------------------------------------------------
def prepare_store(db_url: str, plan: Mapping[str, float]) -> Tenants:
    with TenantStore.open(db_url) as store:
        store.upgrade()
        bench = open_tenant(store, "bench")
        limits = replace(DEFAULT_LIMITS, max_connections=int(plan["idle"]) + 500)
        store.update_tenant("bench", limits=limits, actor=OPERATOR)
        account = bench[1]
        keys = [_key(store, "bench", account) for _ in range(int(plan["cold_keys"]))]
        scram = [ScramKey(key.key_id, key.secret) for key in keys]
        for key in scram:  # the client's PBKDF2, once per key, before anything is timed
            found = store.scram_credential(key.key_id, SCRAM)
            assert found is not None
            key.prime(found[1].salt, found[1].iterations)
        noisy = open_tenant(store, "noisy")
        store.set_quotas(
            "noisy",
            QuotaEntity(DEFAULT_ENTITY, None),
            {"producer_byte_rate": NOISY_QUOTA_BYTES_S},
            actor=OPERATOR,
        )
        quiet = open_tenant(store, "quiet")
    return Tenants(bench[0], noisy[0], quiet[0], scram)


def open_tenant(store: TenantStore, tenant_id: str) -> tuple[Key, str]:
    """A tenant whose accounts need no ACLs and which has no quotas: a key and its account id."""
    store.create_tenant(  # open: the bench's key may use its topics without ACLs
        display_name=tenant_id,
        plan="free",
        tenant_id=tenant_id,
        authorization="open",
        actor=OPERATOR,
    )
    no_quotas = dict.fromkeys(QUOTA_NAMES, None)  # not the free plan's: the bench sets its own
    store.set_quotas(tenant_id, QuotaEntity(DEFAULT_ENTITY, None), no_quotas, actor=OPERATOR)
    account = store.create_service_account(tenant_id, name="bench", actor=OPERATOR)
    return _key(store, tenant_id, account.id), account.id


def _key(store: TenantStore, tenant_id: str, account_id: str) -> Key:
    key, secret = store.create_api_key(tenant_id, service_account_id=account_id, actor=OPERATOR)
    return Key(tenant_id, key.key_id, str(secret))


def sasl(gateway: GatewayProcess, key: Key) -> dict[str, Any]:
    """confluent-kafka settings for `key` through the gateway."""
    return {
        "bootstrap.servers": gateway.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": key.key_id,
        "sasl.password": key.secret,
    }


# -- phases ------------------------------------------------------------------------------------
def memory_phase(
    gateway: GatewayProcess, broker: BrokerProcess, key: Key, count: int
) -> dict[str, Any]:
    async def measure() -> tuple[tuple[int, int], tuple[int, int]]:
        host, port = gateway.host, gateway.port
        async with idle_connections(host, port, key.key_id, key.secret, 20):
            pass  # warm-up: the tenant's state, quotas and code paths are loaded once
        await asyncio.sleep(SETTLE_S)
        before = rss_kib(gateway.pid), rss_kib(broker.pid)
        async with idle_connections(host, port, key.key_id, key.secret, count):
            await asyncio.sleep(SETTLE_S)
            after = rss_kib(gateway.pid), rss_kib(broker.pid)
        return (before[0], after[0]), (before[1], after[1])

    gateway_kib, broker_kib = asyncio.run(measure())
    section = memory_section(count, gateway_kib, broker_kib)
    print(f"idle connections: {section['kib_per_connection']} KiB each", file=sys.stderr)
    return section


def login_phase(gateway: GatewayProcess, keys: list[ScramKey]) -> list[LoginRun]:
    async def measure() -> list[LoginRun]:
        host, port, n = gateway.host, gateway.port, len(keys)
        cold = await login_rate(host, port, "cold", keys, n, LOGIN_CONCURRENCY)
        rounds = n * WARM_LOGIN_ROUNDS
        warm = await login_rate(host, port, "warm", keys, rounds, LOGIN_CONCURRENCY)
        return [cold, warm]

    runs = asyncio.run(measure())
    for run in runs:
        shown = run.as_json()
        print(f"SCRAM logins {run.kind}: {shown['logins_per_s']}/s", file=sys.stderr)
    return runs


class CpuMeter:
    """CPU seconds of the gateway and the broker used by each run (`rows`, for the report)."""

    def __init__(self, broker: BrokerProcess, gateway: GatewayProcess) -> None:
        self.broker, self.gateway = broker, gateway
        self.rows: list[dict[str, Any]] = []

    def timed(self, make_run: Any) -> Throughput:
        gateway_before = cpu_times(self.gateway.pid, children_of=True)
        broker_before = cpu_times(self.broker.pid)
        run: Throughput = make_run()
        gateway_after = cpu_times(self.gateway.pid, children_of=True)
        broker_after = cpu_times(self.broker.pid)
        gateway = (gateway_after[0] - gateway_before[0], gateway_after[1] - gateway_before[1])
        broker = (broker_after[0] - broker_before[0], broker_after[1] - broker_before[1])
        self.rows.append({**cpu_row(run, gateway, broker), "load_1m": os.getloadavg()[0]})
        return run


def throughput_phase(
    broker: BrokerProcess,
    gateway: GatewayProcess,
    key: Key,
    scale: int,
    meter: CpuMeter,
    times: int = 1,
) -> list[Throughput]:
    """`times` multiplies the workloads' record counts (longer runs: CPU time is read in clock
    ticks of 10 ms, and the gateway's idle work is subtracted per second)."""
    plan = [(count * times // scale, size, codec) for count, size in WORKLOADS for codec in CODECS]
    warm_up = (WARM_UP_RECORDS // scale, 100, "none")
    names = [topic_for(*work) for work in [warm_up, *plan]] + ["bench-latency"]
    gateway_connection = sasl(gateway, key)
    direct_connection = {"bootstrap.servers": broker.bootstrap}
    create_topics(broker.bootstrap, names)
    create_topics(gateway.bootstrap, names, gateway_connection)
    targets = {"direct": direct_connection, "gateway": gateway_connection}
    namespace = TenantNamespace(key.tenant)
    for target, connection in targets.items():  # untimed: connections, caches, page cache
        produce_run(target, connection, topic_for(*warm_up), *warm_up)
        consume_run(broker.bootstrap, topic_for(*warm_up), *warm_up, connection=connection)
    runs: list[Throughput] = []
    for index, work in enumerate(plan):
        for target in _alternating(index):
            topic = topic_for(*work)
            run = meter.timed(
                lambda t=target, c=targets[target], n=topic, w=work: produce_run(t, c, n, *w)
            )
            stored = topic if target == "direct" else namespace.fleet(topic)
            runs.append(replace(run, stored_codec=stored_codec(broker.data_dir, stored)))
            progress(runs[-1])
    for index, work in enumerate(plan):
        for target in _alternating(index):
            connection = targets[target]
            runs.append(
                meter.timed(
                    lambda c=connection, t=target, w=work: consume_run(
                        broker.bootstrap, topic_for(*w), *w, connection=c, target=t
                    )
                )
            )
            progress(runs[-1])
    return runs


def _alternating(index: int) -> tuple[str, str]:
    """Direct first for even workloads, the gateway first for odd ones: drift evens out."""
    return ("direct", "gateway") if index % 2 == 0 else ("gateway", "direct")


def latency_phase(
    broker: BrokerProcess, gateway: GatewayProcess, key: Key, seconds: float
) -> dict[str, Any]:
    direct = latency_samples(
        {"bootstrap.servers": broker.bootstrap}, "bench-latency", LATENCY_RATE_MB_S, seconds
    )
    through = latency_samples(sasl(gateway, key), "bench-latency", LATENCY_RATE_MB_S, seconds)
    section = latency_section(direct, through, LATENCY_RATE_MB_S, seconds)
    print(f"latency: added p99 {section['added_p99_ms']} ms", file=sys.stderr)
    return section


def noisy_phase(
    gateway: GatewayProcess, tenants: Tenants, seconds: float, rounds: int
) -> dict[str, Any]:
    """Rounds of (quiet alone, quiet beside noisy): the machine's other load drifts, so the two
    conditions alternate and their samples are pooled."""
    quiet, noisy = sasl(gateway, tenants.quiet), sasl(gateway, tenants.noisy)
    create_topics(gateway.bootstrap, ["quiet"], quiet)
    create_topics(gateway.bootstrap, ["noisy"], noisy)
    alone: list[list[float]] = []
    beside: list[list[float]] = []
    reports: list[NoisyReport] = []
    for _ in range(rounds):
        alone.append(quiet_latencies(quiet, "quiet", QUIET_RATE_MB_S, seconds))
        with NoisyProducer(noisy, "noisy", NOISY_OFFERED_MB_S) as loud:
            time.sleep(NOISY_HEAD_START_S)  # the schedule of the workload, not a wait for state
            beside.append(quiet_latencies(quiet, "quiet", QUIET_RATE_MB_S, seconds))
        assert loud.report is not None
        reports.append(loud.report)
    settings = {
        "seconds_per_round": seconds,
        "rounds": rounds,
        "quiet_rate_mb_s": QUIET_RATE_MB_S,
        "noisy_quota_mb_s": NOISY_QUOTA_BYTES_S / 1e6,
        "noisy_offered_mb_s": NOISY_OFFERED_MB_S,
    }
    section = noisy_section(alone, beside, reports, settings)
    print(f"noisy neighbour: quiet p99 {section['quiet_p99_change_pct']:+} %", file=sys.stderr)
    return section


def _client_producer(
    connection: dict[str, Any], topic: str, count: int, start: Any, out: Any
) -> None:
    """One producer process of the workers phase: connect and warm up, wait for the others at
    `start` (a barrier), produce `count` 1 KiB records; puts (first, last) wall-clock seconds."""
    from confluent_kafka import Producer

    from infra.bench.throughput import PRODUCER_SETTINGS, value_pool

    producer = Producer({**PRODUCER_SETTINGS, **connection})
    pool = value_pool(1024)
    for value in pool[:100]:
        producer.produce(topic, value)
    producer.flush(60)
    start.wait()
    began = time.time()
    for i in range(count):
        while True:
            try:
                producer.produce(topic, pool[i % len(pool)])
                break
            except BufferError:
                producer.poll(0.01)
        if i % 10_000 == 0:
            producer.poll(0)
    remaining = producer.flush(300)
    out.put((began, time.time(), remaining))


def aggregate_produce(
    gateway: GatewayProcess, broker: BrokerProcess, key: Key, label: str, count: int
) -> dict[str, Any]:
    """`WORKER_CLIENTS` producer processes at once, each to its own topic; aggregate MB/s and the
    gateway's and broker's CPU use (cores) over the run."""
    connection = sasl(gateway, key)
    topics = [f"bench-workers-{label}-{i}" for i in range(WORKER_CLIENTS)]
    create_topics(gateway.bootstrap, topics, connection)
    context = multiprocessing.get_context("spawn")
    start, out = context.Barrier(WORKER_CLIENTS + 1), context.Queue()
    clients = [
        context.Process(target=_client_producer, args=(connection, t, count, start, out))
        for t in topics
    ]
    for client in clients:
        client.start()
    try:
        start.wait(timeout=120)
        cpu_before = tree_cpu_seconds(gateway.pid), sum(cpu_times(broker.pid))
        results = [out.get(timeout=600) for _ in clients]
        cpu_after = tree_cpu_seconds(gateway.pid), sum(cpu_times(broker.pid))
    finally:
        for client in clients:
            client.join(timeout=30)
            if client.is_alive():
                client.kill()
    if any(remaining for _b, _e, remaining in results):
        raise RuntimeError(f"workers phase ({label}): records left unacknowledged")
    seconds = max(end for _b, end, _r in results) - min(began for began, _e, _r in results)
    return {
        "gateway": label,
        "clients": WORKER_CLIENTS,
        "records": count * WORKER_CLIENTS,
        "record_bytes": 1024,
        "seconds": round(seconds, 3),
        "mb_per_s": round(count * WORKER_CLIENTS * 1024 / seconds / 1e6, 2),
        "gateway_cores": round((cpu_after[0] - cpu_before[0]) / seconds, 2),
        "broker_cores": round((cpu_after[1] - cpu_before[1]) / seconds, 2),
    }


def workers_phase(
    root: Path,
    db_url: str,
    broker: BrokerProcess,
    gateway: GatewayProcess,
    key: Key,
    scale: int,
) -> dict[str, Any]:
    """The one-worker gateway, then a second gateway with two workers, same broker and load."""
    count = WORKER_RECORDS // scale
    one = aggregate_produce(gateway, broker, key, "1-worker", count)
    two_workers = start_gateway(
        root / "gateway-2w",
        broker.bootstrap,
        db_url,
        node_ids=[broker.node_id],
        properties={"workers": "2"},
    )
    try:
        two = aggregate_produce(two_workers, broker, key, "2-workers", count)
    finally:
        two_workers.stop()
    section = workers_section(one, two, os.cpu_count() or 1)
    print(f"workers: 2 ÷ 1 = {section['ratio_2_to_1']}", file=sys.stderr)
    return section


def http_phase(processes: _Processes, key: Key, scale: int) -> dict[str, Any]:
    """`http_api.py`'s HTTP rows through this gateway's HTTP API: single-record produce (16 in
    flight), streamed produce, v2 consume, one-at-a-time latency, CPU µs per record."""
    from infra.bench.http_api import CpuMeter as RecordCpu
    from infra.bench.http_api import http_phases

    assert processes.broker is not None and processes.gateway is not None
    cpu = RecordCpu({"gateway": processes.gateway.pid, "broker": processes.broker.pid})
    base = f"http://127.0.0.1:{processes.http_port}"
    count = HTTP_RECORDS // scale
    section = asyncio.run(
        http_phases(base, key.key_id, key.secret, count, max(200, 2000 // scale), cpu)
    )
    print(f"http: {section['produce_stream_records_s']} streamed records/s", file=sys.stderr)
    return section


def profiled(enabled: bool, gateway: GatewayProcess, svg: Path) -> AbstractContextManager[None]:
    return py_spy_recording(gateway.pid, svg) if enabled else nullcontext()


def run(
    processes: _Processes,
    tenants: Tenants,
    args: argparse.Namespace,
    plan: Mapping[str, float],
    root: Path,
    db_url: str,
) -> dict[str, Any]:
    broker, gateway, phases = processes.broker, processes.gateway, args.phases
    assert broker is not None and gateway is not None
    scale = int(plan["scale"])
    sections: dict[str, Any] = {}
    if "memory" in phases:
        sections["memory"] = memory_phase(gateway, broker, tenants.bench, int(plan["idle"]))
    if "logins" in phases:
        with profiled(args.profile, gateway, args.out / "gateway_logins_flamegraph.svg"):
            sections["logins"] = login_phase(gateway, tenants.scram)
    if "throughput" in phases:
        meter = CpuMeter(broker, gateway)
        with profiled(args.profile, gateway, args.out / "gateway_throughput_flamegraph.svg"):
            sections["runs"] = throughput_phase(
                broker, gateway, tenants.bench, scale, meter, args.times
            )
        sections["cpu"] = meter.rows
    if "latency" in phases:
        seconds = QUICK_LATENCY_SECONDS if args.quick else LATENCY_SECONDS
        sections["latency"] = latency_phase(broker, gateway, tenants.bench, seconds)
    if "noisy" in phases:
        sections["noisy"] = noisy_phase(
            gateway, tenants, plan["noisy_s"], int(plan["noisy_rounds"])
        )
    if "workers" in phases:
        sections["workers"] = workers_phase(root, db_url, broker, gateway, tenants.bench, scale)
    if "http" in phases:
        sections["http"] = http_phase(processes, tenants.bench, scale)
    settings = {
        "scale": int(plan["scale"]),
        "idle_connections": int(plan["idle"]),
        "scram_keys": len(tenants.scram),
        "login_concurrency": LOGIN_CONCURRENCY,
        "gateway_properties": "defaults",
        "phases": phases,
        "throughput_times": args.times,
    }
    doc = document(settings, sections, args.quick)
    if "http" in sections:
        doc["http"] = sections["http"]
    return doc


@dataclass
class _Processes:
    broker: BrokerProcess | None = None
    gateway: GatewayProcess | None = None
    http_port: int = 0

    def stop(self) -> None:
        for process in (self.gateway, self.broker):  # the gateway first: it flushes usage
            if process is not None:
                process.stop()


@contextmanager
def started(root: Path, db_url: str, idle: int) -> Iterator[_Processes]:
    """A broker and a gateway in front of it, both stopped on exit from the block. Every client of
    the bench comes from 127.0.0.1, so the per-address cap is raised above its idle connections."""
    processes = _Processes(http_port=free_port())
    try:
        processes.broker = start_broker(root / "broker" / "data")
        processes.gateway = start_gateway(
            root / "gateway",
            processes.broker.bootstrap,
            db_url,
            node_ids=[processes.broker.node_id],
            properties={
                "max.connections.per.ip": str(idle + 100),
                "http.port": str(processes.http_port),  # the tenant HTTP API, for the http phase
            },
        )
        yield processes
    finally:
        processes.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    plan = QUICK if args.quick else FULL
    raise_fd_limit(int(plan["idle"]) * 3 + 1024)
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        with tempfile.TemporaryDirectory(prefix="pier-bench-gateway-") as scratch:
            root = Path(scratch)
            db_url = f"sqlite:///{root / 'tenancy.db'}"
            tenants = prepare_store(db_url, plan)
            with started(root, db_url, int(plan["idle"])) as processes:
                doc = run(processes, tenants, args, plan, root, db_url)
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(write_json(doc, args.out / "gateway.json"))
    write_gateway_chart(doc, args.out / "gateway.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
