"""Consumer group metrics, computed at scrape time from the coordinator's state.

Owns: `GroupMetricsCollector` — per group: members, state (one series per state, 1 for the
current one), completed rebalances; per committed partition: the committed offset and the lag
(high watermark − committed offset, floored at 0), named like the common kafka_exporter series.
Nothing is counted on the request path. Concurrency: `collect` runs on the metrics HTTP thread
while the event loop mutates groups; it copies what it reads and retries a copy that raced a
resize, so a scrape may be one operation stale but never fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from brokers.coordinator.group import GroupState
from brokers.coordinator.group_coordinator import GroupCoordinator

HighWatermark = Callable[[str, int], int | None]
_ATTEMPTS = 3


class RetryingCollector(Collector):
    """A collector reading the event loop's dicts from the scrape thread: a scrape that meets a
    dict changing under it ("dictionary changed size during iteration") is retried, and after
    `_ATTEMPTS` gives nothing rather than a broken family."""

    def collect(self) -> Iterator[Metric]:
        for attempt in range(_ATTEMPTS):
            try:
                families = self._families()
                break
            except RuntimeError:
                if attempt == _ATTEMPTS - 1:
                    return
        yield from families

    def _families(self) -> list[Metric]:
        raise NotImplementedError


class GroupMetricsCollector(RetryingCollector):
    def __init__(self, coordinator: GroupCoordinator, high_watermark: HighWatermark) -> None:
        self._coordinator = coordinator
        self._high_watermark = high_watermark

    def _families(self) -> list[Metric]:
        members = GaugeMetricFamily(
            "kafka_consumergroup_members", "Members of the group.", labels=["group"]
        )
        states = GaugeMetricFamily(
            "kafka_consumergroup_state",
            "1 for the group's current state.",
            labels=["group", "state"],
        )
        rebalances = CounterMetricFamily(
            "kafka_consumergroup_rebalances",
            "Rebalances of the group that reached Stable.",
            labels=["group"],
        )
        offsets = GaugeMetricFamily(
            "kafka_consumergroup_current_offset",
            "Committed offset of the group for the partition.",
            labels=["group", "topic", "partition"],
        )
        lag = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "High watermark minus the group's committed offset.",
            labels=["group", "topic", "partition"],
        )
        for group in list(self._coordinator.groups.values()):
            name = group.group_id
            members.add_metric([name], len(group.members))
            for state in GroupState:
                states.add_metric([name, state.value], 1.0 if group.state is state else 0.0)
            rebalances.add_metric([name], group.completed_rebalances)
            for (topic, partition), value in group.offsets.items():
                labels = [name, topic, str(partition)]
                offsets.add_metric(labels, value.offset)
                high_watermark = self._high_watermark(topic, partition)
                if high_watermark is not None:
                    lag.add_metric(labels, max(high_watermark - value.offset, 0))
        return [members, states, rebalances, offsets, lag]
