"""Group metrics computed at scrape time: members, state, rebalances, committed offsets and lag."""

import asyncio

import pytest
from prometheus_client import CollectorRegistry

from brokers.coordinator.metrics import GroupMetricsCollector
from brokers.coordinator.offset_store import CommitRequest, OffsetCommit
from tests.unit.coordinator.harness import driver

pytestmark = pytest.mark.unit


def test_collector_reports_members_state_rebalances_and_lag() -> None:
    async def scenario() -> CollectorRegistry:
        d = await driver()
        [member] = await d.stable_group(1)
        commit = CommitRequest("g", member.member_id, None, 1, [OffsetCommit("t", 0, 4)])
        await d.coordinator.commit_offsets(commit)
        await d.coordinator.commit_offsets(
            CommitRequest("s", "", None, -1, [OffsetCommit("gone", 0, 1)])
        )
        registry = CollectorRegistry()
        marks = {("t", 0): 10}
        registry.register(GroupMetricsCollector(d.coordinator, lambda t, p: marks.get((t, p))))
        return registry

    registry = asyncio.run(scenario())
    sample = registry.get_sample_value
    assert sample("kafka_consumergroup_members", {"group": "g"}) == 1
    assert sample("kafka_consumergroup_state", {"group": "g", "state": "Stable"}) == 1
    assert sample("kafka_consumergroup_state", {"group": "g", "state": "Empty"}) == 0
    assert sample("kafka_consumergroup_rebalances_total", {"group": "g"}) == 1
    labels = {"group": "g", "topic": "t", "partition": "0"}
    assert sample("kafka_consumergroup_current_offset", labels) == 4
    assert sample("kafka_consumergroup_lag", labels) == 6
    gone = {"group": "s", "topic": "gone", "partition": "0"}
    assert sample("kafka_consumergroup_current_offset", gone) == 1
    assert sample("kafka_consumergroup_lag", gone) is None  # no such partition: no lag
