"""Produce throughput with replication: RF 3 acks=all against RF 1 acks=1 on the same three brokers.

Owns the throughput phase of the cluster benchmark. Each workload (records × bytes, codec `none`)
is produced by `throughput.produce_run` (the single-broker benchmark's producer and batching:
linger.ms=5, batch.size=1 MiB) to a fresh one-partition topic, once with RF 1 and acks=1 and once
with RF 3, acks=all and `min.insync.replicas=2`; the ratio of their MB/s is what replication costs.
Two passes: `cold` on brokers that have just started, then, after `warm_page_cache`, `warm`. On
this VM the first touch of a page-cache page is ~16× slower than its reuse (issue 2's note), so the
warm-up writes and deletes a scratch file as large as the warm pass will write on all brokers
together; the freed pages are then reused by the brokers' segments. Blocking, main thread only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.bench.cluster_view import ClusterView, poll_until
from infra.bench.profiling import py_spy_recording
from infra.bench.throughput import Throughput, produce_run
from infra.stack import Stack

WORKLOADS = ((200_000, 1024), (500_000, 100))  # (records, record bytes)
# (name, replication factor, acks); the name is the key of the ratio in the report.
SETUPS = (("rf1_acks_1", 1, "1"), ("rf3_acks_all", 3, "all"))
PASSES = ("cold", "warm")
SCRATCH_CHUNK = 8 << 20
WARM_UP_MARGIN = 1.5  # segment indexes, the leader-epoch and producer-state files, and slack


@dataclass(frozen=True, slots=True)
class ReplicatedRun:
    pass_name: str
    setup: str
    leader: int
    run: Throughput

    def as_json(self) -> dict[str, Any]:
        return {
            "pass": self.pass_name,
            "setup": self.setup,
            "leader": self.leader,
            **self.run.as_json(),
        }


def topic_for(pass_name: str, setup: str, count: int, size: int) -> str:
    return f"bench-{pass_name}-{setup}-{count}x{size}B"


def bytes_written(workloads: Sequence[tuple[int, int]]) -> int:
    """Bytes one pass appends over all brokers: RF 1 writes each record once, RF 3 three times."""
    replicas = sum(rf for _, rf, _ in SETUPS)
    return sum(count * size for count, size in workloads) * replicas


def warm_page_cache(directory: Path, size: int) -> None:
    """Write then delete `size` bytes so the kernel's free pages have been touched once."""
    scratch = directory / "page-cache-warm-up"
    chunk = bytes(SCRATCH_CHUNK)
    with scratch.open("wb") as out:
        for _ in range(0, size, SCRATCH_CHUNK):
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())  # written back, so the pages are clean and freed by the unlink
    scratch.unlink()


def leader_of(view: ClusterView, topic: str, replicas: int) -> int:
    return poll_until(lambda: view.leader_with_full_isr(topic, 0, replicas), 60, f"{topic} in sync")


def one_pass(
    stack: Stack,
    view: ClusterView,
    pass_name: str,
    workloads: Sequence[tuple[int, int]],
    profile_dir: Path | None,
) -> list[ReplicatedRun]:
    runs = []
    for count, size in workloads:
        for setup, replicas, acks in SETUPS:
            topic = topic_for(pass_name, setup, count, size)
            configs = {"min.insync.replicas": "2"} if replicas > 1 else {}
            view.create_topic(topic, 1, replicas, configs)
            leader = leader_of(view, topic, replicas)
            connection = {"bootstrap.servers": stack.bootstrap, "acks": acks}
            svg = (profile_dir or Path()) / f"{topic}-leader.svg"
            pid = next(b.pid for b in stack.brokers if b.node_id == leader)
            with py_spy_recording(pid, svg) if profile_dir else nullcontext():
                run = produce_run(setup, connection, topic, count, size, "none")
            runs.append(ReplicatedRun(pass_name, setup, leader, run))
            label = f"{pass_name} {setup} {count}x{size}B (leader {leader})"
            print(
                f"{label}: {run.records_per_s:,.0f} records/s, {run.mb_per_s:,.1f} MB/s",
                file=sys.stderr,
            )
    return runs


def measure(
    stack: Stack,
    view: ClusterView,
    workloads: Sequence[tuple[int, int]],
    profile_dir: Path | None = None,
) -> list[ReplicatedRun]:
    """Cold pass, page-cache warm-up, warm pass (profiled with py-spy when `profile_dir` is set)."""
    cold = one_pass(stack, view, "cold", workloads, None)
    warm_page_cache(stack.root, int(bytes_written(workloads) * WARM_UP_MARGIN))
    return cold + one_pass(stack, view, "warm", workloads, profile_dir)


def ratios(runs: Sequence[ReplicatedRun]) -> dict[str, dict[str, float]]:
    """Per pass and workload: RF 3 acks=all MB/s divided by RF 1 acks=1 MB/s."""
    by_key = {(r.pass_name, r.setup, r.run.record_bytes): r.run for r in runs}
    found: dict[str, dict[str, float]] = {}
    for (pass_name, setup, size), run in by_key.items():
        base = by_key.get((pass_name, SETUPS[0][0], size))
        if setup == SETUPS[1][0] and base is not None:
            found.setdefault(pass_name, {})[f"{size}B"] = round(run.mb_per_s / base.mb_per_s, 3)
    return found
