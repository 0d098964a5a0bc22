"""Replication metrics named after Kafka's `kafka.server:type=ReplicaManager` MBeans.

Owns: `ReplicaManagerCollector`, which computes at scrape time from the hosted partitions
LeaderCount, PartitionCount, UnderReplicatedPartitions (leaders whose ISR is smaller than the
replica set), UnderMinIsrPartitionCount, AtMinIsrPartitionCount and OfflineReplicaCount (always 0:
Pier has one log dir and stops on its failure, so a live broker has no offline replica); and
`IsrChangeCounters`, the replica manager's `isr_update_observer`, counting IsrShrinks, IsrExpands
and FailedIsrUpdates when the leader's ISR write to ZooKeeper completes (Kafka marks them there,
not when the change is decided). ISR changes the controller makes (a dead broker dropped from the
ISRs) are not leader shrinks, in Kafka as here. Also `LastStableOffsetLagCollector`: per led
partition, the high watermark minus the last stable offset (Kafka's
`kafka.cluster:type=Partition,name=LastStableOffsetLag`): how far an open transaction holds
read_committed consumers back. Controller metrics: `brokers/controller/metrics.py`.

Concurrency: counters are prometheus-client objects (thread-safe). The collector runs on the
metrics HTTP thread and only reads the event loop's state (`ReplicaManager.partitions()` copies
the dict first, atomically under the GIL), so a scrape may be one change stale, never broken.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from brokers.replication.partition import Partition


class IsrChangeCounters:
    """IsrShrinksPerSec / IsrExpandsPerSec / FailedIsrUpdatesPerSec as Prometheus counters;
    `record` is the replica manager's `isr_update_observer`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        prefix = "kafka_server_replicamanager_"
        self.shrinks = Counter(
            prefix + "isrshrinks",
            "Leader ISR shrinks written (IsrShrinksPerSec).",
            registry=registry,
        )
        self.expands = Counter(
            prefix + "isrexpands",
            "Leader ISR expands written (IsrExpandsPerSec).",
            registry=registry,
        )
        self.failed = Counter(
            prefix + "failedisrupdates",
            "Leader ISR writes refused or failed (FailedIsrUpdatesPerSec).",
            registry=registry,
        )

    def record(self, old_isr: list[int], new_isr: list[int], written: bool) -> None:
        if not written:
            self.failed.inc()
        elif len(new_isr) < len(old_isr):
            self.shrinks.inc()
        elif len(new_isr) > len(old_isr):
            self.expands.inc()


class ReplicaManagerCollector(Collector):
    """ReplicaManager gauges, computed from the hosted partitions at scrape time."""

    def __init__(
        self,
        partitions: Callable[[], Iterable[Partition]],
        deferred_min_isrs: Callable[[], Iterable[int]] = tuple,
    ) -> None:
        """`deferred_min_isrs`: min.insync.replicas of each single-replica partition led here
        whose log is not created yet (replica_manager's deferred leaders; ISR = replicas = 1)."""
        self._partitions = partitions
        self._deferred_min_isrs = deferred_min_isrs

    def collect(self) -> Iterator[GaugeMetricFamily]:
        leaders = hosted = under = under_min = at_min = 0
        for min_isr in self._deferred_min_isrs():
            hosted, leaders = hosted + 1, leaders + 1
            under_min += min_isr > 1
            at_min += min_isr == 1
        for partition in self._partitions():
            hosted += 1
            if not partition.is_leader:
                continue
            state, min_isr = partition.state, partition.min_insync_replicas
            leaders += 1
            under += len(state.isr) < len(state.replicas)
            under_min += len(state.isr) < min_isr
            at_min += len(state.isr) == min_isr  # Kafka counts RF 1 partitions too
        prefix = "kafka_server_replicamanager_"
        for name, doc, value in (
            ("leadercount", "Partitions this broker leads (LeaderCount).", leaders),
            ("partitioncount", "Partition replicas on this broker (PartitionCount).", hosted),
            (
                "underreplicatedpartitions",
                "Led partitions whose ISR is smaller than the replica set.",
                under,
            ),
            (
                "underminisrpartitioncount",
                "Led partitions with ISR < min.insync.replicas.",
                under_min,
            ),
            ("atminisrpartitioncount", "Led partitions with ISR = min.insync.replicas.", at_min),
            ("offlinereplicacount", "Replicas on failed log dirs (none: one log dir).", 0),
        ):
            yield GaugeMetricFamily(prefix + name, doc, value=value)


class LastStableOffsetLagCollector(Collector):
    """kafka_cluster_partition_laststableoffsetlag{topic,partition} for the partitions this
    broker leads. Read-only on the scrape thread: the open transactions' first offsets are copied
    in one step (no pruning, unlike `Partition.last_stable_offset`), so a transaction whose marker
    is written but not yet replicated already counts as stable here."""

    def __init__(self, partitions: Callable[[], Iterable[Partition]]) -> None:
        self._partitions = partitions

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "kafka_cluster_partition_laststableoffsetlag",
            "High watermark minus last stable offset of a led partition (LastStableOffsetLag).",
            labels=["topic", "partition"],
        )
        for partition in self._partitions():
            if partition.is_leader:
                family.add_metric([partition.topic, str(partition.index)], lso_lag(partition))
        yield family


def lso_lag(partition: Partition) -> int:
    high_watermark = partition.high_watermark
    firsts = list(partition.log.ongoing_transactions().values())
    if not firsts:
        return 0
    return max(0, high_watermark - max(min(firsts), partition.log.log_start_offset))
