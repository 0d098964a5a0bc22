"""The gateway benchmark's output: one JSON document and a five-panel PNG chart.

Owns: assembling the document from the phases' results (throughput runs direct and through the
gateway with their ratios, latency percentiles and the added p99, SCRAM login rates, RSS per idle
connection, the quiet tenant's latency alone and next to a noisy one, CPU seconds per GB of the
gateway and the broker, one vs two workers), each figure beside its target (issues 10 and 24),
each section present only when its phase ran, plus settings and the environment (`cluster_report.environment`, which
records the load average); and drawing it with matplotlib's Agg backend. The JSON is written by
`report.write_json`. Pure apart from the file written; call from one thread.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
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
    "throughput_ratio_min": 0.9,
    "cpu_per_gb_gateway_to_broker_max": 0.5,
    "workers_2_to_1_min": 1.6,
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


def cpu_row(
    run: Throughput, gateway: tuple[float, float], broker: tuple[float, float]
) -> dict[str, Any]:
    """CPU seconds (user, system) used by the gateway and the broker during `run`, and per GB of
    record values moved."""
    gb = run.records * run.record_bytes / 1e9
    gateway_cpu_s, broker_cpu_s = sum(gateway), sum(broker)
    return {
        "target": run.target,
        "phase": run.phase,
        "workload": workload(run),
        "seconds": round(run.seconds, 3),
        "gb": gb,
        "gateway_user_s": round(gateway[0], 3),
        "gateway_system_s": round(gateway[1], 3),
        "broker_user_s": round(broker[0], 3),
        "broker_system_s": round(broker[1], 3),
        "gateway_cpu_s": round(gateway_cpu_s, 3),
        "broker_cpu_s": round(broker_cpu_s, 3),
        "gateway_cpu_s_per_gb": round(gateway_cpu_s / gb, 3),
        "broker_cpu_s_per_gb": round(broker_cpu_s / gb, 3),
    }


def cpu_ratios(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Per phase and workload of the runs through the gateway: its CPU s/GB ÷ the broker's, the
    gateway's net of what it burns idle (its CPU per second during the direct run of the same
    workload, which it does not carry, times the run's seconds: the tenant store's change feed,
    timers)."""
    idle_rate = {
        (r["phase"], r["workload"]): r["gateway_cpu_s"] / r["seconds"]
        for r in rows
        if r["target"] == "direct" and r["seconds"] > 0
    }
    found: dict[str, dict[str, float]] = {}
    for row in rows:
        if row["target"] != "gateway" or row["broker_cpu_s"] <= 0:
            continue
        idle = idle_rate.get((row["phase"], row["workload"]), 0.0) * row["seconds"]
        net = max(0.0, row["gateway_cpu_s"] - idle)
        found.setdefault(row["phase"], {})[row["workload"]] = round(net / row["broker_cpu_s"], 3)
    return found


def workers_section(one: Mapping[str, Any], two: Mapping[str, Any], cores: int) -> dict[str, Any]:
    return {
        "one_worker": dict(one),
        "two_workers": dict(two),
        "ratio_2_to_1": round(two["mb_per_s"] / one["mb_per_s"], 3),
        "machine_cores": cores,
        "target_ratio_2_to_1": TARGETS["workers_2_to_1_min"],
    }


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
    settings: Mapping[str, Any], sections: Mapping[str, Any], quick: bool
) -> dict[str, Any]:
    """The JSON document of the phases that ran (`sections`: runs, cpu, latency, logins, memory,
    noisy, workers; each optional)."""
    doc: dict[str, Any] = {"benchmark": "gateway", "quick": quick, "settings": dict(settings)}
    if "runs" in sections:
        runs: Sequence[Throughput] = sections["runs"]
        doc["throughput"] = {
            "runs": [r.as_json() for r in runs],
            "ratio_gateway_to_direct": ratios(runs),
            "target_ratio": TARGETS["throughput_ratio_min"],
        }
    if "cpu" in sections:
        doc["cpu_per_gb"] = {
            "runs": list(sections["cpu"]),
            "ratio_gateway_to_broker": cpu_ratios(sections["cpu"]),
            "target_ratio": TARGETS["cpu_per_gb_gateway_to_broker_max"],
        }
    if "latency" in sections:
        doc["latency"] = dict(sections["latency"])
    if "logins" in sections:
        logins: Sequence[LoginRun] = sections["logins"]
        doc["scram_logins"] = {run.kind: run.as_json() for run in logins}
    if "memory" in sections:
        doc["idle_connection_memory"] = dict(sections["memory"])
    if "noisy" in sections:
        doc["noisy_neighbour"] = dict(sections["noisy"])
    if "workers" in sections:
        doc["workers"] = dict(sections["workers"])
    doc["environment"] = environment()
    return doc


