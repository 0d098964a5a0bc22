"""DescribeProducers (key 61) against a real standalone Broker: each partition's active producers
from its producer state, and Kafka's per-partition errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokers.app.runtime import Broker
from brokers.handlers import describe_producers
from brokers.records.builder import simple_batch
from brokers.replication.metadata_cache import PartitionMetadata
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.admin_harness import call, entity, routed, standalone_broker

pytestmark = pytest.mark.unit
KEY = 61
T0 = 1_700_000_000_000


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """t-0: producer 7 (epoch 2) wrote sequences 0-2 then 3-4; producer 9 (epoch 0) wrote 0;
    t-1: only a non-idempotent batch."""
    with standalone_broker(tmp_path) as b:
        b.topics.create_topic("t", 2, 1, {})
        p0 = b.replicas.get("t", 0)
        for pid, epoch, seq, values, ts in [
            (7, 2, 0, [b"a", b"b", b"c"], T0),
            (9, 0, 0, [b"x"], T0 + 5),
            (7, 2, 3, [b"d", b"e"], T0 + 10),
        ]:
            p0.append_as_leader(
                simple_batch(
                    values,
                    timestamps=[ts] * len(values),
                    producer_id=pid,
                    producer_epoch=epoch,
                    base_sequence=seq,
                )
            )
        b.replicas.get("t", 1).append_as_leader(simple_batch([b"plain"], timestamps=[T0]))
        yield b


def describe(broker: Broker, wanted: dict[str, list[int]]) -> dict[tuple[str, int], Any]:
    request = entity(
        KEY,
        0,
        "DescribeProducersRequest",
        topics=tuple(
            entity(KEY, 0, "TopicRequest", name=name, partition_indexes=tuple(indexes))
            for name, indexes in wanted.items()
        ),
    )
    response = call(routed(broker, describe_producers.API_KEY), 0, request)
    assert [t.name for t in response.topics] == list(wanted)
    return {(t.name, p.partition_index): p for t in response.topics for p in t.partitions}


def test_active_producers_of_each_partition(broker: Broker) -> None:
    answers = describe(broker, {"t": [0, 1]})
    first, second = answers["t", 0], answers["t", 1]
    assert first.error_code == ErrorCode.none and first.error_message is None
    states = [
        (
            p.producer_id,
            p.producer_epoch,
            p.last_sequence,
            p.last_timestamp,
            p.coordinator_epoch,
            p.current_txn_start_offset,
        )
        for p in first.active_producers
    ]
    assert states == [(7, 2, 4, T0 + 10, -1, -1), (9, 0, 0, T0 + 5, -1, -1)]
    assert second.error_code == ErrorCode.none and second.active_producers == ()


def test_unknown_partitions_and_topics(broker: Broker) -> None:
    answers = describe(broker, {"t": [5], "missing": [0], "bad/name": [0]})
    assert answers["t", 5].error_code == ErrorCode.unknown_topic_or_partition
    assert answers["missing", 0].error_code == ErrorCode.unknown_topic_or_partition
    invalid = answers["bad/name", 0]
    assert invalid.error_code == ErrorCode.invalid_topic_exception
    assert invalid.error_message and "illegal" in invalid.error_message


def test_a_partition_held_elsewhere_is_not_leader_or_follower(broker: Broker) -> None:
    topic = broker.metadata.topic("t")
    assert topic is not None
    topic.partitions[2] = PartitionMetadata(2, leader=1, leader_epoch=0, replicas=[1], isr=[1])
    assert describe(broker, {"t": [2]})["t", 2].error_code == ErrorCode.not_leader_or_follower
