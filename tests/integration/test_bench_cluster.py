"""The cluster benchmark runs end to end (`--quick`) and reports every metric with a sane value.

No timing thresholds: the numbers depend on the machine. What must hold is that each phase ran and
measured something (positive durations, throughput and ratios; a failover that finished), and that
the JSON on stdout is the one written next to the chart. The `--quick` run starts ZooKeeper and
three brokers and waits out two session timeouts, more than CI's ~40 s per test, so it is `slow`;
the report's arithmetic (summaries, ratios, the document and chart from given phase results) is
checked without processes on every CI run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from infra.bench.cluster import main
from infra.bench.cluster_report import document, summary, write_chart
from infra.bench.elections import Elections
from infra.bench.failover import KillFailover, ShutdownGap
from infra.bench.replicated_throughput import ReplicatedRun, ratios
from infra.bench.throughput import Throughput

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]


def positive(value: Any) -> bool:
    return isinstance(value, int | float) and value > 0


def check_throughput(section: dict[str, Any]) -> None:
    runs = section["runs"]
    seen = {(r["pass"], r["setup"], r["record_bytes"]) for r in runs}
    assert seen == {
        (p, s, b)
        for p in ("cold", "warm")
        for s in ("rf1_acks_1", "rf3_acks_all")
        for b in (100, 1024)
    }
    assert all(positive(r["mb_per_s"]) and positive(r["records_per_s"]) for r in runs)
    ratios = section["ratio_rf3_acks_all_to_rf1_acks_1"]
    assert set(ratios) == {"cold", "warm"}
    assert all(
        set(r) == {"100B", "1024B"} and all(map(positive, r.values())) for r in ratios.values()
    )


def check_failover(section: dict[str, Any]) -> None:
    assert section["session_timeout_ms"] == 4000 and section["target_s"] == 5.0
    (repetition,) = section["repetitions"]
    assert repetition["victim"] in (0, 1, 2) and repetition["failed_deliveries"] == 0
    for key in ("session_expired_s", "zk_leader_s", "metadata_leader_s", "first_ack_s"):
        assert positive(repetition[key]), key  # finite: the failover completed
        assert section[key] == {"median": repetition[key], "max": repetition[key]}
    # A new leader cannot be elected before the dead broker's session is gone.
    assert repetition["zk_leader_s"] >= repetition["session_expired_s"]
    assert repetition["metadata_leader_s"] >= repetition["zk_leader_s"]


def check_controlled_shutdown(section: dict[str, Any]) -> None:
    (repetition,) = section["repetitions"]
    assert positive(repetition["longest_gap_s"]) and positive(repetition["shutdown_s"])
    assert repetition["failed_deliveries"] == 0
    assert section["longest_gap_s"]["max"] == repetition["longest_gap_s"]


def check_elections(section: dict[str, Any]) -> None:
    assert section["partitions"] == 60 and 0 < section["victim_led"] < 60
    for key in ("create_to_zk_leaders_s", "create_to_metadata_leaders_s", "session_expired_s"):
        assert positive(section[key]), key
    for key in ("zk_leaders_s", "metadata_leaders_s"):
        assert positive(section[key]) and section[key] >= section["session_expired_s"], key
    assert section["election_s"] >= 0


@pytest.mark.slow
def test_quick_cluster_benchmark_reports_every_metric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--quick", "--results", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((tmp_path / "cluster.json").read_text())
    assert (tmp_path / "cluster.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert printed["benchmark"] == "cluster" and printed["quick"] is True
    assert printed["settings"]["brokers"] == 3
    check_throughput(printed["throughput"])
    check_failover(printed["failover"])
    check_controlled_shutdown(printed["controlled_shutdown"])
    check_elections(printed["elections"])


def run(pass_name: str, setup: str, record_bytes: int, seconds: float) -> ReplicatedRun:
    return ReplicatedRun(
        pass_name, setup, 0, Throughput(setup, "produce", 1000, record_bytes, "none", seconds)
    )


def test_ratio_is_rf3_over_rf1_per_pass_and_record_size() -> None:
    runs = [
        run("cold", "rf1_acks_1", 100, 1.0),
        run("cold", "rf3_acks_all", 100, 4.0),
        run("warm", "rf1_acks_1", 1024, 1.0),
        run("warm", "rf3_acks_all", 1024, 2.0),
    ]
    assert ratios(runs) == {"cold": {"100B": 0.25}, "warm": {"1024B": 0.5}}


def test_summary_treats_an_unfinished_repetition_as_unbounded() -> None:
    assert summary([1.0, 3.0, 2.0]) == {"median": 2.0, "max": 3.0}
    assert summary([1.0, None, 2.0]) == {"median": 1.5, "max": None}
    assert summary([None]) == {"median": None, "max": None}


def test_document_and_chart_from_phase_results(tmp_path: Path) -> None:
    runs = [
        run(p, s, b, 1.0)
        for p in ("cold", "warm")
        for s in ("rf1_acks_1", "rf3_acks_all")
        for b in (100, 1024)
    ]
    kills = [
        KillFailover(1, False, 6.5, 6.6, 6.7, 6.9, 0),
        KillFailover(2, False, 7.5, 7.5, 7.6, None, 0),
    ]
    gaps = [ShutdownGap(0, False, 0.8, 0.25, 0)]
    election = Elections(1000, 2.0, 2.5, 2, 333, 6.2, 6.9, 7.1)
    settings = {"zookeeper.session.timeout.ms": "6000", "brokers": 3}
    doc = document(settings, runs, kills, gaps, election, quick=False)
    failover = doc["failover"]
    assert failover["target_s"] == 7.0
    assert failover["first_ack_s"] == {"median": 6.9, "max": None}  # one never recovered
    assert failover["repetitions"][0]["after_expiry_s"] == 0.4
    assert doc["controlled_shutdown"]["longest_gap_s"] == {"median": 0.25, "max": 0.25}
    assert doc["elections"]["election_s"] == 0.7 and doc["elections"]["victim_led"] == 333
    assert doc["throughput"]["ratio_rf3_acks_all_to_rf1_acks_1"]["warm"] == {
        "100B": 1.0,
        "1024B": 1.0,
    }
    json.dumps(doc)  # serialisable as is
    write_chart(doc, tmp_path / "cluster.png")
    assert (tmp_path / "cluster.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
