"""Chosen rows of `infra.bench.vs_kafka`, re-measured side by side with repetitions and spread.

Owns the re-measurement of issue 25's uncompressed produce rows and OMB rows: each repetition
starts Pier and Apache Kafka 4.1.1 afresh (alternating which goes first), runs on each the
unmeasured warm-up, Kafka's `ProducerPerformance` for 100 B and 1 KiB records x acks=1/all,
`compression.type=none` (one one-partition topic per row, `vs_kafka`'s producer settings), then
the OpenMessaging shape (`vs_kafka_omb.omb`: 1 topic x 100 partitions, 16 producers and 16
consumers, OMB's maximum sustainable rate then 50 % of it, with the time the 16 consumers took
to be assigned), and then, on fresh servers again, the fixed-rate phase at one rate common to
both systems (50 % of the lower of the two sustainable rates: OMB's own comparisons fix the
rate in the workload file, so the latencies compare at the same traffic). Per row it reports each system's median over the
repetitions with the min-max spread, the ratio of the medians, the per-repetition ratios (side
by side, so they compare under the load of that moment), the server CPU per GB and the 1-minute
load average, and how long the server's threads waited for a CPU per CPU second they ran
(`/proc/<pid>/task/*/schedstat`: run-queue wait over on-CPU time, summed over the server's
processes and threads; above 1 the server spent longer runnable but not running than running,
the "starved" stalls of Pier's loop-lag log); for Pier also the event loop's worst lag and stall
count from the broker log (`event=event_loop_lag_summary`). JSON on stdout and in `infra/bench/results/vs_kafka_rows.json`.

    .venv/bin/python -m infra.bench.vs_kafka_rows [--repetitions 3] [--skip-omb | --omb-only | --kib]
        [--short] [--baseline DIR]

`--kib` measures issue 25's 1 KiB single-partition rows instead: ProducerPerformance acks=1 with
lz4, zstd and none, each topic then read by ConsumerPerformance, and confluent-kafka's 1 KiB
produce and consume (lz4, zstd; `vs_kafka.client_runs`), each with the server CPU per GB. Its
servers (fresh each repetition) run at once and each row runs on one system right after the
other, the order turning with every row: single runs of these client-bound rows swing 2x either
way with the machine's load, and runs minutes apart met different loads.

`--baseline DIR` also runs, in each repetition, Pier from another checkout (DIR: a `git archive`
of an earlier commit, with the native module built or copied in) as "pier-before": a
before/after of a change under the same load, next to Kafka.

Blocking; every server is stopped and its directory removed before the next starts.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from infra.bench import vs_kafka as vk
from infra.bench.vs_kafka_omb import omb_at
from infra.bench.vs_kafka_workloads import FULL_WORKLOADS, SHORT_WORKLOADS, WorkloadSizes
from infra.bench.vs_kafka_workloads import omb as omb_workload
from infra.broker import start_broker

BASELINE = "pier-before"
ROWS = tuple((size, acks, "none") for size in (100, 1024) for acks in ("1", "all"))
# `--kib`: issue 25's 1 KiB single-partition rows, produce and consume, every codec.
KIB_ROWS = tuple((1024, "1", codec) for codec in ("lz4", "zstd", "none"))
KIB_CLIENT = vk.Sizes(
    repetitions=1, records={}, perf_workloads=(), client_records=200_000, latency_seconds=0,
    cluster_records=0, partitions=(0, 0), codecs=("lz4", "zstd"),
)  # fmt: skip
RECORDS = {100: 1_000_000, 1024: 200_000}
SHORT_RECORDS = {100: 2_000, 1024: 1_000}
OMB_ROWS = (
    ("OMB max (sustainable) MB/s", ("max", "mb_per_s"), "higher"),
    ("OMB fixed rate (50% of max) MB/s", ("half", "mb_per_s"), "higher"),
    ("OMB at 50% rate e2e p50 ms", ("half", "e2e", "p50_ms"), "lower"),
    ("OMB at 50% rate e2e p99 ms", ("half", "e2e", "p99_ms"), "lower"),
    ("OMB at 50% rate e2e p99.9 ms", ("half", "e2e", "p999_ms"), "lower"),
    ("OMB at 50% rate publish p99 ms", ("half", "publish", "p99_ms"), "lower"),
    ("OMB at 50% rate publish p99.9 ms", ("half", "publish", "p999_ms"), "lower"),
    ("OMB server CPU s/GB", ("server_cpu_s_per_gb",), "lower"),
    ("OMB common rate (50% of the lower max) MB/s", ("common", "mb_per_s"), "higher"),
    ("OMB at the common rate e2e p50 ms", ("common", "e2e", "p50_ms"), "lower"),
    ("OMB at the common rate e2e p99 ms", ("common", "e2e", "p99_ms"), "lower"),
    ("OMB at the common rate e2e p99.9 ms", ("common", "e2e", "p999_ms"), "lower"),
    ("OMB at the common rate publish p99 ms", ("common", "publish", "p99_ms"), "lower"),
    ("OMB at the common rate publish p99.9 ms", ("common", "publish", "p999_ms"), "lower"),
    ("OMB server CPU s/GB at the common rate", ("common", "server_cpu_s_per_gb"), "lower"),
    ("OMB 16 consumers assigned s (max phase)", ("max", "join_s"), "lower"),
    ("OMB 16 consumers assigned s (fixed-rate phase)", ("half", "join_s"), "lower"),
)
PERF_METRICS = (
    ("mb_per_s", "higher"),
    ("server_cpu_s_per_gb", "lower"),
    ("server_wait_per_cpu_s", "lower"),
)
# (key in a system's result, row label): what the perf and client tools measured.
PARTS = (
    ("perf", "perf-produce"),
    ("consume", "perf-consume"),
    ("client-produce", "client-produce"),
    ("client-consume", "client-consume"),
)
PERF_METRIC_NAMES = {
    "mb_per_s": "MB/s",
    "server_cpu_s_per_gb": "server CPU s/GB",
    "server_wait_per_cpu_s": "server wait for CPU s per CPU s",
}
_LAG = re.compile(
    r"event=event_loop_lag_summary worst_lag_ms=(\d+) stalls=(\d+) busy_stalls=(\d+) "
    r"worst_busy_lag_ms=(\d+) starved_stalls=(\d+)"
)


def sched_seconds(pids: Sequence[int]) -> tuple[float, float]:
    """(on-CPU, waiting-for-a-CPU) seconds of every thread of `pids`' process trees so far."""
    running = waiting = 0
    for pid in vk.process_tree(pids):
        for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
            try:
                on_cpu, queued, _slices = (int(x) for x in stat.read_text().split())
            except (OSError, ValueError):
                continue  # a thread that ended meanwhile
            running += on_cpu
            waiting += queued
    return running / 1e9, waiting / 1e9


