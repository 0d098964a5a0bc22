"""The gateway benchmark's output: one JSON document and a five-panel PNG chart.

Owns: assembling the document from the phases' results (throughput runs direct and through the
gateway with their ratios, latency percentiles and the added p99, SCRAM login rates, RSS per idle
connection, the quiet tenant's latency alone and next to a noisy one), each figure beside its
target from issue 10, plus settings and the environment (`cluster_report.environment`, which
records the load average); and drawing it with matplotlib's Agg backend. The JSON is written by
`report.write_json`. Pure apart from the file written; call from one thread.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

from infra.bench.cluster_report import environment
from infra.bench.gateway_logins import LoginRun
from infra.bench.latency import percentile
from infra.bench.noisy_neighbour import NoisyReport
from infra.bench.report import workload
from infra.bench.throughput import Throughput

matplotlib.use("Agg")  # before pyplot is imported: render to files only

import matplotlib.pyplot as plt

TARGETS = {
    "throughput_ratio_min": 0.85,
    "added_p99_ms_max": 1.0,
    "kib_per_idle_connection_max": 30.0,
    "quiet_p99_change_pct_max": 20.0,
}


def ratios(runs: Sequence[Throughput]) -> dict[str, dict[str, float]]:
    """Gateway records/s ÷ direct records/s, per phase and workload."""
    direct = {(r.phase, workload(r)): r for r in runs if r.target == "direct"}
    found: dict[str, dict[str, float]] = {}
    for run in runs:
        base = direct.get((run.phase, workload(run)))
        if run.target == "gateway" and base is not None:
            ratio = round(run.records_per_s / base.records_per_s, 3)
            found.setdefault(run.phase, {})[workload(run)] = ratio
    return found


def percentiles(ordered: Sequence[float]) -> dict[str, float | int]:
    return {
        "records": len(ordered),
        "p50_ms": round(statistics.median(ordered), 3),
        "p99_ms": round(percentile(ordered, 0.99), 3),
        "p999_ms": round(percentile(ordered, 0.999), 3),
        "max_ms": round(ordered[-1], 3),
    }


def latency_section(
    direct: Sequence[float], gateway: Sequence[float], rate_mb_s: float, seconds: float
) -> dict[str, Any]:
    d, g = percentiles(direct), percentiles(gateway)
    return {
        "rate_mb_s": rate_mb_s,
        "seconds": seconds,
        "direct": d,
        "gateway": g,
        "added_p50_ms": round(g["p50_ms"] - d["p50_ms"], 3),
        "added_p99_ms": round(g["p99_ms"] - d["p99_ms"], 3),
        "added_p999_ms": round(g["p999_ms"] - d["p999_ms"], 3),
        "target_added_p99_ms": TARGETS["added_p99_ms_max"],
    }


def memory_section(
    connections: int, gateway_kib: tuple[int, int], broker_kib: tuple[int, int]
) -> dict[str, Any]:
    """RSS (VmRSS, KiB) before and after opening the connections, per connection."""
    return {
        "connections": connections,
        "gateway_rss_before_kib": gateway_kib[0],
        "gateway_rss_after_kib": gateway_kib[1],
        "kib_per_connection": round((gateway_kib[1] - gateway_kib[0]) / connections, 2),
        "broker_kib_per_connection": round((broker_kib[1] - broker_kib[0]) / connections, 2),
        "target_kib_per_connection": TARGETS["kib_per_idle_connection_max"],
    }


def noisy_section(
    alone: Sequence[Sequence[float]],
    beside: Sequence[Sequence[float]],
    noisy: Sequence[NoisyReport],
    settings: Mapping[str, float],
) -> dict[str, Any]:
    """Per round, the quiet tenant's latencies alone and beside the noisy one; pooled percentiles
    and the change of p99, and what the noisy tenant got acknowledged."""
    a = percentiles(sorted(x for run in alone for x in run))
    b = percentiles(sorted(x for run in beside for x in run))
    acked = sum(sum(r.acked_bytes_per_s) for r in noisy)
    failures: dict[str, int] = {}
    for report in noisy:
        for name, count in report.failures.items():
            failures[name] = failures.get(name, 0) + count
    return {
        **settings,
        "quiet_alone": a,
        "quiet_beside_noisy": b,
        "quiet_p99_change_pct": round((b["p99_ms"] / a["p99_ms"] - 1) * 100, 1),
        "quiet_p99_ms_per_round": {
            "alone": [round(percentile(run, 0.99), 3) for run in alone],
            "beside_noisy": [round(percentile(run, 0.99), 3) for run in beside],
        },
        "noisy_acked_mb_per_s": round(acked / 1e6 / sum(int(r.seconds) for r in noisy), 2),
        "noisy_acked_mb_each_second": [
            [round(v / 1e6, 2) for v in r.acked_bytes_per_s] for r in noisy
        ],
        "noisy_throttle_events": sum(r.throttles for r in noisy),
        "noisy_throttle_ms_max": max(r.throttle_ms_max for r in noisy),
        "noisy_failed_deliveries": failures,
        "target_quiet_p99_change_pct": TARGETS["quiet_p99_change_pct_max"],
    }


def document(
    settings: Mapping[str, Any],
    runs: Sequence[Throughput],
    latency: Mapping[str, Any],
    logins: Sequence[LoginRun],
    memory: Mapping[str, Any],
    noisy: Mapping[str, Any],
    quick: bool,
) -> dict[str, Any]:
    return {
        "benchmark": "gateway",
        "quick": quick,
        "settings": dict(settings),
        "throughput": {
            "runs": [r.as_json() for r in runs],
            "ratio_gateway_to_direct": ratios(runs),
            "target_ratio": TARGETS["throughput_ratio_min"],
        },
        "latency": dict(latency),
        "scram_logins": {run.kind: run.as_json() for run in logins},
        "idle_connection_memory": dict(memory),
        "noisy_neighbour": dict(noisy),
        "environment": environment(),
    }


def write_chart(doc: Mapping[str, Any], path: Path) -> None:
    """Throughput per workload; latency percentiles; logins/s; KiB per connection; quiet p99."""
    figure, axes = plt.subplots(
        1, 5, figsize=(22, 5), gridspec_kw={"width_ratios": [4, 2, 1, 1, 1]}
    )
    _throughput(axes[0], doc["throughput"]["runs"])
    _latency(axes[1], doc["latency"])
    logins = doc["scram_logins"]
    axes[2].bar(list(logins), [r["logins_per_s"] for r in logins.values()], color="tab:purple")
    axes[2].set_title("SCRAM logins/s")
    memory = doc["idle_connection_memory"]
    axes[3].bar(
        ["gateway", "broker"], [memory["kib_per_connection"], memory["broker_kib_per_connection"]]
    )
    axes[3].axhline(
        memory["target_kib_per_connection"], color="tab:red", linestyle="--", label="target"
    )
    axes[3].set_title(f"KiB/idle conn. (×{memory['connections']})")
    axes[3].legend()
    noisy = doc["noisy_neighbour"]
    axes[4].bar(
        ["alone", "beside noisy"],
        [noisy["quiet_alone"]["p99_ms"], noisy["quiet_beside_noisy"]["p99_ms"]],
        color=["tab:green", "tab:orange"],
    )
    axes[4].set_ylabel("ms")
    axes[4].set_title(f"Quiet p99 ({noisy['quiet_p99_change_pct']:+.0f} %)")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _throughput(axes: Any, runs: Sequence[Mapping[str, Any]]) -> None:
    labels = sorted(
        {(r["phase"], r["record_bytes"], r["codec"]) for r in runs},
        key=lambda k: (k[0] != "produce", k[1], k[2]),
    )
    width = 0.4
    for index, target in enumerate(("direct", "gateway")):
        by_label = {
            (r["phase"], r["record_bytes"], r["codec"]): r["mb_per_s"]
            for r in runs
            if r["target"] == target
        }
        xs = [i + index * width for i in range(len(labels))]
        axes.bar(xs, [by_label.get(label, 0.0) for label in labels], width, label=target)
    names = [f"{phase}\n{size}B/{codec}" for phase, size, codec in labels]
    axes.set_xticks([i + width / 2 for i in range(len(labels))], names)
    axes.set_ylabel("MB/s")
    axes.set_title("Throughput, direct vs through the gateway (confluent-kafka, acks=1)")
    axes.legend()


def _latency(axes: Any, latency: Mapping[str, Any]) -> None:
    names = ("p50_ms", "p99_ms", "p999_ms")
    width = 0.4
    for index, target in enumerate(("direct", "gateway")):
        xs = [i + index * width for i in range(len(names))]
        axes.bar(xs, [latency[target][n] for n in names], width, label=target)
    axes.set_xticks([i + width / 2 for i in range(len(names))], ["p50", "p99", "p99.9"])
    axes.set_ylabel("ms")
    axes.set_title(f"End-to-end latency at {latency['rate_mb_s']:g} MB/s")
    axes.legend()
