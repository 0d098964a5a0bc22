"""Benchmark of metering as a stream: the lag from a usage record written to `__usage` to its hour
visible in the tenant store, while `pier billing stream` runs and usage arrives at a steady rate.

    .venv/bin/python -m infra.bench.billing_stream [--rate 50000] [--seconds 60] [--trigger 10s]
        [--master local[2]] [--sampled-partitions 3]

(as a module: run as a script, `infra/bench/` would shadow the `billing` package)

`stream_lag()` starts one local broker with a 12-partition `__usage`, a SQLite tenant store and
`pier billing stream` (the launcher `infra/up` uses, `infra.billing_loop`), waits for the stream's
first micro-batch (the JVM start is not the lag), then writes traffic records of 1,000 tenants at
`rate` records/s for `seconds` (a tick of `rate`/10 records every 100 ms, through confluent-kafka:
librdkafka batches, compresses and sends them off the Python thread, so the writer reaches 50 k
records/s on a shared machine where the project's Python client reached 11 k) plus one probe record
a second for tenant `probe` (bytes_in 1), timed when the broker acknowledges it, and, as a
gateway's storage sampler does, one storage sample per tenant partition (`sampled_partitions` of
topic `orders` per tenant; 0: none) at each minute's boundary (`at_ms` aligned, sampler `fleet`). A monitor reads
the store every second: when the probe tenant's bytes_in reaches k, the first k probes are visible,
and each one's lag is now minus when it was written. Reports the rate reached, the lag of every
probe (median, 90th percentile, max), how long the stream took to catch up after the writing
stopped, the micro-batches' sizes, seconds and path (`one_pass` when the one-pass path rolled
it up, `billing.rollup.one_pass`; `exact` otherwise) from the stream's log, and the CPU seconds
the stream (its Python driver and Spark JVM) and the broker used from the start of the writing
until the stream caught up. Prints one JSON document
and writes it to `infra/bench/results/billing_stream.json`; progress on stderr. Run alone: the
broker, the writer and the Spark JVM share the machine; report the load average with the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from sqlalchemy import func, select
from sqlalchemy.exc import OperationalError

from brokers.client import Cluster
from brokers.client.topics import NewTopic, create_topics
from infra.billing_loop import BillingStreamProcess, start_billing_stream
from infra.stack import start_broker
from tenancy.database import Database
from tenancy.models import UsageRollupRow
from tenancy.store import TenantStore
from tenancy.usage import (
    USAGE_TOPIC,
    StorageSample,
    TrafficRecord,
    encode,
    partition_for,
    storage_id,
    traffic_id,
)

RESULTS = Path(__file__).parent / "results" / "billing_stream.json"
PARTITIONS = 12
TENANTS = [f"t{i:04d}" for i in range(1000)]
PROBE = "probe"
TICK_S = 0.1
MARK = 777_777_777_777  # the sequence in a value template, replaced per record
CATCH_UP_S = 600.0
SAMPLE_INTERVAL_MS = 60_000  # the gateway's `storage.sample.interval.ms` default


def log(message: str) -> None:
    print(f"[billing_stream] {message}", file=sys.stderr, flush=True)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


class Writer:
    """Traffic records at a steady rate with confluent-kafka (librdkafka batches, compresses and
    sends them off the Python thread), sequence numbers unique across the run. A record is its
    tenant's canonical value cut around the id (made once a second) with the id put in: the
    benchmark measures the stream, so the writer's own cost per record is kept to a few µs."""

    def __init__(self, bootstrap: str, sampled_partitions: int = 0) -> None:
        self.bootstrap = bootstrap
        self.sampled_partitions = sampled_partitions
        self.sequence = 0
        self.written = 0
        self.samples = 0
        self._sampled_at = -1
        self.probes: list[float] = []  # wall time each probe was acknowledged (monotonic)
        self.partition = {t: partition_for(t, PARTITIONS) for t in (*TENANTS, PROBE)}
        self._cut: dict[str, tuple[bytes, bytes]] = {}
        self._cut_second = -1

    def _value(self, tenant: str, now_ms: int, bytes_in: int) -> bytes:
        start = max(now_ms - 100, now_ms - now_ms % 3_600_000)
        record = TrafficRecord(
            traffic_id("gw", "bench", MARK), tenant, "sa-1", "app", "orders", start, now_ms,
            bytes_in=bytes_in, bytes_out=2, requests=1,
        )  # fmt: skip
        return encode(record)[1]

    def _templates(self, now_ms: int) -> dict[str, tuple[bytes, bytes]]:
        if now_ms // 1000 != self._cut_second:
            self._cut_second = now_ms // 1000
            marker = b"gw/bench/%d" % MARK
            self._cut = {}
            for tenant in TENANTS:
                head, tail = self._value(tenant, now_ms, 100).split(marker, 1)
                self._cut[tenant] = (head, tail)
        return self._cut

    def tick(self, producer: Producer, count: int, probe: bool) -> None:
        now_ms = int(time.time() * 1000)
        cut = self._templates(now_ms)
        first = self.sequence + 1
        for sequence in range(first, first + count):
            tenant = TENANTS[sequence % len(TENANTS)]
            head, tail = cut[tenant]
            key = b"gw/bench/%d" % sequence
            self._produce(producer, self.partition[tenant], key, head + key + tail, None)
        self.sequence += count
        if probe:
            self.sequence += 1
            key = b"gw/bench/%d" % self.sequence
            value = self._value(PROBE, now_ms, 1).replace(b"gw/bench/%d" % MARK, key, 1)
            self._produce(producer, self.partition[PROBE], key, value, self._acked)
        self._sample(producer, now_ms)
        producer.poll(0)
        self.written += count + int(probe)

    def _sample(self, producer: Producer, now_ms: int) -> None:
        """A round of storage samples when a sampling interval's boundary has passed."""
        at_ms = now_ms - now_ms % SAMPLE_INTERVAL_MS
        if not self.sampled_partitions or at_ms == self._sampled_at:
            return
        self._sampled_at = at_ms
        for i, tenant in enumerate(TENANTS):
            for index in range(self.sampled_partitions):
                size = 1_000_000 * (i + 1) + at_ms // 1000
                sample_id = storage_id("fleet", tenant, "orders", index, at_ms)
                key, value = encode(StorageSample(sample_id, tenant, "orders", index, size, at_ms))
                self._produce(producer, self.partition[tenant], key, value, None)
                self.samples += 1

    def _acked(self, error: Any, _message: Any) -> None:
        if error is not None:
            raise RuntimeError(f"probe not written: {error}")
        self.probes.append(time.monotonic())

    @staticmethod
    def _produce(producer: Producer, partition: int, key: bytes, value: bytes, ack: Any) -> None:
        while True:
            try:
                producer.produce(USAGE_TOPIC, value, key, partition=partition, on_delivery=ack)
                return
            except BufferError:  # librdkafka's queue is full: let it send
                producer.poll(0.05)

    def run(self, rate: int, seconds: float) -> float:
        """Write for `seconds` (all acknowledged); returns the seconds it took (more when the
        machine fell behind)."""
        per_tick = int(rate * TICK_S)
        ticks = int(seconds / TICK_S)
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": False,
                "acks": "1",
                "linger.ms": 20,
                "compression.type": "zstd",
                "batch.num.messages": 10_000,
                "queue.buffering.max.messages": 2_000_000,
                "queue.buffering.max.kbytes": 1_048_576,
            }
        )
        start = time.monotonic()
        for i in range(ticks):
            self.tick(producer, per_tick, probe=i % int(1 / TICK_S) == 0)
            due = start + (i + 1) * TICK_S
            while (delay := due - time.monotonic()) > 0:  # poll returns at the first event
                producer.poll(delay)
        left = producer.flush(CATCH_UP_S)
        if left:
            raise RuntimeError(f"{left} records not acknowledged")
        return time.monotonic() - start