def _wait_per_cpu(before: tuple[float, float], after: tuple[float, float]) -> float:
    ran = after[0] - before[0]
    return round((after[1] - before[1]) / ran, 2) if ran > 0 else float("nan")


def _dig(found: dict[str, Any], path: Sequence[str]) -> float:
    value: Any = found
    for key in path:
        value = value[key]
    return float(value)


def _loop_lag(server: vk.Server) -> dict[str, int] | None:
    """Pier's loop-lag summary, logged when its listener stops (after `close`)."""
    broker = getattr(server, "broker", None)
    if broker is None or not broker.log_path.exists():
        return None
    found = _LAG.findall(broker.log_path.read_text(errors="replace"))
    if not found:
        return None
    keys = ("worst_ms", "stalls", "busy_stalls", "worst_busy_ms", "starved_stalls")
    return dict(zip(keys, (int(x) for x in found[-1]), strict=True))


def _baseline_program(checkout: Path) -> tuple[str, ...]:
    """`python -m pier` importing from `checkout` first (the child's cwd is not the checkout)."""
    code = (
        f"import runpy, sys; sys.path.insert(0, {str(checkout)!r}); "
        "runpy.run_module('pier', run_name='__main__', alter_sys=True)"
    )
    return (sys.executable, "-c", code)


