"""`pier cluster` summary: controller, brokers, under-replicated and offline partitions."""

from __future__ import annotations

import pytest

from brokers.client.metadata import BrokerAddress, ClusterMetadata, PartitionInfo, TopicInfo
from brokers.wire.errors import ErrorCode
from pier.cluster_cli import render, summarize

pytestmark = pytest.mark.unit


def test_summary_classifies_partitions_and_marks_the_controller() -> None:
    partitions = {
        0: PartitionInfo(0, 1, 3, (1, 2, 3), (1, 2, 3)),
        1: PartitionInfo(1, 2, 3, (2, 3, 1), (2,)),
        2: PartitionInfo(2, -1, 4, (3, 1, 2), (3,)),
    }
    meta = ClusterMetadata(
        "cid",
        2,
        {b: BrokerAddress(b, "h", 9000 + b, "r1") for b in (1, 2)},
        {"orders": TopicInfo("orders", ErrorCode.none, partitions)},
    )
    summary = summarize(meta)
    assert summary["controller"] == 2
    assert [b["id"] for b in summary["brokers"]] == [1, 2]
    assert [(r["topic"], r["partition"]) for r in summary["under_replicated"]] == [("orders", 1)]
    assert [(r["topic"], r["partition"]) for r in summary["offline"]] == [("orders", 2)]
    text = render(summary)
    assert "2  h:9002  rack=r1 (controller)" in text
    assert "UNDER-REPLICATED PARTITIONS: 1" in text and "OFFLINE PARTITIONS: 1" in text
