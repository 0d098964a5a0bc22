"""What `/config/changes` notices cost a broker in ZooKeeper mode: the fleet's sum of every
tenant's topic config changes.

Each AlterConfigs / IncrementalAlterConfigs of a topic writes a notice every broker lists and
acts on, kept 15 minutes (`config.changes.expiration.ms`); the gateway paces each tenant
(`tenant.config.changes.per.second`, 5 a second), not the sum over tenants, so a fleet carries
`rate × 900 s` notices at once: 10 tenants at their pacing, 45,000. This starts a real ZooKeeper
and one Pier broker on it, writes `--pending` notices first (another broker's history: listed at
every round like any other), then `--rate` notices a second for `--seconds` (each naming one real
topic, as a tenant's change would), and reads the broker's CPU seconds (utime + stime) over that
window. Prints one JSON document; `--repetitions` repeats each point on fresh servers.

Usage: `.venv/bin/python -m infra.bench.config_notices [--pending 0 20000 45000] [--rate 50]`.
Blocking, main thread only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kazoo.client import KazooClient

from brokers.zk.config_changes import CHANGE_PATH_PREFIX, CONFIG_CHANGES, topic_change
from infra.broker import start_broker
from infra.zookeeper import start_zookeeper

TOPIC = "tuned"
CREATE_CHUNK = 1_000
CPU_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CPU_TICKS  # utime, stime


def write_notices(zk: KazooClient, count: int) -> None:
    body = topic_change(TOPIC)
    for start in range(0, count, CREATE_CHUNK):
        pending = [
            zk.create_async(CHANGE_PATH_PREFIX, body, sequence=True)
            for _ in range(min(CREATE_CHUNK, count - start))
        ]
        for result in pending:
            result.get()


def paced_notices(zk: KazooClient, rate: float, seconds: float) -> int:
    body = topic_change(TOPIC)
    started = time.monotonic()
    written = 0
    while (elapsed := time.monotonic() - started) < seconds:
        due = int(elapsed * rate) + 1
        while written < due:
            zk.create(CHANGE_PATH_PREFIX, body, sequence=True)
            written += 1
        time.sleep(max(0.0, written / rate - (time.monotonic() - started)))
    return written


def one_run(pending: int, rate: float, seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="pier-notices-") as root:
        zookeeper = start_zookeeper(Path(root) / "zk")
        try:
            zk = KazooClient(hosts=zookeeper.connect)
            zk.start()
            zk.ensure_path(CONFIG_CHANGES)
            write_notices(zk, pending)
            broker = start_broker(
                Path(root) / "broker" / "data", zookeeper=zookeeper.connect, config={}
            )
            try:
                admin = AdminClient({"bootstrap.servers": broker.bootstrap})
                for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
                    future.result(30)
                before = cpu_seconds(broker.pid)
                written = paced_notices(zk, rate, seconds)
                used = cpu_seconds(broker.pid) - before
            finally:
                broker.stop()
            zk.stop()
        finally:
            zookeeper.stop()
    return {
        "pending": pending,
        "rate": rate,
        "seconds": seconds,
        "written": written,
        "broker_cpu_s": round(used, 2),
        "broker_cpu_share": round(used / seconds, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pending", type=int, nargs="+", default=[0, 20_000, 45_000])
    parser.add_argument("--rate", type=float, default=50.0, help="notices a second")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--repetitions", type=int, default=1)
    args = parser.parse_args(argv)
    points = []
    for pending in args.pending:
        runs = [one_run(pending, args.rate, args.seconds) for _ in range(args.repetitions)]
        shares = [r["broker_cpu_share"] for r in runs]
        points.append(
            {"pending": pending, "median_cpu_share": statistics.median(shares), "runs": runs}
        )
        print(json.dumps(points[-1]), file=sys.stderr)
    print(
        json.dumps({"benchmark": "config_notices", "rate": args.rate, "points": points}, indent=1)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