def _start(system: str, root: Path, baseline: Path | None) -> vk.Server:
    if system != BASELINE:
        return vk.start(system, root, 1)
    assert baseline is not None
    return vk.PierSingle(start_broker(root / "data", wait=120, program=_baseline_program(baseline)))


def one_system(
    system: str,
    scratch: Path,
    records: dict[int, int],
    workloads: WorkloadSizes | None,
    baseline: Path | None = None,
    nice: int = 0,
) -> dict[str, Any]:
    """The rows on one fresh server of `system` (OMB's clients at `nice`)."""
    root = Path(tempfile.mkdtemp(prefix=f"{system}-rows-", dir=scratch))
    server = _start(system, root, baseline)
    found: dict[str, Any] = {"perf": {}}
    try:
        b = server.bootstrap
        if records:
            _warm_up(b, records)
        for size, acks, codec in ROWS if records else ():
            _perf_row(system, server, (size, acks, codec), records[size], found, consume=False)
        if workloads is not None:
            vk.log(f"{system}: OMB shape")
            before = vk.cpu_seconds(server.pids())
            omb = omb_workload(b, workloads, vk.create_topics, nice)
            cpu = max(0.0, vk.cpu_seconds(server.pids()) - before)
            moved_gb = sum(omb[phase]["produced"] for phase in ("max", "half")) * 1024 / 1e9
            omb["server_cpu_s_per_gb"] = round(cpu / moved_gb, 2) if moved_gb else float("nan")
            omb["loadavg_1m"] = round(os.getloadavg()[0], 2)
            found["omb"] = omb
    finally:
        server.close()
        found["loop_lag"] = _loop_lag(server)
        shutil.rmtree(root, ignore_errors=True)
    return found


def common_rate(
    system: str,
    scratch: Path,
    rate: float,
    workloads: WorkloadSizes,
    baseline: Path | None = None,
    nice: int = 0,
) -> dict[str, Any]:
    """OMB's fixed-rate phase at `rate` (the same for every system) on a fresh server of `system`."""
    root = Path(tempfile.mkdtemp(prefix=f"{system}-common-", dir=scratch))
    server = _start(system, root, baseline)
    try:
        vk.log(f"{system}: OMB shape at the common rate {rate:.0f} records/s")
        before = vk.cpu_seconds(server.pids())
        sched_before = sched_seconds(server.pids())
        found = omb_at(server.bootstrap, workloads, vk.create_topics, rate, nice)
        cpu = max(0.0, vk.cpu_seconds(server.pids()) - before)
        moved_gb = found["produced"] * 1024 / 1e9
        found["server_cpu_s_per_gb"] = round(cpu / moved_gb, 2) if moved_gb else float("nan")
        found["server_wait_per_cpu_s"] = _wait_per_cpu(sched_before, sched_seconds(server.pids()))
        found["loadavg_1m"] = round(os.getloadavg()[0], 2)
    finally:
        server.close()
        found_lag = _loop_lag(server)
        shutil.rmtree(root, ignore_errors=True)
    found["loop_lag"] = found_lag
    return found


def _with_common_rate(
    rep: dict[str, dict[str, Any]],
    order: Sequence[str],
    scratch: Path,
    workloads: WorkloadSizes,
    baseline: Path | None,
    nice: int,
) -> None:
    """Each system's OMB result gains `common`: the fixed-rate phase at 50 % of the lower of the
    repetition's sustainable rates, so the latencies compare at the same traffic."""
    rate = min(rep[s]["omb"]["max"]["records_per_s"] for s in order) / 2
    for system in reversed(order):
        rep[system]["omb"]["common"] = common_rate(system, scratch, rate, workloads, baseline, nice)


