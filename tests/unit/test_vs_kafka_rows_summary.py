"""`vs_kafka_rows`'s summary (issue 25's re-measured rows): every part a repetition measured —
perf-tool produce and consume, confluent-kafka produce and consume — becomes a row with the
median of each system, the spread and the per-repetition ratios."""

from __future__ import annotations

from typing import Any

import pytest

from infra.bench.vs_kafka_rows import summarise

pytestmark = pytest.mark.unit


def measured(mb_per_s: float, cpu_per_gb: float) -> dict[str, float]:
    return {"mb_per_s": mb_per_s, "server_cpu_s_per_gb": cpu_per_gb}


def repetition(pier: float, kafka: float) -> dict[str, dict[str, Any]]:
    """One repetition of `--kib`'s parts: Pier at `pier` MB/s, Kafka at `kafka`."""

    def system(mb: float) -> dict[str, Any]:
        return {
            "perf": {"1024B/acks=1/lz4": measured(mb, 2.0)},
            "consume": {"1024B/acks=1/lz4": measured(2 * mb, 1.0)},
            "client-produce": {"1024B/acks=1/zstd": measured(3 * mb, 1.5)},
            "client-consume": {"1024B/acks=1/zstd": measured(4 * mb, 0.5)},
        }

    return {"pier": system(pier), "kafka": system(kafka)}


def test_every_part_of_the_1_kib_rows_is_summarised_with_medians_and_per_run_ratios() -> None:
    rows = summarise([repetition(30, 20), repetition(10, 20), repetition(50, 40)])
    consume = rows["perf-consume 1024B/acks=1/lz4 MB/s"]
    assert (consume["pier"], consume["kafka"], consume["ratio"]) == (60, 40, 1.5)
    assert consume["ratios_per_repetition"] == [1.5, 0.5, 1.25]
    assert consume["pier_spread"] == [20, 100]
    assert rows["perf-produce 1024B/acks=1/lz4 MB/s"]["ratio"] == 1.5
    assert rows["client-produce 1024B/acks=1/zstd MB/s"]["pier"] == 90
    assert rows["client-consume 1024B/acks=1/zstd server CPU s/GB"]["ratio"] == 1.0
    assert rows["client-consume 1024B/acks=1/zstd MB/s"]["better"] == "higher"


def test_a_part_one_system_lacks_in_some_repetition_gives_no_row() -> None:
    reps = [repetition(30, 20), repetition(10, 20)]
    del reps[1]["kafka"]["consume"]
    rows = summarise(reps)
    assert not any(name.startswith("perf-consume") for name in rows)
    assert "perf-produce 1024B/acks=1/lz4 MB/s" in rows


def omb_result(max_rate: int, p99_ms: float) -> dict[str, Any]:
    """One system's OMB result: its max and 50 % phases and the common-rate phase."""

    def phase(records_per_s: int) -> dict[str, Any]:
        latency = {"p50_ms": p99_ms / 10, "p99_ms": p99_ms, "p999_ms": 2 * p99_ms}
        return {
            "records_per_s": records_per_s, "mb_per_s": records_per_s / 1000, "join_s": 5.0,
            "e2e": latency, "publish": latency, "server_cpu_s_per_gb": 2.0,
        }  # fmt: skip

    return {
        "max": phase(max_rate),
        "half": phase(max_rate // 2),
        "common": phase(1000),
        "server_cpu_s_per_gb": 4.0,
    }


def test_the_common_rate_is_half_the_lower_maximum_and_its_latencies_become_rows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pathlib import Path

    from infra.bench import vs_kafka_rows
    from infra.bench.vs_kafka_workloads import SHORT_WORKLOADS

    rates: list[tuple[str, float]] = []

    def run_at(system: str, _scratch: Path, rate: float, *_: Any) -> dict[str, Any]:
        rates.append((system, rate))
        return {"rate": rate}

    monkeypatch.setattr(vs_kafka_rows, "common_rate", run_at)
    rep = {"pier": {"omb": omb_result(9000, 0)}, "kafka": {"omb": omb_result(4000, 0)}}
    vs_kafka_rows._with_common_rate(rep, ("pier", "kafka"), Path("/nonexistent"),
                                    SHORT_WORKLOADS, None, 0)  # fmt: skip
    assert rates == [("kafka", 2000.0), ("pier", 2000.0)]  # the order turned, one rate for both
    assert rep["pier"]["omb"]["common"] == {"rate": 2000.0}

    reps = [{"pier": {"omb": omb_result(9000, 30)}, "kafka": {"omb": omb_result(4000, 60)}}]
    rows = summarise(reps)
    assert rows["OMB at the common rate e2e p99 ms"]["ratio"] == 0.5
    assert rows["OMB at the common rate publish p99.9 ms"]["better"] == "lower"
