"""Consumer group benchmark: rebalance time after a member leaves, and offset-commit throughput.

Usage: `python infra/bench/groups.py [--quick]` from the repository root. Starts one broker through
`infra.stack.start_broker` in a temporary directory (`group.initial.rebalance.delay.ms=0`), then:
1. rebalance: 10 confluent-kafka consumers (eager `range`, a 20-partition topic) form a group;
   one leaves (close() sends LeaveGroup) and we time how long until the other 9 again own every
   partition, disjointly — what a user waits for. Rounds per `heartbeat.interval.ms` (librdkafka's
   default 3000 and 500): the survivors learn of the rebalance from their next heartbeat, so the
   interval dominates the result;
2. commits: a group member commits synchronously in a loop, one partition per commit and 100 per
   commit (commits/s, offsets/s, p50/p99 round trip).
Prints one JSON document and writes it to `infra/bench/results/groups.json`. Each consumer is
polled by its own thread (librdkafka releases the GIL); the main thread only watches assignments.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from infra.stack import start_broker

RESULTS = Path(__file__).resolve().parent / "results"
MEMBERS = 10
PARTITIONS = 20
WAIT_S = 120.0
BROKER_CONFIG = {"group.initial.rebalance.delay.ms": "0"}


class PolledConsumer:
    """A consumer owned by one thread: it polls, publishes its assignment, and closes on request.

    Only that thread touches the consumer: librdkafka handle calls from a second thread can block
    behind a poll in progress.
    """

    def __init__(self, config: dict[str, Any], topic: str) -> None:
        self.owned: frozenset[int] = frozenset()
        self._config = config
        self._topic = topic
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        consumer = Consumer(self._config)
        consumer.subscribe([self._topic])
        try:
            while not self._stop.is_set():
                consumer.poll(0.005)
                self.owned = frozenset(tp.partition for tp in consumer.assignment())
        finally:
            consumer.close()  # a dynamic member sends LeaveGroup here

    def assignment(self) -> frozenset[int]:
        return self.owned

    def close(self) -> None:
        self._stop.set()
        self._thread.join(WAIT_S)


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(timeout=WAIT_S)


def wait_split(members: Sequence[PolledConsumer]) -> float:
    """Seconds until the members own every partition exactly once (polled every millisecond)."""
    started = time.perf_counter()
    deadline = started + WAIT_S
    while True:
        owned = [m.assignment() for m in members]
        if all(owned) and sorted(p for o in owned for p in o) == list(range(PARTITIONS)):
            return time.perf_counter() - started
        if time.perf_counter() > deadline:
            raise TimeoutError(f"no split of {PARTITIONS} partitions: {owned}")
        time.sleep(0.001)


def rebalance_rounds(bootstrap: str, heartbeat_ms: int, rounds: int) -> dict[str, Any]:
    topic = f"bench-groups-hb{heartbeat_ms}"
    create_topic(bootstrap, topic, PARTITIONS)
    config = {
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-rebalance-{heartbeat_ms}",
        "heartbeat.interval.ms": heartbeat_ms,
        "session.timeout.ms": 45_000,
        "partition.assignment.strategy": "range",
    }
    members = [PolledConsumer(config, topic) for _ in range(MEMBERS)]
    timings = []
    try:
        formed = wait_split(members)
        for _ in range(rounds):
            leaving = members.pop()
            started = time.perf_counter()
            leaving.close()
            timings.append(time.perf_counter() - started + wait_split(members))
            members.append(PolledConsumer(config, topic))  # back to ten for the next round
            wait_split(members)
    finally:
        for member in members:
            member.close()
    return {
        "heartbeat_interval_ms": heartbeat_ms,
        "members": MEMBERS,
        "partitions": PARTITIONS,
        "group_formed_s": round(formed, 3),
        "stabilise_after_leave_s": [round(t, 3) for t in timings],
        "stabilise_after_leave_median_s": round(statistics.median(timings), 3),
    }


@contextmanager
def group_member(bootstrap: str, topic: str) -> Iterator[Consumer]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-commit-{topic}",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + WAIT_S
        while not consumer.assignment():
            if time.monotonic() > deadline:
                raise TimeoutError("no assignment for the committing member")
            consumer.poll(0.05)
        yield consumer
    finally:
        consumer.close()


def commit_run(bootstrap: str, partitions_per_commit: int, commits: int) -> dict[str, Any]:
    topic = f"bench-commits-{partitions_per_commit}"
    create_topic(bootstrap, topic, partitions_per_commit)
    latencies = []
    with group_member(bootstrap, topic) as consumer:
        started = time.perf_counter()
        for i in range(commits):
            offsets = [TopicPartition(topic, p, i + 1) for p in range(partitions_per_commit)]
            sent = time.perf_counter()
            consumer.commit(offsets=offsets, asynchronous=False)
            latencies.append(time.perf_counter() - sent)
        elapsed = time.perf_counter() - started
    latencies.sort()
    return {
        "partitions_per_commit": partitions_per_commit,
        "commits": commits,
        "commits_per_s": round(commits / elapsed, 1),
        "offsets_per_s": round(commits * partitions_per_commit / elapsed, 1),
        "p50_ms": round(latencies[len(latencies) // 2] * 1000, 3),
        "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 3),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and commits")
    args = parser.parse_args(argv)
    rounds, commits = (1, 500) if args.quick else (3, 3000)
    with tempfile.TemporaryDirectory(prefix="pier-bench-groups-") as scratch:
        broker = start_broker(Path(scratch) / "broker" / "data", config=BROKER_CONFIG)
        try:
            rebalances = []
            for heartbeat_ms in (3000, 500):
                rebalances.append(rebalance_rounds(broker.bootstrap, heartbeat_ms, rounds))
                print(f"rebalance: {rebalances[-1]}", file=sys.stderr)
            commit_runs = []
            for per_commit in (1, 100):
                commit_runs.append(commit_run(broker.bootstrap, per_commit, commits))
                print(f"commits: {commit_runs[-1]}", file=sys.stderr)
        finally:
            broker.stop()
    document = {
        "benchmark": "groups",
        "quick": args.quick,
        "rebalance": rebalances,
        "offset_commit": commit_runs,
        "python": sys.version.split()[0],
    }
    RESULTS.mkdir(exist_ok=True)
    text = json.dumps(document, indent=2)
    (RESULTS / "groups.json").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
