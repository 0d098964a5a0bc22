"""The gateway benchmark runs end to end (`--quick`) and reports every figure with a sane value.

No timing thresholds: the numbers depend on the machine and its load. What must hold is that each
phase ran and measured something (positive rates and latencies, a ratio per workload and phase, an
RSS figure per connection, both login kinds, the quiet tenant's latency in both conditions), and
that the JSON on stdout is the one written next to the chart. The `--quick` run starts a broker and
a gateway and takes about a minute, more than CI's ~40 s per test, so it is `slow`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.bench.gateway import main

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(400)]
WORKLOADS = {"100B/none", "100B/lz4", "1024B/none", "1024B/lz4"}


def positive(value: Any) -> bool:
    return isinstance(value, int | float) and value > 0


def number(value: Any) -> bool:
    return isinstance(value, int | float)


def check_throughput(section: dict[str, Any]) -> None:
    runs = section["runs"]
    seen = {(r["target"], r["phase"], f"{r['record_bytes']}B/{r['codec']}") for r in runs}
    assert seen == {
        (t, p, w) for t in ("direct", "gateway") for p in ("produce", "consume") for w in WORKLOADS
    }
    assert all(positive(r["mb_per_s"]) and positive(r["records_per_s"]) for r in runs)
    ratios = section["ratio_gateway_to_direct"]
    assert set(ratios) == {"produce", "consume"}
    assert all(set(r) == WORKLOADS and all(map(positive, r.values())) for r in ratios.values())
    assert section["target_ratio"] == 0.85


def check_percentiles(figures: dict[str, Any]) -> None:
    assert figures["records"] > 0
    values = [figures[k] for k in ("p50_ms", "p99_ms", "p999_ms", "max_ms")]
    assert all(map(positive, values)) and values == sorted(values)


def check_latency(section: dict[str, Any]) -> None:
    assert section["rate_mb_s"] == 5.0
    check_percentiles(section["direct"])
    check_percentiles(section["gateway"])
    for key in ("added_p50_ms", "added_p99_ms", "added_p999_ms"):
        assert number(section[key]), key
    assert section["added_p99_ms"] == pytest.approx(
        section["gateway"]["p99_ms"] - section["direct"]["p99_ms"], abs=0.002
    )


def check_logins(section: dict[str, Any]) -> None:
    assert set(section) == {"cold", "warm"}
    assert section["cold"]["logins"] == section["cold"]["distinct_keys"] == 40
    assert section["warm"]["logins"] > section["warm"]["distinct_keys"]
    for run in section.values():
        assert positive(run["logins_per_s"]) and positive(run["p50_ms"])
        assert run["p99_ms"] >= run["p50_ms"]


def check_memory(section: dict[str, Any]) -> None:
    assert section["connections"] == 200
    assert positive(section["gateway_rss_before_kib"]) and positive(
        section["gateway_rss_after_kib"]
    )
    assert number(section["kib_per_connection"]) and number(section["broker_kib_per_connection"])
    assert section["target_kib_per_connection"] == 30.0


def check_noisy(section: dict[str, Any]) -> None:
    check_percentiles(section["quiet_alone"])
    check_percentiles(section["quiet_beside_noisy"])
    assert number(section["quiet_p99_change_pct"])
    assert section["rounds"] == 1 and len(section["noisy_acked_mb_each_second"]) == 1
    assert positive(section["noisy_acked_mb_per_s"])
    assert section["noisy_failed_deliveries"] == {}
    # 10× its quota: the gateway must have throttled the noisy tenant at least once.
    assert section["noisy_throttle_events"] > 0 and section["noisy_throttle_ms_max"] > 0


def test_quick_gateway_benchmark_reports_every_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--quick", "--out", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((tmp_path / "gateway.json").read_text())
    assert (tmp_path / "gateway.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert printed["benchmark"] == "gateway" and printed["quick"] is True
    check_throughput(printed["throughput"])
    check_latency(printed["latency"])
    check_logins(printed["scram_logins"])
    check_memory(printed["idle_connection_memory"])
    check_noisy(printed["noisy_neighbour"])
    assert positive(printed["environment"]["cpus"])
