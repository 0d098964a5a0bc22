"""Transactions benchmark: transactional against idempotent produce, commit latency, and
read_committed against read_uncommitted consume, with confluent-kafka (librdkafka).

Usage: `python infra/bench/transactions.py [--quick] [--target pier|kafka] [--output PATH]` from
the repository root. Starts one server in a temporary directory (Pier through
`infra.stack.start_broker`; `--target kafka`: Apache Kafka 4.1.1 in KRaft through
`infra.reference_kafka`, single-node settings), creates one-partition topics and, in one run:
1. warm-up: an unmeasured idempotent produce (the server's first batches, a JVM's compilation)
   and, before the transactional run, one unmeasured transaction of the same producer;
2. idempotent produce: 150,000 x 1 KiB records, `enable.idempotence`, acks=all, linger.ms=5,
   batch.size=1 MiB, no compression;
3. transactional produce: the same records under a `transactional.id`, 750 records per
   transaction (begin, produce, flush, commit), the same settings. The clock runs from the first
   begin to the last commit. Each `commit_transaction` is timed on its own after the flush, so it
   is the commit alone (EndTxn, the markers, the coordinator's log writes): p50/p99/max;
4. consume of the transactional topic from offset 0 with `isolation.level` read_uncommitted and
   read_committed (librdkafka fetches up to the last stable offset and drops the markers), each
   twice in the order U, C, C, U, the faster run of each reported.
Prints one JSON document (stdout and `--output`, default `infra/bench/results/transactions.json`,
or `transactions_kafka.json` for Kafka) and a chart beside it (`.png`). `--quick` moves 10x fewer
records (20 transactions). Blocking, single-threaded; progress on stderr.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import confluent_kafka
import matplotlib
from confluent_kafka import Producer

from infra import reference_kafka
from infra.bench.latency import percentile
from infra.bench.produce_consume import create_topics
from infra.bench.report import write_json
from infra.bench.throughput import (
    PRODUCER_SETTINGS,
    Throughput,
    consume_run,
    produce_run,
    value_pool,
)
from infra.stack import start_broker

matplotlib.use("Agg")  # before pyplot is imported: render to files only

import matplotlib.pyplot as plt

RESULTS = Path(__file__).resolve().parent / "results"
RECORDS, QUICK_RECORDS = 150_000, 15_000
RECORD_BYTES = 1024
PER_TRANSACTION = 750
TIMEOUT_S = 120.0
TRANSACTION_TIMEOUT_MS = 60_000  # the Java and librdkafka default
EXACTLY_ONCE = {"acks": "all", "enable.idempotence": True}
LEVELS = ("read_uncommitted", "read_committed")


@dataclass(frozen=True, slots=True)
class Commits:
    """Seconds of each `commit_transaction` call (after its records were flushed)."""

    seconds: tuple[float, ...]

    def as_json(self) -> dict[str, Any]:
        ordered = sorted(s * 1000 for s in self.seconds)
        return {
            "transactions": len(ordered),
            "p50_ms": round(percentile(ordered, 0.50), 2),
            "p99_ms": round(percentile(ordered, 0.99), 2),
            "max_ms": round(ordered[-1], 2),
        }


@contextmanager
def server(target: str, scratch: Path) -> Iterator[str]:
    """A fresh single-node server of `target`; yields its bootstrap servers."""
    if target == "kafka":
        cluster = reference_kafka.start_kafka(scratch / "kafka", nodes=1)
        try:
            yield cluster.bootstrap
        finally:
            cluster.close()
        return
    broker = start_broker(scratch / "data", wait=120)
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


def transactional_run(
    bootstrap: str,
    topic: str,
    count: int,
    record_bytes: int,
    per_transaction: int,
    *,
    warm_up_topic: str,
) -> tuple[Throughput, Commits]:
    """One unmeasured transaction to `warm_up_topic` first: the first commit of a producer also
    pays for finding its coordinator and the state topic's first writes."""
    producer = Producer(
        {
            **PRODUCER_SETTINGS,
            **EXACTLY_ONCE,
            "bootstrap.servers": bootstrap,
            "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS,
            "message.timeout.ms": TRANSACTION_TIMEOUT_MS,  # librdkafka: at most the above
            "compression.type": "none",
        }
    )
    producer.init_transactions(TIMEOUT_S)
    pool = value_pool(record_bytes)
    producer.begin_transaction()
    for value in pool[:per_transaction]:
        _produce(producer, warm_up_topic, value)
    producer.commit_transaction(TIMEOUT_S)
    commits: list[float] = []
    start = time.perf_counter()
    for first in range(0, count, per_transaction):
        producer.begin_transaction()
        for i in range(first, min(first + per_transaction, count)):
            _produce(producer, topic, pool[i % len(pool)])
        if producer.flush(TIMEOUT_S):
            raise RuntimeError(f"transactional produce: records of {topic} unacknowledged")
        started = time.perf_counter()
        producer.commit_transaction(TIMEOUT_S)
        commits.append(time.perf_counter() - started)
    seconds = time.perf_counter() - start
    run = Throughput("transactional", "produce", count, record_bytes, "none", seconds)
    return run, Commits(tuple(commits))


