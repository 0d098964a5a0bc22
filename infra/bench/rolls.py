"""A quiet producer's latency next to a topic that rolls a segment every MiB (the floor a tenant may
set `segment.bytes` to), against Apache Kafka and optionally an earlier checkout of Pier.

Owns the rolls workload: on one fresh server per system and repetition, topic `rolling` (one
partition, `segment.bytes=1048576`) and topic `quiet` (one partition, defaults); the quiet
producer of `infra.bench.noisy_neighbour` (1 KiB records at `--quiet-mb-s`, `linger.ms=0`,
acks=1) alone for `--seconds`, then again while that module's noisy producer offers `--noisy-mb-s`
of 1 KiB records to `rolling` (a separate process). Each roll writes a new segment's files and a
producer snapshot; whatever of it runs on the serving thread waits behind the disk's writeback of
the noisy topic's data. Per system: the quiet producer's p50/p99/p99.9 alone and during, the
noisy producer's acknowledged MB/s, the segments rolled and the server's CPU seconds; the median
over repetitions (systems alternate which goes first).

    .venv/bin/python -m infra.bench.rolls [--repetitions 3] [--seconds 10] [--noisy-mb-s 200]
        [--quiet-mb-s 1] [--baseline DIR] [--no-kafka] [--short] [--out PATH]

`--baseline DIR`: also Pier from that checkout (`git archive <commit> | tar -x -C DIR`, the
native modules copied in) as "pier-before". JSON on stdout and in `--out` (default
`infra/bench/results/rolls.json`), a chart beside it (`.png`); progress on stderr. Blocking; every server is stopped and its directory
removed before the next starts.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from infra.bench import vs_kafka as vk
from infra.bench.noisy_neighbour import NoisyProducer, quiet_latencies
from infra.bench.vs_kafka_omb import quantiles
from infra.bench.vs_kafka_rows import _baseline_program
from infra.bench.vs_kafka_workloads import dig
from infra.broker import PIER_PROGRAM

SEGMENT_BYTES = 1 << 20  # the tenant floor of segment.bytes (docs/security.md)
RESULTS = Path(__file__).resolve().parent / "results"
BASELINE = "pier-before"


def _topics(bootstrap: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics(
        [
            NewTopic("rolling", 1, 1, config={"segment.bytes": str(SEGMENT_BYTES)}),
            NewTopic("quiet", 1, 1),
        ],
        operation_timeout=60,
    )
    for future in futures.values():
        future.result(timeout=120)
    vk.wait_led(bootstrap, {"rolling", "quiet"}, 2, timeout=120)


def _segments(root: Path) -> int:
    """`.log` files of the rolling topic's partition under the server's directory."""
    return sum(1 for _ in root.rglob("rolling-0/*.log"))


def one_run(system: str, scratch: Path, args: argparse.Namespace) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix=f"{system}-rolls-", dir=scratch))
    program = PIER_PROGRAM if system != BASELINE else _baseline_program(args.baseline)
    server = vk.start("kafka" if system == "kafka" else "pier", root, 1, program=program)
    try:
        connection = {"bootstrap.servers": server.bootstrap}
        _topics(server.bootstrap)
        alone = quiet_latencies(connection, "quiet", args.quiet_mb_s, args.seconds)
        before = vk.cpu_seconds(server.pids())
        with NoisyProducer(connection, "rolling", args.noisy_mb_s) as noisy:
            during = quiet_latencies(connection, "quiet", args.quiet_mb_s, args.seconds)
        cpu = vk.cpu_seconds(server.pids()) - before
        segments = _segments(root)
    finally:
        server.close()
    report = noisy.report
    assert report is not None
    acked = report.acked_bytes_per_s[1:] or report.acked_bytes_per_s
    return {
        "alone": quantiles(alone),
        "during": quantiles(during),
        "noisy_mb_s": round(statistics.mean(acked) / 1e6, 1) if acked else 0.0,
        "noisy_failures": report.failures,
        "segments": segments,
        "server_cpu_s": round(cpu, 2),
    }


ROWS = (
    ("quiet p50 alone ms", ("alone", "p50_ms")),
    ("quiet p99 alone ms", ("alone", "p99_ms")),
    ("quiet p50 during rolls ms", ("during", "p50_ms")),
    ("quiet p99 during rolls ms", ("during", "p99_ms")),
    ("quiet p99.9 during rolls ms", ("during", "p999_ms")),
    ("rolling topic MB/s acknowledged", ("noisy_mb_s",)),
    ("segments of the rolling topic", ("segments",)),
    ("server CPU s (during)", ("server_cpu_s",)),
)


def summarize(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for name, path in ROWS:
        row: dict[str, Any] = {}
        for system, found in runs.items():
            values = [dig(run, path) for run in found]
            row[system] = statistics.median(values)
            row[f"{system}_spread"] = [min(values), max(values)]
        rows[name] = row
    return rows


def _chart(rows: dict[str, dict[str, Any]], systems: Sequence[str], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [name for name in rows if name.startswith("quiet")]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.8 / len(systems)
    for i, system in enumerate(systems):
        ax.bar(
            [x + i * width for x in range(len(shown))],
            [rows[name][system] for name in shown],
            width,
            label=system,
        )
    ax.set_xticks([x + width * (len(systems) - 1) / 2 for x in range(len(shown))])
    ax.set_xticklabels([n.replace("quiet ", "") for n in shown], fontsize=8)
    ax.set_ylabel("quiet producer latency, ms (median of runs)")
    ax.set_yscale("log")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repetitions", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--noisy-mb-s", type=float, default=200.0)
    parser.add_argument("--quiet-mb-s", type=float, default=1.0)
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--no-kafka", action="store_true")
    parser.add_argument("--short", action="store_true", help="one 2 s run per system (CI)")
    parser.add_argument("--out", type=Path, default=RESULTS / "rolls.json")
    args = parser.parse_args(argv)
    if args.short:
        args.repetitions, args.seconds, args.noisy_mb_s = 1, 2.0, 20.0
    systems = ["pier"] + ([] if args.no_kafka else ["kafka"])
    systems += [BASELINE] if args.baseline is not None else []
    runs: dict[str, list[dict[str, Any]]] = {system: [] for system in systems}
    with tempfile.TemporaryDirectory(prefix="rolls-") as scratch:
        for rep in range(args.repetitions):
            for system in systems if rep % 2 == 0 else systems[::-1]:
                vk.log(f"rolls: repetition {rep + 1}/{args.repetitions}: {system}")
                runs[system].append(one_run(system, Path(scratch), args))
    rows = summarize(runs)
    document = {"segment_bytes": SEGMENT_BYTES, "noisy_mb_s_offered": args.noisy_mb_s,
                "quiet_mb_s": args.quiet_mb_s, "seconds": args.seconds, "rows": rows,
                "runs": runs}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(document, indent=2))
    _chart(rows, systems, args.out.with_suffix(".png"))
    json.dump(document, sys.stdout, indent=2)
    print(file=sys.stdout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