class Monitor:
    """Polls the store: when each probe became visible."""

    def __init__(self, url: str) -> None:
        self.db = Database(url)
        self.seen: list[float] = []  # when probe k became visible (monotonic)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="lag-monitor", daemon=True)

    def visible(self) -> int:
        query = select(func.sum(UsageRollupRow.bytes_in)).where(UsageRollupRow.tenant_id == PROBE)
        try:
            with self.db.read() as session:
                return int(session.scalar(query) or 0)
        except OperationalError:  # SQLite busy while the stream commits
            return len(self.seen)

    def _run(self) -> None:
        while not self.stop.wait(0.5):
            count = self.visible()
            now = time.monotonic()
            while len(self.seen) < count:
                self.seen.append(now)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        self.db.dispose()


def cpu_seconds(pid: int, *, children: bool = False) -> float:
    """User + system CPU seconds of process `pid` so far (and of its children's, e.g. the
    stream's Spark JVM); 0 for a process that is gone."""
    pids = [pid]
    if children:
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit() and _stat(int(entry.name))[1:2] == [str(pid)]:
                pids.append(int(entry.name))  # a child: its ppid is `pid`
    total = 0.0
    for one in pids:
        fields = _stat(one)
        if len(fields) > 12:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _stat(pid: int) -> list[str]:
    """/proc/<pid>/stat after the command name: state, ppid, ... ([] when it is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return []


def _batches(log_path: Path) -> list[dict[str, Any]]:
    out = []
    for line in log_path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def _wait(check: Any, timeout: float, what: str, stream: BillingStreamProcess) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if stream.process.poll() is not None:
            tail = stream.log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(
                f"the stream exited with {stream.process.returncode}: {what}\n{tail}"
            )
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.5)


def stream_lag(
    rate: int = 50_000,
    seconds: float = 60.0,
    trigger: str = "10s",
    master: str = "local[2]",
    sampled_partitions: int = 3,
) -> dict[str, Any]:
    """Lag from a usage record written to its hour visible in the store, at `rate` records/s
    (and storage samples of `sampled_partitions` per tenant each minute)."""
    with tempfile.TemporaryDirectory(prefix="pier-bench-stream-") as tmp:
        folder = Path(tmp)
        url = f"sqlite:///{folder / 'tenancy.db'}"
        with TenantStore.open(url) as store:
            store.upgrade()
        broker = start_broker(folder / "broker")
        stream: BillingStreamProcess | None = None
        monitor = Monitor(url)
        try:
            asyncio.run(_create_usage(broker.bootstrap))
            writer = Writer(broker.bootstrap, sampled_partitions)
            stream = start_billing_stream(
                folder / "billing.log", url, broker.bootstrap, folder / "billing-state",
                trigger=trigger, master=master,
            )  # fmt: skip
            monitor.thread.start()
            writer.run(100, 1.0)  # warm-up: one probe, a few records
            log("waiting for the stream's first micro-batch (JVM start)")
            _wait(lambda: monitor.visible() >= 1, CATCH_UP_S, "the first micro-batch", stream)
            warm = len(writer.probes)
            log(f"writing {rate} records/s for {seconds} s (load {_load()})")
            load_before = _load()
            cpu_before = _cpu(stream, broker.process.pid)
            took = writer.run(rate, seconds)
            written_at = time.monotonic()
            load_after = _load()
            log(f"wrote {writer.written} records in {took:.1f} s; waiting to catch up")
            total = len(writer.probes)
            _wait(lambda: len(monitor.seen) >= total, CATCH_UP_S, "every probe visible", stream)
            caught_up = monitor.seen[total - 1] - written_at
            cpu = {
                k: round(v - cpu_before[k], 1) for k, v in _cpu(stream, broker.process.pid).items()
            }
            load_caught_up = _load()
            lags = [seen - wrote for wrote, seen in zip(writer.probes, monitor.seen, strict=False)]
            lags = lags[warm:]
            batches = _batches(stream.log_path)
        finally:
            monitor.close()
            if stream is not None:
                stream.stop()
            broker.stop()
    return {
        "rate_asked": rate,
        "rate_reached": round((writer.written - 101) / took),
        "storage_samples": writer.samples,
        "seconds": seconds,
        "trigger": trigger,
        "master": master,
        "lag_s": {
            "median": round(statistics.median(lags), 1),
            "p90": round(statistics.quantiles(lags, n=10)[-1], 1),
            "max": round(max(lags), 1),
            "probes": len(lags),
        },
        "lag_s_second_half": {  # the probes written after the first large micro-batches
            "median": round(statistics.median(lags[len(lags) // 2 :]), 1),
            "max": round(max(lags[len(lags) // 2 :]), 1),
        },
        "caught_up_s_after_writing": round(caught_up, 1),
        "micro_batches": [
            {
                "records": b.get("records"),
                "seconds": round(sum(b.get("seconds", {}).values()), 1),
                "phases": b.get("seconds", {}),
                "path": "one_pass" if "digest" in b.get("seconds", {}) else "exact",
            }
            for b in batches
        ],
        "cpu_s_writing_to_caught_up": cpu,
        "load": {"before": load_before, "after": load_after, "caught_up": load_caught_up},
    }


def _cpu(stream: BillingStreamProcess, broker_pid: int) -> dict[str, float]:
    return {
        "stream": cpu_seconds(stream.pid, children=True),
        "broker": cpu_seconds(broker_pid),
    }


async def _create_usage(bootstrap: str) -> None:
    async with Cluster(bootstrap) as cluster:
        result = await create_topics(cluster, [NewTopic(USAGE_TOPIC, PARTITIONS, 1)])
        assert result[USAGE_TOPIC] is None, result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rate", type=int, default=50_000, help="usage records per second")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long to write")
    parser.add_argument("--trigger", default="10s", help="the stream's micro-batch interval")
    parser.add_argument("--master", default="local[2]", help="the stream's Spark master")
    parser.add_argument(
        "--sampled-partitions", type=int, default=3, help="storage samples per tenant a minute"
    )
    args = parser.parse_args()
    result = stream_lag(args.rate, args.seconds, args.trigger, args.master, args.sampled_partitions)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
