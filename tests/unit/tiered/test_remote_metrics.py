"""The remote tier's per-topic series (`brokers/tiered/metrics.py`): a deleted topic's go at once
(`forget`) and again at each run of the remote task for every topic neither hosted nor with
remote segments left (`sweep`), so a copy or delete that was under way when the topic went does
not leave them for good."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from brokers.tiered.metrics import RemoteStorageMetrics

pytestmark = pytest.mark.unit


def series(registry: CollectorRegistry) -> set[tuple[str, str]]:
    """(sample name, topic) of every per-topic sample."""
    return {
        (sample.name, sample.labels["topic"])
        for family in registry.collect()
        for sample in family.samples
        if "topic" in sample.labels
    }


def topics(registry: CollectorRegistry) -> set[str]:
    return {topic for _, topic in series(registry)}


def test_forget_drops_a_topic_s_counters_and_lag_gauges() -> None:
    registry = CollectorRegistry()
    metrics = RemoteStorageMetrics(registry)
    metrics.count(metrics.copy_requests, "a")
    metrics.count(metrics.copy_bytes, "a", 1024)
    metrics.count(metrics.fetch_requests, "b")
    metrics.record_lag("a", 0, 4096, 2)
    metrics.record_lag("a", 3, 0, 0)
    metrics.forget("a")
    assert topics(registry) == {"b"}
    metrics.forget("never-counted")  # nothing to drop: no error


def test_sweep_keeps_only_the_topics_named() -> None:
    registry = CollectorRegistry()
    metrics = RemoteStorageMetrics(registry)
    for topic in ("hosted", "gone", "orphans-left"):
        metrics.count(metrics.delete_requests, topic)
    metrics.record_lag("gone", 1, 10, 1)
    metrics.sweep({"hosted", "orphans-left"})
    assert topics(registry) == {"hosted", "orphans-left"}
    metrics.count(metrics.delete_errors, "gone")  # a delete under way when the topic went
    metrics.sweep({"hosted"})
    assert topics(registry) == {"hosted"}