def _produce(producer: Producer, topic: str, value: bytes) -> None:
    while True:
        try:
            producer.produce(topic, value)
            return
        except BufferError:
            producer.poll(0.01)


def consume_runs(bootstrap: str, topic: str, count: int) -> list[Throughput]:
    """Each isolation level twice, in the order uncommitted, committed, committed, uncommitted
    (neither always reads second, after the other warmed the caches); the faster of each."""
    best: dict[str, Throughput] = {}
    for level in LEVELS + LEVELS[::-1]:
        connection = {"isolation.level": level, "group.id": f"bench-{level}"}
        run = consume_run(
            bootstrap, topic, count, RECORD_BYTES, "none", connection=connection, target=level
        )
        progress(run)
        if level not in best or run.seconds < best[level].seconds:
            best[level] = run
    return [best[level] for level in LEVELS]


def progress(run: Throughput) -> None:
    print(
        f"{run.target} {run.phase}: {run.records_per_s:,.0f} records/s, {run.mb_per_s:,.1f} MB/s",
        file=sys.stderr,
    )


def measure(bootstrap: str, count: int) -> tuple[list[Throughput], Commits]:
    topics = [f"bench-{name}-{uuid.uuid4().hex[:6]}" for name in ("warm", "idem", "txn")]
    create_topics(bootstrap, topics)
    connection = {"bootstrap.servers": bootstrap, **EXACTLY_ONCE}
    produce_run("warm-up", connection, topics[0], max(count // 10, 1), RECORD_BYTES, "none")
    idempotent = produce_run("idempotent", connection, topics[1], count, RECORD_BYTES, "none")
    progress(idempotent)
    transactional, commits = transactional_run(
        bootstrap, topics[2], count, RECORD_BYTES, PER_TRANSACTION, warm_up_topic=topics[0]
    )
    progress(transactional)
    commit = commits.as_json()
    print(f"commit: p50 {commit['p50_ms']} ms, p99 {commit['p99_ms']} ms", file=sys.stderr)
    return [idempotent, transactional, *consume_runs(bootstrap, topics[2], count)], commits


def document(
    target: str, quick: bool, runs: Sequence[Throughput], commits: Commits
) -> dict[str, Any]:
    by_name = {r.target: r for r in runs}

    def ratio(numerator: str, denominator: str) -> float:
        return round(by_name[numerator].records_per_s / by_name[denominator].records_per_s, 3)

    return {
        "benchmark": "transactions",
        "target": target,
        "quick": quick,
        "record_bytes": RECORD_BYTES,
        "records_per_transaction": PER_TRANSACTION,
        "produce": {name: by_name[name].as_json() for name in ("idempotent", "transactional")},
        "ratio_transactional_to_idempotent": ratio("transactional", "idempotent"),
        "commit_latency": commits.as_json(),
        "consume": {
            name: by_name[name].as_json() for name in ("read_uncommitted", "read_committed")
        },
        "ratio_read_committed_to_read_uncommitted": ratio("read_committed", "read_uncommitted"),
        "environment": environment(),
    }


def environment() -> dict[str, Any]:
    def first(version: Any) -> str:
        return str(version[0] if isinstance(version, tuple) else version)

    return {
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "confluent_kafka": first(confluent_kafka.version()),
        "librdkafka": first(confluent_kafka.libversion()),
    }


def write_chart(doc: Mapping[str, Any], path: Path) -> None:
    """Left: MB/s of the four runs. Right: commit latency p50/p99."""
    runs = [
        ("idempotent\nproduce", doc["produce"]["idempotent"]),
        ("transactional\nproduce", doc["produce"]["transactional"]),
        ("read_uncommitted\nconsume", doc["consume"]["read_uncommitted"]),
        ("read_committed\nconsume", doc["consume"]["read_committed"]),
    ]
    figure, (throughput_axes, latency_axes) = plt.subplots(
        1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [3, 1]}
    )
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red"]
    throughput_axes.bar([n for n, _ in runs], [r["mb_per_s"] for _, r in runs], color=colours)
    throughput_axes.set_ylabel("MB/s")
    throughput_axes.set_title(
        f"{doc['target']}: 1 KiB records, {PER_TRANSACTION} per transaction (confluent-kafka)"
    )
    latency = doc["commit_latency"]
    latency_axes.bar(["p50", "p99"], [latency["p50_ms"], latency["p99_ms"]], color=colours[2:])
    latency_axes.set_ylabel("ms")
    latency_axes.set_title(f"commit_transaction ({latency['transactions']} commits)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="10x fewer records")
    parser.add_argument("--target", choices=("pier", "kafka"), default="pier")
    parser.add_argument("--output", type=Path, default=None, help="the JSON (chart beside, .png)")
    args = parser.parse_args(argv)
    suffix = "" if args.target == "pier" else f"_{args.target}"
    output = args.output or RESULTS / f"transactions{suffix}.json"
    count = QUICK_RECORDS if args.quick else RECORDS
    with (
        tempfile.TemporaryDirectory(prefix="pier-bench-txn-") as scratch,
        server(args.target, Path(scratch)) as bootstrap,
    ):
        runs, commits = measure(bootstrap, count)
    doc = document(args.target, args.quick, runs, commits)
    print(write_json(doc, output))
    write_chart(doc, output.with_suffix(".png"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
