"""The broker's event loop, uvloop against asyncio's, at OMB's fixed rate (issues 24/25).

Usage: `python -m infra.bench.event_loop_ab [--rate R] [--repetitions N] [--out DIR]`. Each
repetition starts a fresh broker per loop (`PIER_EVENT_LOOP`, pier/event_loop.py), the two in
alternating order, and runs `vs_kafka_omb`'s fixed-rate phase against it at the same rate for both
(1 topic x 100 partitions, 1 KiB records, 16 producer and 16 consumer processes, OMB's client
settings): e2e and publish p50/p99/p99.9, the rate reached, and the broker's CPU seconds (user +
system, /proc) over the phase (join, warm-up and drain included; also per GB of records produced).
The broker's ready line must name the loop it was asked for. Prints one JSON document (runs,
medians per loop, uvloop ÷ asyncio of the medians, the 1-minute load at each run's end: the
machine is shared) and writes it to `<out>/event_loop_ab.json`. The gateway's side is
`infra.bench.gateway --phases throughput` run with `PIER_EVENT_LOOP` set (docs/benchmarks.md
"The event loop"). Blocking; every broker started is stopped before the next one starts.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from infra.bench.report import write_json
from infra.bench.vs_kafka_omb import _phase
from infra.stack import start_broker

LOOPS = ("asyncio", "uvloop")
PARTITIONS = 100
CPU_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Sizes:
    """OMB's shape (`vs_kafka_omb.WorkloadSizes`), with the fixed phase's durations."""

    omb_seconds: float
    omb_warmup_seconds: float
    omb_partitions: int = PARTITIONS
    omb_producers: int = 16
    omb_consumers: int = 16
    omb_max_warmup_seconds: float = 0.0


def broker_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CPU_TICKS  # utime, stime


def create_topic(bootstrap: str, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, PARTITIONS, 1)]).values():
        future.result(timeout=60)


def one_run(root: Path, loop: str, rate: float, sizes: Sizes) -> dict[str, Any]:
    os.environ["PIER_EVENT_LOOP"] = loop
    broker = start_broker(root / loop / "data", wait=60)
    try:
        ready = broker.log_path.read_text(errors="replace")
        if f"event_loop={loop}" not in ready:
            raise RuntimeError(f"the broker did not run on {loop}: {broker.log_path}")
        create_topic(broker.bootstrap, "omb-fixed")
        before = broker_cpu_s(broker.pid)
        phase = _phase(broker.bootstrap, "omb-fixed", sizes, rate)
        cpu_s = broker_cpu_s(broker.pid) - before
    finally:
        broker.stop()
    return {
        "loop": loop,
        "rate_target": rate,
        "records_per_s": phase["records_per_s"],
        "e2e_ms": phase["e2e"],
        "publish_ms": phase["publish"],
        "broker_cpu_s": round(cpu_s, 2),
        "broker_cpu_s_per_gb": round(cpu_s / (phase["produced"] * 1024 / 1e9), 1),
        "produced": phase["produced"],
        "load_1m": round(os.getloadavg()[0], 1),
    }


def summary(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def median(loop: str, pick: Any) -> float:
        return float(statistics.median(pick(run) for run in runs if run["loop"] == loop))

    measures = {
        "e2e_p50_ms": lambda r: r["e2e_ms"]["p50_ms"],
        "e2e_p99_ms": lambda r: r["e2e_ms"]["p99_ms"],
        "publish_p99_ms": lambda r: r["publish_ms"]["p99_ms"],
        "records_per_s": lambda r: r["records_per_s"],
        "broker_cpu_s": lambda r: r["broker_cpu_s"],
        "broker_cpu_s_per_gb": lambda r: r["broker_cpu_s_per_gb"],
    }
    medians = {loop: {k: median(loop, f) for k, f in measures.items()} for loop in LOOPS}
    ratio = {
        k: round(medians["uvloop"][k] / medians["asyncio"][k], 3)
        for k in measures
        if medians["asyncio"][k]
    }
    return {"medians": medians, "uvloop_over_asyncio": ratio}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rate", type=float, default=1500.0, help="records/s (%(default)s)")
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0, help="measured (%(default)s)")
    parser.add_argument("--warmup", type=float, default=10.0, help="not measured (%(default)s)")
    parser.add_argument("--out", type=Path, default=Path("event-loop-ab"))
    args = parser.parse_args(argv)
    sizes = Sizes(omb_seconds=args.seconds, omb_warmup_seconds=args.warmup)
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="event-loop-ab-") as scratch:
        for repetition in range(args.repetitions):
            order = LOOPS if repetition % 2 == 0 else LOOPS[::-1]
            for loop in order:
                root = Path(scratch) / f"r{repetition}"
                runs.append(one_run(root, loop, args.rate, sizes))
                print(runs[-1], flush=True)
    doc = {"rate": args.rate, "runs": runs, **summary(runs)}
    print(write_json(doc, args.out / "event_loop_ab.json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
