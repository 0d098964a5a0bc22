"""Cluster benchmark: replication's throughput cost, failover, controlled shutdown, mass elections.

Usage: `python infra/bench/cluster.py [--quick] [--profile]` from the repository root (see
infra/bench/README.md). Starts its own ZooKeeper and three brokers with `infra.stack.Stack` (the
launcher of `infra/up` and the tests) on free ports in a temporary directory, then, in one run:
1. failover (`failover.kill_leader`, 5 repetitions): `kill -9` of a partition leader under a
   steady acks=all producer → first acknowledged write (target ≤ session timeout + 1 s);
2. controlled shutdown (`failover.shut_down_leader`, 3 repetitions): SIGTERM of a leader, longest
   gap between acknowledged acks=all writes (target ≤ 1 s);
3. throughput (`replicated_throughput.measure`): 200k × 1 KiB and 500k × 100 B, RF 3 acks=all vs
   RF 1 acks=1, a cold pass and a warm one after a page-cache warm-up (target ratio ≥ 0.5);
4. elections (`elections.measure`): a 1,000-partition RF 3 topic, creation to all leaders, then
   `kill -9` of the broker leading about a third of them until all have a new leader.
Prints one JSON document and writes it to `<results>/cluster.json` with a chart `cluster.png`.
`--quick` uses 100× fewer records, 60 partitions, one repetition each and a 4 s session timeout
(under a minute);
`--profile` records the leader of each warm-pass topic with py-spy. Every process started is
stopped on exit, also on error, Ctrl-C or SIGTERM. Runs on the main thread (each failover
repetition adds a producer thread).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from infra.bench import elections, failover, replicated_throughput
from infra.bench.cluster_report import document, write_chart
from infra.bench.cluster_view import ClusterView
from infra.bench.report import write_json
from infra.stack import Stack

RESULTS = Path(__file__).resolve().parent / "results"
BROKERS = 3
# Leadership stays where failover put it: a preferred-leader election in the middle of a
# measurement would show up as one more gap.
FIXED_SETTINGS = {"auto.leader.rebalance.enable": "false"}
# Kafka's default is 18 s; 6 s keeps five repetitions short. 4 s is ZooKeeper's floor (2 × tickTime).
FULL = {"scale": 1, "kills": 5, "shutdowns": 3, "partitions": 1000, "session_ms": 6000}
QUICK = {"scale": 100, "kills": 1, "shutdowns": 1, "partitions": 60, "session_ms": 4000}


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repetition each")
    parser.add_argument("--profile", action="store_true", help="py-spy the warm-pass leaders")
    parser.add_argument("--session-timeout-ms", type=int, help="zookeeper.session.timeout.ms")
    parser.add_argument("--partitions", type=int, help="partitions of the elections topic")
    parser.add_argument("--results", type=Path, default=RESULTS, help="output directory")
    return parser.parse_args(argv)


def _terminate(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through the `with Stack` that stops the fleet


def run(stack: Stack, args: argparse.Namespace, plan: dict[str, int]) -> dict[str, Any]:
    assert stack.zookeeper is not None
    deadline_s = session_ms(args, plan) / 1000 + 60
    view = ClusterView(stack.bootstrap, stack.zookeeper.connect)
    try:
        view.wait_for_brokers(BROKERS)
        failover.prepare(view)
        kills = [failover.kill_leader(stack, view, deadline_s) for _ in range(plan["kills"])]
        progress("kill -9 → first ack (s)", [k.first_ack_s for k in kills])
        gaps = [
            failover.shut_down_leader(stack, view, deadline_s) for _ in range(plan["shutdowns"])
        ]
        progress("SIGTERM longest gap (s)", [g.longest_gap_s for g in gaps])
        workloads = [(n // plan["scale"], size) for n, size in replicated_throughput.WORKLOADS]
        profile_dir = args.results if args.profile else None
        runs = replicated_throughput.measure(stack, view, workloads, profile_dir)
        partitions = args.partitions or plan["partitions"]
        election = elections.measure(stack, view, partitions, deadline_s)
        progress("elections", [election.zk_leaders_s, election.election_s])
    finally:
        view.close()
    settings = {**broker_config(args, plan), "brokers": BROKERS}
    return document(settings, runs, kills, gaps, election, args.quick)


def session_ms(args: argparse.Namespace, plan: dict[str, int]) -> int:
    return int(args.session_timeout_ms or plan["session_ms"])


def broker_config(args: argparse.Namespace, plan: dict[str, int]) -> dict[str, str]:
    return {**FIXED_SETTINGS, "zookeeper.session.timeout.ms": str(session_ms(args, plan))}


def progress(label: str, values: Sequence[float | None]) -> None:
    shown = ", ".join("never" if v is None else f"{v:.3f}" for v in values)
    print(f"{label}: {shown}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    plan = QUICK if args.quick else FULL
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        with tempfile.TemporaryDirectory(prefix="pier-bench-cluster-") as scratch:
            config = broker_config(args, plan)
            with Stack(Path(scratch), zookeeper=True, brokers=BROKERS, broker_config=config) as s:
                doc = run(s, args, plan)
    finally:
        signal.signal(signal.SIGTERM, previous)
    print(write_json(doc, args.results / "cluster.json"))
    write_chart(doc, args.results / "cluster.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