Panel = tuple[str, int, Callable[[Any, Mapping[str, Any]], None]]
_PANELS: tuple[Panel, ...] = (  # (document key, relative width, drawing function)
    ("throughput", 4, lambda axes, doc: _throughput(axes, doc["throughput"]["runs"])),
    ("cpu_per_gb", 3, lambda axes, doc: _cpu(axes, doc["cpu_per_gb"]["runs"])),
    ("latency", 2, lambda axes, doc: _latency(axes, doc["latency"])),
    ("scram_logins", 1, lambda axes, doc: _logins(axes, doc["scram_logins"])),
    ("idle_connection_memory", 1, lambda axes, doc: _memory(axes, doc["idle_connection_memory"])),
    ("noisy_neighbour", 1, lambda axes, doc: _noisy(axes, doc["noisy_neighbour"])),
    ("workers", 1, lambda axes, doc: _workers(axes, doc["workers"])),
)


def write_chart(doc: Mapping[str, Any], path: Path) -> None:
    """One panel per phase that ran: throughput per workload; CPU s/GB gateway vs broker; latency
    percentiles; logins/s; KiB per connection; quiet p99; 1 vs 2 workers."""
    panels = [panel for panel in _PANELS if panel[0] in doc]
    if not panels:
        return
    figure, axes = plt.subplots(
        1,
        len(panels),
        figsize=(4.4 * sum(p[1] for p in panels) ** 0.9 + 2, 5),
        gridspec_kw={"width_ratios": [p[1] for p in panels]},
        squeeze=False,
    )
    for index, (_key, _width, draw) in enumerate(panels):
        draw(axes[0][index], doc)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _logins(axes: Any, logins: Mapping[str, Any]) -> None:
    axes.bar(list(logins), [r["logins_per_s"] for r in logins.values()], color="tab:purple")
    axes.set_title("SCRAM logins/s")


def _memory(axes: Any, memory: Mapping[str, Any]) -> None:
    axes.bar(
        ["gateway", "broker"], [memory["kib_per_connection"], memory["broker_kib_per_connection"]]
    )
    axes.axhline(
        memory["target_kib_per_connection"], color="tab:red", linestyle="--", label="target"
    )
    axes.set_title(f"KiB/idle conn. (×{memory['connections']})")
    axes.legend()


def _noisy(axes: Any, noisy: Mapping[str, Any]) -> None:
    axes.bar(
        ["alone", "beside noisy"],
        [noisy["quiet_alone"]["p99_ms"], noisy["quiet_beside_noisy"]["p99_ms"]],
        color=["tab:green", "tab:orange"],
    )
    axes.set_ylabel("ms")
    axes.set_title(f"Quiet p99 ({noisy['quiet_p99_change_pct']:+.0f} %)")


def _cpu(axes: Any, rows: Sequence[Mapping[str, Any]]) -> None:
    through = [r for r in rows if r["target"] == "gateway"]
    labels = [f"{r['phase']}\n{r['workload']}" for r in through]
    width = 0.4
    xs = range(len(through))
    axes.bar(xs, [r["gateway_cpu_s_per_gb"] for r in through], width, label="gateway")
    axes.bar(
        [x + width for x in xs], [r["broker_cpu_s_per_gb"] for r in through], width, label="broker"
    )
    axes.set_xticks([x + width / 2 for x in xs], labels)
    axes.set_ylabel("CPU s per GB")
    axes.set_title("CPU per GB moved through the gateway")
    axes.legend()


def _workers(axes: Any, workers: Mapping[str, Any]) -> None:
    axes.bar(
        ["1 worker", "2 workers"],
        [workers["one_worker"]["mb_per_s"], workers["two_workers"]["mb_per_s"]],
        color=["tab:blue", "tab:cyan"],
    )
    axes.set_ylabel("MB/s")
    axes.set_title(f"Aggregate produce (×{workers['ratio_2_to_1']})")


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
