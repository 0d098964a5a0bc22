"""Produce/consume benchmark of one Pier broker with confluent-kafka, compared to librdkafka's mock.

Usage: `python infra/bench/produce_consume.py [--quick] [--profile]` (see infra/bench/README.md).
Starts a broker through `infra.stack.start_broker` in a temporary directory, then:
1. produces 1,000,000 × 100 B and 100,000 × 1 KiB records, codecs none and lz4 (acks=1,
   linger.ms=5, batch.size=1 MiB), each workload to its own one-partition topic;
2. consumes every topic from offset 0;
3. runs the same produce workloads against librdkafka's mock cluster (no broker) for the ratio;
4. measures end-to-end latency at a steady 5 MB/s;
5. reads the broker's peak RSS (VmHWM).
The broker's CPU time (user + system, `/proc/<pid>/stat`) is read around each produce run and
reported as `broker_cpu_s_per_gb` per workload (CPU seconds per GB of record values produced).
Prints one JSON document, writes it to `results/produce_consume.json` (or `--output`) and a chart
beside it (`.png`). `--quick` divides record counts by 10 and runs latency for 5 s instead of 20;
`--profile` records the broker with py-spy during the produce phase (`results/produce_flamegraph.svg`).
Runs on the main thread (the latency run adds a consumer thread).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import replace
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from brokers.records.batch import HEADER_SIZE, parse_header
from brokers.records.compression import CODEC_NAMES
from infra.bench.latency import latency_run
from infra.bench.profiling import py_spy_recording
from infra.bench.report import document, write_chart, write_json
from infra.bench.throughput import Throughput, consume_run, produce_run
from infra.stack import BrokerProcess, start_broker

RESULTS = Path(__file__).resolve().parent / "results"
WORKLOADS = ((1_000_000, 100), (100_000, 1024))  # (records, record bytes)
CODECS = ("none", "lz4")
LATENCY_RATE_MB_S = 5.0
LATENCY_SECONDS, QUICK_LATENCY_SECONDS = 20.0, 5.0
MOCK = {"test.mock.num.brokers": 1, "bootstrap.servers": "mock"}


def topic_for(count: int, size: int, codec: str) -> str:
    return f"bench-{count}x{size}B-{codec}"


def create_topics(
    bootstrap: str, names: Sequence[str], connection: Mapping[str, Any] | None = None
) -> None:
    """One-partition topics; `connection` adds client settings (SASL through the gateway)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(connection or {})})
    futures = admin.create_topics([NewTopic(name, 1, 1) for name in names], operation_timeout=30)
    for future in futures.values():
        future.result(timeout=30)


def stored_codec(data_dir: Path, topic: str) -> str:
    """Codec of the first stored batch: librdkafka silently sends lz4 uncompressed to a broker it
    believes lacks the feature, and the numbers must say so."""
    segment = min((data_dir / f"{topic}-0").glob("*.log"))
    return CODEC_NAMES[parse_header(segment.read_bytes()[:HEADER_SIZE]).compression]


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` so far (fields 14 and 15 of /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmHWM for pid {pid}")


Plan = list[tuple[int, int, str]]  # (records, record bytes, codec) per workload


def progress(run: Throughput) -> None:
    label = f"{run.target} {run.phase} {run.records}x{run.record_bytes}B {run.codec}"
    print(f"{label}: {run.records_per_s:,.0f} records/s, {run.mb_per_s:,.1f} MB/s", file=sys.stderr)


def produce_phase(
    broker: BrokerProcess, plan: Plan, cpu_per_gb: dict[str, float]
) -> list[Throughput]:
    """Produce every workload; fills `cpu_per_gb` (broker CPU s per GB of values) per workload."""
    runs = []
    for count, size, codec in plan:
        topic = topic_for(count, size, codec)
        cpu_before = cpu_seconds(broker.pid)
        run = produce_run(
            "pier", {"bootstrap.servers": broker.bootstrap}, topic, count, size, codec
        )
        cpu = cpu_seconds(broker.pid) - cpu_before
        cpu_per_gb[f"{size}B/{codec}"] = round(cpu / (count * size / 1e9), 2)
        runs.append(replace(run, stored_codec=stored_codec(broker.data_dir, topic)))
        progress(runs[-1])
    return runs


def consume_phase(broker: BrokerProcess, plan: Plan) -> list[Throughput]:
    runs = []
    for count, size, codec in plan:
        runs.append(
            consume_run(broker.bootstrap, topic_for(count, size, codec), count, size, codec)
        )
        progress(runs[-1])
    return runs


def mock_phase(plan: Plan) -> list[Throughput]:
    runs = []
    for count, size, codec in plan:
        runs.append(produce_run("mock", MOCK, topic_for(count, size, codec), count, size, codec))
        progress(runs[-1])
    return runs


def run_pier(
    broker: BrokerProcess, scale: int, profile: bool, cpu_per_gb: dict[str, float]
) -> list[Throughput]:
    plan = [(count // scale, size, codec) for count, size in WORKLOADS for codec in CODECS]
    create_topics(broker.bootstrap, [topic_for(*work) for work in plan] + ["bench-latency"])
    recording = py_spy_recording(broker.pid, RESULTS / "produce_flamegraph.svg")
    with recording if profile else nullcontext():
        produced = produce_phase(broker, plan, cpu_per_gb)
    return produced + consume_phase(broker, plan) + mock_phase(plan)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument(
        "--quick", action="store_true", help="10× fewer records, shorter latency run"
    )
    parser.add_argument(
        "--profile", action="store_true", help="py-spy flamegraph of the produce phase"
    )
    parser.add_argument(
        "--output",
        type=Path,
        default=RESULTS / "produce_consume.json",
        help="where the JSON goes (the chart goes beside it, .png); to keep before/after runs",
    )
    args = parser.parse_args(argv)
    scale = 10 if args.quick else 1
    cpu_per_gb: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="pier-bench-") as scratch:
        broker = start_broker(Path(scratch) / "data")
        try:
            runs = run_pier(broker, scale, args.profile, cpu_per_gb)
            seconds = QUICK_LATENCY_SECONDS if args.quick else LATENCY_SECONDS
            latency = latency_run(broker.bootstrap, "bench-latency", LATENCY_RATE_MB_S, seconds)
            peak = peak_rss_kib(broker.pid)
        finally:
            broker.stop()
    doc = document(runs, latency, peak, args.quick) | {"broker_cpu_s_per_gb": cpu_per_gb}
    print(write_json(doc, args.output))
    write_chart(runs, latency, args.output.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
