"""The table `vs_kafka.py` prints (docs/benchmarks.md's layout): each row's target from issue 25
and whether the run met it."""

from __future__ import annotations

import pytest

from infra.bench.vs_kafka import markdown

pytestmark = pytest.mark.unit


def row(pier: float, kafka: float, better: str) -> dict[str, object]:
    return {"pier": pier, "kafka": kafka, "ratio": round(pier / kafka, 3), "better": better}


def test_each_row_carries_its_target_and_whether_it_was_met() -> None:
    table = markdown(
        {
            "perf-produce 100B/acks=1/none MB/s": row(12.0, 10.0, "higher"),
            "perf-produce server CPU s/GB": row(6.0, 10.0, "lower"),
            "3 nodes peak RSS MiB with 10000 partitions": row(250.0, 1370.0, "lower"),
            "5000 partitions create s": row(0.5, 1.9, "lower"),
            "OMB at 50% rate e2e p99.9 ms": row(90.0, 100.0, "lower"),
            "churn: bystander p99 during / idle": row(2.5, 2.0, "lower"),
            "e2e latency p50 ms": row(4.0, 5.0, "lower"),
        }
    )
    lines = {line.split(" | ")[0][2:]: line for line in table.splitlines()[2:]}
    assert lines["perf-produce 100B/acks=1/none MB/s"].endswith("| ≥ 1.1 ✓ |")
    assert lines["perf-produce server CPU s/GB"].endswith("| ≤ 0.5 ✗ |")
    assert lines["3 nodes peak RSS MiB with 10000 partitions"].endswith("| ≤ 0.2 ✓ |")
    assert lines["5000 partitions create s"].endswith("| ≤ 1.0 ✓ |")
    assert lines["OMB at 50% rate e2e p99.9 ms"].endswith("| ≤ 0.8 ✗ |")
    assert lines["churn: bystander p99 during / idle"].endswith("| ≤ 2 (Pier's) ✗ |")
    assert lines["e2e latency p50 ms"].endswith("| lower |  |")