def kib_systems(
    systems: Sequence[str], scratch: Path, records: dict[int, int], baseline: Path | None = None
) -> dict[str, dict[str, Any]]:
    """`--kib`: every system's fresh server up at once, and each row run on one system right after
    the other (the order turning with each row), so the two runs of a row meet the same load."""
    roots: dict[str, Path] = {}
    servers: dict[str, vk.Server] = {}
    found: dict[str, dict[str, Any]] = {s: {"perf": {}, "consume": {}} for s in systems}
    try:
        for system in systems:
            roots[system] = Path(tempfile.mkdtemp(prefix=f"{system}-kib-", dir=scratch))
            servers[system] = _start(system, roots[system], baseline)
            _warm_up(servers[system].bootstrap, records)
        turn = 0
        for row in KIB_ROWS:
            for system in _turned(systems, turn):
                _perf_row(system, servers[system], row, records[row[0]], found[system])
            turn += 1
        for codec in KIB_CLIENT.codecs:
            client = replace(KIB_CLIENT, client_records=records[1024], codecs=(codec,))
            for system in _turned(systems, turn):
                for run in vk.client_runs(system, servers[system], client):
                    found[system].setdefault(run.part, {})[run.workload] = {
                        "mb_per_s": round(run.mb_per_s, 2),
                        "server_cpu_s_per_gb": round(run.cpu_s_per_gb, 2),
                        "loadavg_1m": round(os.getloadavg()[0], 2),
                        **run.extra,
                    }
            turn += 1
    finally:
        for system, server in servers.items():
            server.close()
            found[system]["loop_lag"] = _loop_lag(server)
        for root in roots.values():
            shutil.rmtree(root, ignore_errors=True)
    return found


def _turned(systems: Sequence[str], turn: int) -> Sequence[str]:
    return systems if turn % 2 == 0 else tuple(reversed(systems))


