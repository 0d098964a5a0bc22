"""One run of ducktape's transactions_test on any Kafka-compatible bootstrap: seed, copy, kill, check.

Owns: `CopyPlan` (the figures: Kafka's test copies 100,000 records from 2 input partitions to 3
output partitions in transactions of 750 with a 40 s transaction timeout, one copier per input
partition, each killed 3 times after ≥ 20 % progress of its incarnation, 60 s to make that
progress, 120 s to finish), `CopyRun` (the topics, the seeded input, the copiers, the concurrent
read_committed reader, and the checks of `copy_checks` at the end, with the figures measured) and
`bounce_copiers` (the kill rounds over any list of copiers, with a hook between rounds where a
test bounces a broker). The same run works against Pier and against Apache Kafka, and through
the gateway (`settings` carry SASL). Blocking; a run belongs to the thread that started it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from tests.e2e.kafka_admin import ADMIN_TIMEOUT_S, wait_for_leaders
from tests.e2e.transactions.copier_process import CopierProcess, CopierSpec
from tests.e2e.transactions.copy_checks import (
    Seeded,
    TransactionFigures,
    check_atomic,
    check_concurrent,
    check_exact_copy,
    seed_input,
)
from tests.e2e.transactions.readers import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ConcurrentReader,
    high_watermarks,
    read_topic,
)


@dataclass(frozen=True)
class CopyPlan:
    records: int = 100_000
    input_partitions: int = 2
    output_partitions: int = 3
    transaction_size: int = 750
    transaction_timeout_ms: int = 40_000
    kill_rounds: int = 3
    kill_after_percent: float = 20.0
    # the 2nd transaction of each incarnation and every 10th after it aborted on purpose (Kafka's
    # test has no such aborts; they put aborted data in the log whatever the kills hit)
    abort_every: int = 10
    progress_timeout_s: float = 60.0
    copier_timeout_s: float = 120.0
    replication_factor: int = 1
    min_insync_replicas: int = 1


# Kafka's test: topics RF 3 with min.insync.replicas 2 on three brokers.
CLUSTER_PLAN = CopyPlan(replication_factor=3, min_insync_replicas=2)


@dataclass
class CopyReport:
    seeded: int
    transactions: TransactionFigures
    copy_seconds: float  # from the copiers' start to the last one done (kills included)
    kills: int
    concurrent_records: int

    @property
    def records_per_second(self) -> float:
        return self.seeded / self.copy_seconds

    def summary(self) -> str:
        t = self.transactions
        return (
            f"{self.seeded} records copied in {self.copy_seconds:.1f} s"
            f" ({self.records_per_second:.0f} records/s) through {self.kills} kills;"
            f" {t.committed} transactions committed, {t.aborted_on_purpose} aborted on purpose,"
            f" {t.aborted_by_crash} aborted after a kill, {t.aborted_records} aborted records skipped"
        )


@dataclass
class CopyRun:
    bootstrap: str
    plan: CopyPlan
    root: Path
    name: str = "copy"  # prefix of topic names
    settings: Mapping[str, Any] = field(default_factory=dict)  # extra librdkafka settings
    copiers: list[CopierProcess] = field(default_factory=list)
    reader: ConcurrentReader | None = None
    seeded: Seeded | None = None
    started_at: float = 0.0

    @property
    def input_topic(self) -> str:
        return f"{self.name}-input"

    @property
    def output_topic(self) -> str:
        return f"{self.name}-output"

    @property
    def group(self) -> str:
        return "transactions-test-consumer-group"

    def create_topics(self) -> None:
        plan = self.plan
        admin = AdminClient({"bootstrap.servers": self.bootstrap, **self.settings})
        config = {"min.insync.replicas": str(plan.min_insync_replicas)}
        topics = {
            self.input_topic: plan.input_partitions,
            self.output_topic: plan.output_partitions,
        }
        futures = admin.create_topics(
            [NewTopic(t, n, plan.replication_factor, config=config) for t, n in topics.items()],
            operation_timeout=ADMIN_TIMEOUT_S,
        )
        for future in futures.values():
            future.result(timeout=ADMIN_TIMEOUT_S)
        for topic, partitions in topics.items():
            wait_for_leaders(admin, topic, partitions)

    def seed(self) -> Seeded:
        plan = self.plan
        self.seeded = seed_input(
            self.bootstrap,
            self.input_topic,
            plan.input_partitions,
            plan.records,
            settings=self.settings,
        )
        return self.seeded

    def start(self) -> None:
        """Start one copier per input partition and the concurrent read_committed reader."""
        plan = self.plan
        for partition in range(plan.input_partitions):
            spec = CopierSpec(
                bootstrap=self.bootstrap,
                transactional_id=f"copier-{partition}",
                group=self.group,
                input_topic=self.input_topic,
                input_partition=partition,
                output_topic=self.output_topic,
                transaction_size=plan.transaction_size,
                transaction_timeout_ms=plan.transaction_timeout_ms,
                abort_every=plan.abort_every,
                settings=self.settings,
            )
            self.copiers.append(CopierProcess(spec, self.root / f"{self.name}-copier-{partition}"))
        self.started_at = time.monotonic()
        for copier in self.copiers:
            copier.start()
        self.reader = ConcurrentReader(
            self.bootstrap, self.output_topic, plan.output_partitions, self.settings
        )

    def wait_done(self) -> float:
        """Until every copier finished; the seconds since `start`."""
        for copier in self.copiers:
            copier.wait_done(self.plan.copier_timeout_s)
        return time.monotonic() - self.started_at

    def check(self, copy_seconds: float) -> CopyReport:
        """The concurrent reader catches up, then the output is read both ways and checked."""
        assert self.seeded is not None and self.reader is not None
        plan = self.plan
        ends = high_watermarks(
            self.bootstrap, self.output_topic, plan.output_partitions, self.settings
        )
        self.reader.wait_caught_up(ends, timeout=90)
        seen = self.reader.stop()
        read = {
            isolation: read_topic(
                self.bootstrap,
                self.output_topic,
                plan.output_partitions,
                isolation,
                settings=self.settings,
            )
            for isolation in (READ_COMMITTED, READ_UNCOMMITTED)
        }
        committed, uncommitted = read[READ_COMMITTED], read[READ_UNCOMMITTED]
        check_exact_copy(self.seeded, committed)
        reported = {event: self.reported(event) for event in ("produced", "committed", "aborted")}
        figures = check_atomic(committed, uncommitted, reported, self.deliberate_aborts())
        check_concurrent(seen, committed, uncommitted)
        kills = sum(copier.incarnation for copier in self.copiers)
        return CopyReport(self.seeded.records, figures, copy_seconds, kills, len(seen))

    def reported(self, event: str) -> dict[str, int]:
        return {tag: n for copier in self.copiers for tag, n in copier.tags(event).items()}

    def deliberate_aborts(self) -> set[str]:
        return {
            event["txn"]
            for copier in self.copiers
            for event in copier.poll()
            if event["event"] == "aborted" and event["reason"] == "deliberate"
        }

    def close(self) -> None:
        for copier in self.copiers:
            copier.stop()
        if self.reader is not None:
            self.reader.stop_quietly()


def bounce_copiers(
    copiers: Sequence[CopierProcess],
    plan: CopyPlan,
    between_rounds: Callable[[int], None] = lambda _round: None,
) -> None:
    """ducktape's `bounce_copiers` with SIGKILL: `kill_rounds` times, each copier in turn is
    killed once its running incarnation made `kill_after_percent` progress, and restarted. The
    kill lands when the copier reported a transaction flushed and not committed yet, so most
    kills leave an open transaction behind (the commit may still win the race; the checks
    decide from what the readers see).
    `between_rounds(n)` runs after round n (0-based) — e.g. a broker bounce."""
    for round_number in range(plan.kill_rounds):
        for copier in copiers:
            copier.wait_progress(plan.kill_after_percent, plan.progress_timeout_s)
            copier.wait_in_transaction(plan.progress_timeout_s)
            copier.kill()
            copier.start()
        between_rounds(round_number)
