"""Benchmark output: one JSON document (stdout and a file) and a PNG bar chart.

Owns: assembling the result document (runs, Pier/mock ratios, latency, peak RSS, environment) and
drawing it with matplotlib's Agg backend (no display needed). Pure apart from the two files
written; call from one thread.
"""

from __future__ import annotations

import json
import os
import platform
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import confluent_kafka
import matplotlib

from infra.bench.latency import Latency
from infra.bench.throughput import Throughput

matplotlib.use("Agg")  # before pyplot is imported: render to files only

import matplotlib.pyplot as plt


def workload(run: Throughput) -> str:
    return f"{run.record_bytes}B/{run.codec}"


def ratios(runs: Sequence[Throughput]) -> dict[str, float]:
    """Pier produce records/s divided by the mock cluster's, per workload."""
    mock = {workload(r): r for r in runs if r.target == "mock"}
    return {
        workload(r): round(r.records_per_s / mock[workload(r)].records_per_s, 3)
        for r in runs
        if r.target == "pier" and r.phase == "produce" and workload(r) in mock
    }


def document(
    runs: Sequence[Throughput], latency: Latency, peak_rss_kib: int, quick: bool
) -> dict[str, Any]:
    return {
        "benchmark": "produce_consume",
        "quick": quick,
        "runs": [r.as_json() for r in runs],
        "ratio_pier_to_mock_produce": ratios(runs),
        "latency": latency.as_json(),
        "broker_peak_rss_mib": round(peak_rss_kib / 1024, 1),
        "environment": {
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "platform": platform.platform(),
            "confluent_kafka": _first(confluent_kafka.version()),
            "librdkafka": _first(confluent_kafka.libversion()),
        },
    }


def _first(version: Any) -> str:
    """confluent-kafka's version() is a string in some releases, (string, int) in others."""
    return str(version[0] if isinstance(version, tuple) else version)


def write_json(doc: dict[str, Any], path: Path) -> str:
    text = json.dumps(doc, indent=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")
    return text


def write_chart(runs: Sequence[Throughput], latency: Latency, path: Path) -> None:
    """Left: MB/s per workload for Pier produce, mock produce, Pier consume. Right: latency."""
    workloads = sorted({workload(r) for r in runs}, key=lambda w: (int(w.split("B")[0]), w))
    series = [("pier", "produce"), ("mock", "produce"), ("pier", "consume")]
    figure, (throughput_axes, latency_axes) = plt.subplots(
        1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [3, 1]}
    )
    width = 0.8 / len(series)
    for index, (target, phase) in enumerate(series):
        by_workload = {
            workload(r): r.mb_per_s for r in runs if (r.target, r.phase) == (target, phase)
        }
        xs = [i + index * width for i in range(len(workloads))]
        throughput_axes.bar(
            xs, [by_workload.get(w, 0.0) for w in workloads], width, label=f"{target} {phase}"
        )
    throughput_axes.set_xticks([i + width for i in range(len(workloads))], workloads)
    throughput_axes.set_ylabel("MB/s")
    throughput_axes.set_yscale("log")
    throughput_axes.set_title("Throughput (confluent-kafka, acks=1, linger.ms=5)")
    throughput_axes.legend()
    latency_axes.bar(
        ["p50", "p99"], [latency.p50_ms, latency.p99_ms], color=["tab:green", "tab:red"]
    )
    latency_axes.set_ylabel("ms")
    latency_axes.set_title(f"End-to-end latency at {latency.rate_mb_s:g} MB/s")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
