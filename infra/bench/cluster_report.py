"""The cluster benchmark's output: one JSON document and a four-panel PNG chart.

Owns: assembling the document (throughput runs and RF 3/RF 1 ratios per pass, failover and
controlled-shutdown repetitions with median/max, the elections phase, settings, targets,
environment) and drawing it with matplotlib's Agg backend. The JSON is written by
`report.write_json`, shared with the other benchmarks; the environment records the load average,
since a busy machine skews every number here. Pure apart from the file written; call from
one thread.
"""

from __future__ import annotations

import os
import platform
import statistics
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import confluent_kafka
import matplotlib

from infra.bench.elections import Elections
from infra.bench.failover import KillFailover, ShutdownGap
from infra.bench.replicated_throughput import ReplicatedRun, ratios

matplotlib.use("Agg")  # before pyplot is imported: render to files only

import matplotlib.pyplot as plt

SHUTDOWN_TARGET_S = 1.0
RATIO_TARGET = 0.5


def summary(values: Sequence[float | None]) -> dict[str, float | None]:
    """Median and max; None (never reached) counts as infinitely long, so max is None too."""
    known = [v for v in values if v is not None]
    if not known:
        return {"median": None, "max": None}
    unreached = len(known) < len(values)
    return {
        "median": round(statistics.median(known), 3),
        "max": None if unreached else round(max(known), 3),
    }


def environment() -> dict[str, Any]:
    # confluent-kafka's version() is a string in some releases, (string, int) in others.
    client, library = confluent_kafka.version(), confluent_kafka.libversion()
    return {
        "cpus": os.cpu_count(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "confluent_kafka": str(client[0] if isinstance(client, tuple) else client),
        "librdkafka": str(library[0] if isinstance(library, tuple) else library),
        "load_average_1m": round(os.getloadavg()[0], 2),
    }


def document(
    settings: Mapping[str, Any],
    runs: Sequence[ReplicatedRun],
    kills: Sequence[KillFailover],
    shutdowns: Sequence[ShutdownGap],
    elections: Elections,
    quick: bool,
) -> dict[str, Any]:
    session_s = int(settings["zookeeper.session.timeout.ms"]) / 1000
    return {
        "benchmark": "cluster",
        "quick": quick,
        "settings": dict(settings),
        "throughput": {
            "runs": [r.as_json() for r in runs],
            "ratio_rf3_acks_all_to_rf1_acks_1": ratios(runs),
            "target_ratio": RATIO_TARGET,
        },
        "failover": {
            "session_timeout_ms": int(settings["zookeeper.session.timeout.ms"]),
            "target_s": session_s + 1.0,
            "first_ack_s": summary([k.first_ack_s for k in kills]),
            "zk_leader_s": summary([k.zk_leader_s for k in kills]),
            "metadata_leader_s": summary([k.metadata_leader_s for k in kills]),
            "session_expired_s": summary([k.session_expired_s for k in kills]),
            "after_expiry_s": summary([k.after_expiry_s for k in kills]),
            "repetitions": [k.as_json() for k in kills],
        },
        "controlled_shutdown": {
            "target_s": SHUTDOWN_TARGET_S,
            "longest_gap_s": summary([s.longest_gap_s for s in shutdowns]),
            "shutdown_s": summary([s.shutdown_s for s in shutdowns]),
            "repetitions": [s.as_json() for s in shutdowns],
        },
        "elections": elections.as_json(),
        "environment": environment(),
    }


def write_chart(doc: Mapping[str, Any], path: Path) -> None:
    figure, axes = plt.subplots(1, 4, figsize=(18, 5))
    _throughput(axes[0], doc["throughput"]["runs"])
    _repetitions(axes[1], doc["failover"], "first_ack_s", "kill -9 → first acks=all write")
    _repetitions(axes[2], doc["controlled_shutdown"], "longest_gap_s", "SIGTERM: longest ack gap")
    _elections(axes[3], doc["elections"])
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)


def _throughput(axes: Any, runs: Sequence[Mapping[str, Any]]) -> None:
    labels = sorted({f"{r['pass']} {r['record_bytes']}B" for r in runs})
    setups = sorted({r["setup"] for r in runs})
    width = 0.8 / max(len(setups), 1)
    for index, setup in enumerate(setups):
        by_label = {
            f"{r['pass']} {r['record_bytes']}B": r["mb_per_s"] for r in runs if r["setup"] == setup
        }
        xs = [i + index * width for i in range(len(labels))]
        axes.bar(xs, [by_label.get(label, 0.0) for label in labels], width, label=setup)
    axes.set_xticks([i + width / 2 for i in range(len(labels))], labels)
    axes.set_ylabel("MB/s")
    axes.set_title("Produce throughput")
    axes.legend()


def _repetitions(axes: Any, section: Mapping[str, Any], key: str, title: str) -> None:
    values = [r[key] if r[key] is not None else 0.0 for r in section["repetitions"]]
    axes.bar([str(i + 1) for i in range(len(values))], values, color="tab:blue")
    axes.axhline(section["target_s"], color="tab:red", linestyle="--", label="target")
    axes.set_xlabel("repetition")
    axes.set_ylabel("s")
    axes.set_title(title)
    axes.legend()


def _elections(axes: Any, elections: Mapping[str, Any]) -> None:
    keys = [
        "create_to_zk_leaders_s",
        "create_to_metadata_leaders_s",
        "session_expired_s",
        "zk_leaders_s",
        "metadata_leaders_s",
        "election_s",
    ]
    labels = ["create→ZK", "create→MD", "kill→expiry", "kill→ZK", "kill→MD", "election"]
    axes.bar(labels, [elections[k] or 0.0 for k in keys], color="tab:green")
    axes.set_ylabel("s")
    axes.set_title(f"Leaders for {elections['partitions']} partitions")
    axes.tick_params(axis="x", labelrotation=30)
