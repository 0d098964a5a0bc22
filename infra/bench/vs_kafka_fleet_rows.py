"""The connections and churn workloads of `infra.bench.vs_kafka_workloads` alone, side by side.

Owns the re-measurement of issue 25's "1,000 connections of which 100 produce" and topic churn
rows, (`cluster`) of `vs_kafka.cluster_part` with the `--fleet` sizes: 3 nodes, an RF 3
acks=all produce, then 10,000 partitions, with the peak RSS before and with them and the time
until all are led, (`partitions`) of 5,000 partitions created on one node, then restarted, and
(`churn_elsewhere`) of the churn against a second server while the bystander produces to the
first alone (the machine's share of the churn row): each repetition starts Pier and Apache Kafka
4.1.1 afresh (alternating which goes first),
and optionally Pier from an earlier checkout as "pier-before" (a before/after under the same
load), and runs the chosen workloads on each; per row it reports every system's median with the
min-max spread, the ratios to Kafka and the 1-minute load average range (the clients share the
machine with the servers).

    .venv/bin/python -m infra.bench.vs_kafka_fleet_rows [--workloads connections churn
        churn_elsewhere cluster partitions]
        [--repetitions 3] [--short] [--baseline DIR]

JSON on stdout, a Markdown table on stderr. Blocking; each server is stopped and its directory
removed before the next starts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from infra import zookeeper
from infra.bench import vs_kafka as vk
from infra.bench.vs_kafka_rows import _baseline_program
from infra.bench.vs_kafka_workloads import (
    CHURN_ELSEWHERE,
    FLEET_ROWS,
    FULL_WORKLOADS,
    RECORD,
    SHORT_WORKLOADS,
    WorkloadSizes,
    churn,
    connections,
    dig,
)
from infra.broker import PIER_PROGRAM, start_broker

WORKLOADS: dict[str, Callable[[str, WorkloadSizes, Callable[..., None]], dict[str, Any]]] = {
    "connections": connections,
    "churn": churn,
}
_SIDE_BY_SIDE_ROWS = tuple(row for row in FLEET_ROWS if row[1][0] in (*WORKLOADS, CHURN_ELSEWHERE))
CLUSTER = "cluster"
PARTITIONS = "partitions"  # vs_kafka's 5,000 partitions on one node: create, then restart
# (row, path into one cluster run's result, better)
_CLUSTER_ROWS = (
    ("3 nodes peak RSS MiB", ("cluster", "peak_rss_mib"), "lower"),
    ("3 nodes peak RSS MiB with 10000 partitions", ("cluster", "wide", "peak_rss_mib"), "lower"),
    ("3 nodes: 10000 partitions create s", ("cluster", "wide", "create_s"), "lower"),
    ("cluster-produce 1024B/acks=all/lz4/rf3 MB/s", ("cluster", "produce_mb_s"), "higher"),
    ("cluster-produce server CPU s/GB", ("cluster", "server_cpu_s_per_gb"), "lower"),
    ("5000 partitions create s", ("partitions", "create_s"), "lower"),
    ("5000 partitions restart s", ("partitions", "restart_s"), "lower"),
)


BASELINE = "pier-before"


def side_by_side(
    names: Sequence[str],
    repetitions: int,
    sizes: WorkloadSizes,
    baseline: Path | None = None,
    cluster_sizes: vk.Sizes = vk.FLEET,
) -> dict[str, Any]:
    """Each repetition starts Pier and Kafka afresh (alternating which goes first) and runs the
    named workloads on each: per row both systems' medians, min-max spreads and the ratio of the
    medians, with the 1-minute load average of every run (the clients share the machine).
    `baseline`: also Pier from that checkout (a `git archive` of an earlier commit with the
    native module copied in) as "pier-before", a before/after under the same load."""
    systems = (*vk.SYSTEMS, BASELINE) if baseline is not None else vk.SYSTEMS
    runs: dict[str, list[dict[str, Any]]] = {system: [] for system in systems}

    def start(system: str, root: Path) -> Any:
        if system != BASELINE:
            return vk.start(system, root, 1)
        assert baseline is not None
        program = _baseline_program(baseline)
        return vk.PierSingle(start_broker(root / "data", wait=120, program=program))

    single = [name for name in names if name not in (CLUSTER, PARTITIONS)]
    with tempfile.TemporaryDirectory(prefix="vs-kafka-workloads-") as scratch:
        for rep in range(repetitions):
            order = systems if rep % 2 == 0 else systems[::-1]
            for system in order:
                found: dict[str, Any] = {}
                if CLUSTER in names:
                    vk.log(f"repetition {rep + 1}/{repetitions}: {system} cluster")
                    found[CLUSTER] = _cluster(system, Path(scratch), baseline, cluster_sizes)
                if PARTITIONS in names:
                    vk.log(f"repetition {rep + 1}/{repetitions}: {system} partitions")
                    found[PARTITIONS] = _partitions(system, Path(scratch), baseline, cluster_sizes)
                if not single:
                    runs[system].append(found)
                    continue
                server = start(system, Path(tempfile.mkdtemp(dir=scratch)))
                try:
                    for name in single:
                        vk.log(f"repetition {rep + 1}/{repetitions}: {system} {name}")
                        before = vk.cpu_seconds(server.pids())
                        if name == CHURN_ELSEWHERE:  # the churn on a second server
                            second = partial(start, system, Path(tempfile.mkdtemp(dir=scratch)))
                            result = _churn_elsewhere(server, second, sizes)
                        else:
                            result = WORKLOADS[name](server.bootstrap, sizes, vk.create_topics)
                        cpu_s = max(0.0, vk.cpu_seconds(server.pids()) - before)
                        result["server_cpu_s"] = round(cpu_s, 2)
                        result["loadavg_1m"] = round(os.getloadavg()[0], 2)
                        if name == "connections":
                            gb = result["records"] * RECORD / 1e9
                            result["server_cpu_s_per_gb"] = round(cpu_s / gb, 2) if gb else 0.0
                        found[name] = result
                    runs[system].append(found)
                finally:
                    server.close()
    rows: dict[str, dict[str, Any]] = {}
    for row, path, better in (*_SIDE_BY_SIDE_ROWS, *_CLUSTER_ROWS):
        if path[0] not in names:
            continue
        values = {s: [dig(run, path) for run in runs[s]] for s in systems}
        medians = {s: statistics.median(values[s]) for s in systems}
        kafka = medians["kafka"]
        rows[row] = {"better": better, **medians,
                     **{f"{s}_spread": [min(values[s]), max(values[s])] for s in systems},
                     **{f"{s}_over_kafka": round(medians[s] / kafka, 3) if kafka
                        else float("nan") for s in systems if s != "kafka"}}  # fmt: skip
    loads = [run[name]["loadavg_1m"] for s in systems for run in runs[s] for name in names]
    return {"rows": rows, "loadavg_1m": [min(loads), max(loads)], "runs": runs}


def _churn_elsewhere(
    bystanders: Any, start: Callable[[], Any], sizes: WorkloadSizes
) -> dict[str, Any]:
    """`churn` against a second server `start` makes, the bystander on `bystanders` alone."""
    other = start()
    try:
        return churn(other.bootstrap, sizes, vk.create_topics, bystander_at=bystanders.bootstrap)
    finally:
        other.close()


# What ZooKeeper ran with before 2207b46 (-Xmn8m), for a pier-before of an earlier checkout.
_ZOOKEEPER_FLAGS_BEFORE = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1")


def _partitions(
    system: str, scratch: Path, baseline: Path | None, sizes: vk.Sizes
) -> dict[str, Any]:
    """`vs_kafka.partition_scale` (its 10 x 500 partitions with the full sizes) on a fresh
    one-node `system`: the seconds to create them and to restart until all are led again."""
    program = _baseline_program(baseline) if system == BASELINE and baseline else PIER_PROGRAM
    with vk.running("pier" if system == BASELINE else system, 1, scratch, program) as server:
        found: dict[str, Any] = dict(vk.partition_scale(system, server, sizes))
    found["loadavg_1m"] = round(os.getloadavg()[0], 2)
    return found


def _cluster(system: str, scratch: Path, baseline: Path | None, sizes: vk.Sizes) -> dict[str, Any]:
    """`vs_kafka.cluster_part` with `sizes` on a fresh 3-node `system`, as a row."""
    program: tuple[str, ...] = PIER_PROGRAM
    flags = zookeeper.JVM_FLAGS
    if system == BASELINE:
        assert baseline is not None
        program, system = _baseline_program(baseline), "pier"
        zookeeper.JVM_FLAGS = _ZOOKEEPER_FLAGS_BEFORE  # read at each start
    try:
        runs, extra = vk.cluster_part(system, sizes, scratch, program)
    finally:
        zookeeper.JVM_FLAGS = flags
    (run,) = runs
    return {**extra, "produce_mb_s": round(run.mb_per_s, 2), "server_cpu_s_per_gb":
            round(run.cpu_s_per_gb, 2), "loadavg_1m": round(os.getloadavg()[0], 2)}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m infra.bench.vs_kafka_workloads [--workloads connections churn]
    [--repetitions 3] [--short]`: JSON on stdout, a Markdown table on stderr."""
    parser = argparse.ArgumentParser(description=side_by_side.__doc__)
    parser.add_argument("--workloads", nargs="+", choices=sorted([*WORKLOADS, CHURN_ELSEWHERE, CLUSTER, PARTITIONS]),
                        default=sorted(WORKLOADS))  # fmt: skip
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--short", action="store_true", help="tiny sizes: proves the code path")
    parser.add_argument("--baseline", type=Path, help="an earlier checkout run as pier-before")
    args = parser.parse_args(argv)
    sizes = SHORT_WORKLOADS if args.short else FULL_WORKLOADS
    cluster_sizes = vk.SHORT if args.short else vk.FLEET  # FLEET's partitions: FULL's 10 x 500
    found = side_by_side(args.workloads, args.repetitions, sizes, args.baseline, cluster_sizes)
    print(json.dumps(found, indent=2, allow_nan=True))
    systems = [s for s in ("pier", BASELINE, "kafka") if s in found["runs"]]
    lines = ["| measure | " + " | ".join(f"{s} (min-max)" for s in systems)
             + " | " + " | ".join(f"{s}/kafka" for s in systems if s != "kafka") + " | better |",
             "|---|" + "---:|" * (2 * len(systems) - 1) + "---|"]  # fmt: skip
    for name, row in found["rows"].items():
        cells = [f"{row[s]:.3g} ({row[s + '_spread'][0]:.3g}-{row[s + '_spread'][1]:.3g})"
                 for s in systems]  # fmt: skip
        ratios = [str(row[f"{s}_over_kafka"]) for s in systems if s != "kafka"]
        lines.append(f"| {name} | " + " | ".join(cells + ratios) + f" | {row['better']} |")
    print("\n".join(lines) + f"\n\nload average (1 min) {found['loadavg_1m']}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
