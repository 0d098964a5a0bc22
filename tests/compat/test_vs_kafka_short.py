"""`infra/bench/vs_kafka.py --short` runs end to end against Pier and Apache Kafka (issue 16's CI
proof that the benchmark works; its numbers are not asserted, only that every part measured
something): single-node perf tools (compressed and uncompressed), confluent-kafka, latency, the
3-node run, partition scale, issue 25's hosted-fleet rows (OMB's shape, 1,000 connections, topic
churn with a bystander, the same churn on a second server beside a bystander alone on the
first, many partitions over 3 nodes), the JSON document and the chart."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from infra.bench.vs_kafka import main

pytestmark = [pytest.mark.compat, pytest.mark.timeout(400)]


def test_short_benchmark_measures_every_part(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "vs_kafka.json"
    assert main(["--short", "--out", str(out), "--dir", str(tmp_path / "scratch")]) == 0
    document = json.loads(out.read_text())
    printed = capsys.readouterr()
    assert json.loads(printed.out) == document
    table = [line for line in printed.err.splitlines() if line.startswith("| ")]
    assert table[0].endswith("| better | target |")  # docs/benchmarks.md's layout
    assert {line.split(" | ")[0][2:] for line in table[1:]} == set(document["summary"])
    assert (tmp_path / "vs_kafka.png").stat().st_size > 0
    assert document["short"] is True and document["environment"]["kafka"] == "4.1.1"
    summary = document["summary"]
    parts = {name.split(" ")[0] for name in summary}
    assert {"perf-produce", "perf-consume", "client-produce", "client-consume",
            "cluster-produce", "e2e", "single", "3", "20", "OMB", "1000", "churn:"} <= parts, sorted(summary)  # fmt: skip
    # the churn once more against a second server, the bystander alone on the first
    assert "churn elsewhere: bystander p99 during / idle" in summary
    workloads = {name.split(" ")[1] for name in summary if name.startswith("perf-produce")}
    assert any(w.endswith("/none") for w in workloads), workloads  # an uncompressed row
    assert any(name.startswith("3 nodes: ") and "partitions create" in name for name in summary)
    for name, row in summary.items():
        for system in ("pier", "kafka"):
            assert math.isfinite(row[system]) and row[system] > 0, (name, row)
        assert row["ratio"] > 0 and row["better"] in ("higher", "lower"), (name, row)
    systems = {(r["system"], r["part"]) for r in document["runs"]}
    assert {
        (s, p) for s in ("pier", "kafka") for p in ("perf-produce", "cluster-produce")
    } <= systems
    assert all(r["server_cpu_s"] >= 0 and r["mb_per_s"] > 0 for r in document["runs"])