def _warm_up(bootstrap: str, records: dict[int, int]) -> None:
    vk.create_topics(bootstrap, ["warm-up"])
    vk.producer_perf(bootstrap, "warm-up", records[100] // 4, 100, "1", "none")


def _perf_row(
    system: str,
    server: vk.Server,
    row: tuple[int, str, str],
    records: int,
    found: dict[str, Any],
    consume: bool = True,
) -> None:
    """ProducerPerformance into a fresh topic, then (`consume`) ConsumerPerformance reading it."""
    size, acks, codec = row
    b = server.bootstrap
    key = f"{size}B/acks={acks}/{codec}"
    topic = f"perf-{size}-{acks}-{codec}"
    vk.create_topics(b, [topic])
    vk.log(f"{system}: ProducerPerformance {key}")
    action = partial(vk.producer_perf, b, topic, records, size, acks, codec)
    found["perf"][key] = _measured(server, action, records * size)
    if consume:
        vk.log(f"{system}: ConsumerPerformance {key}")
        action = partial(vk.consumer_perf, b, topic, records)
        found["consume"][key] = _measured(server, action, records * size)


def _measured(server: vk.Server, action: Any, moved_bytes: int) -> dict[str, Any]:
    """One perf-tool run's MB/s, server CPU per GB, wait for a CPU, load, and the tool's extras."""
    sched_before = sched_seconds(server.pids())
    mb_s, cpu, extra = vk.measured(server, action)
    return {
        "mb_per_s": round(mb_s, 2),
        "server_cpu_s_per_gb": round(cpu / (moved_bytes / 1e9), 2),
        "server_wait_per_cpu_s": _wait_per_cpu(sched_before, sched_seconds(server.pids())),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        **extra,
    }


def _row(pier: list[float], kafka: list[float], better: str) -> dict[str, Any]:
    pm, km = statistics.median(pier), statistics.median(kafka)
    return {
        "pier": round(pm, 3),
        "pier_spread": [min(pier), max(pier)],
        "kafka": round(km, 3),
        "kafka_spread": [min(kafka), max(kafka)],
        "ratio": round(pm / km, 3) if km else None,
        "ratios_per_repetition": [
            round(p / k, 3) if k else None for p, k in zip(pier, kafka, strict=True)
        ],
        "better": better,
    }


def summarise(
    reps: list[dict[str, dict[str, Any]]], pier: str = "pier"
) -> dict[str, dict[str, Any]]:
    """Rows of `pier` (or BASELINE) against Kafka."""
    rows: dict[str, dict[str, Any]] = {}
    for part, label in PARTS:
        keys = [k for k in reps[0][pier].get(part, {}) if all(k in r[s].get(part, {})
                for r in reps for s in (pier, "kafka"))]  # fmt: skip
        for key in keys:
            for metric, better in PERF_METRICS:
                if metric not in reps[0][pier][part][key]:
                    continue
                values = {s: [r[s][part][key][metric] for r in reps] for s in (pier, "kafka")}
                rows[f"{label} {key} {PERF_METRIC_NAMES[metric]}"] = _row(
                    values[pier], values["kafka"], better
                )
    if all("omb" in r[s] for r in reps for s in (pier, "kafka")):
        for name, path, better in OMB_ROWS:
            values = {s: [_dig(r[s]["omb"], path) for r in reps] for s in (pier, "kafka")}
            rows[name] = _row(values[pier], values["kafka"], better)
    return rows


def markdown(rows: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| measure | Pier (min–max) | Kafka (min–max) | Pier/Kafka | per repetition | better |",
        "|---|---:|---:|---:|---|---|",
    ]
    for name, r in rows.items():
        ps, ks = r["pier_spread"], r["kafka_spread"]
        per = ", ".join(f"{x:g}" for x in r["ratios_per_repetition"] if x is not None)
        lines.append(
            f"| {name} | {r['pier']:g} ({ps[0]:g}–{ps[1]:g}) | {r['kafka']:g} ({ks[0]:g}–{ks[1]:g})"
            f" | {r['ratio']} | {per} | {r['better']} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--skip-omb", action="store_true")
    parser.add_argument("--omb-only", action="store_true", help="the OMB rows alone")
    parser.add_argument(
        "--kib", action="store_true",
        help="the 1 KiB rows instead: perf produce and consume acks=1 lz4/zstd/none, client 1 KiB",
    )  # fmt: skip
    parser.add_argument("--short", action="store_true", help="tiny, once: proves the code path")
    parser.add_argument("--out", type=Path, default=vk.RESULTS / "vs_kafka_rows.json")
    parser.add_argument("--baseline", type=Path, help="an earlier checkout run as pier-before")
    parser.add_argument(
        "--client-nice", type=int, default=0,
        help="OMB's client processes at this niceness, for both systems (OMB runs its workers on "
        "hosts of their own; on one host a positive value keeps them from starving the server)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    records = {} if args.omb_only else SHORT_RECORDS if args.short else RECORDS
    workloads = (
        None if args.skip_omb or args.kib else SHORT_WORKLOADS if args.short else FULL_WORKLOADS
    )
    repetitions = 1 if args.short else args.repetitions
    scratch = Path(tempfile.mkdtemp(prefix="vs-kafka-rows-"))
    reps: list[dict[str, dict[str, Any]]] = []
    try:
        for index in range(repetitions):
            systems = (*vk.SYSTEMS, BASELINE) if args.baseline else vk.SYSTEMS
            order = systems if index % 2 == 0 else tuple(reversed(systems))
            if args.kib:
                reps.append(kib_systems(order, scratch, records, args.baseline))
                continue
            rep = {
                s: one_system(s, scratch, records, workloads, args.baseline, args.client_nice)
                for s in order
            }
            if workloads is not None:
                _with_common_rate(rep, order, scratch, workloads, args.baseline, args.client_nice)
            reps.append(rep)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    document = {
        "environment": vk.environment(),
        "short": args.short,
        "client_nice": args.client_nice,
        "repetitions": reps,
        "summary": summarise(reps),
    }
    if args.baseline:
        document["summary_before"] = summarise(reps, BASELINE)
    text = json.dumps(document, indent=2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(text)
    print(markdown(document["summary"]), file=sys.stderr)
    if args.baseline:
        print(f"{BASELINE}:\n" + markdown(document["summary_before"]), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
