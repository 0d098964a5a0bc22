"""Produce writes the new leader epochs of a request's partitions before any append, together
(`brokers.log.log.assign_epochs_together`), as Kafka assigns a leader's epoch before its data.

A standalone broker built as `pier broker` builds it (real logs in tmp_path). What shows that the
epochs went first, in one step: a partition whose append is refused (a corrupt batch) still has
its epoch entry, in memory and in its checkpoint file, while the others hold their data.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokers.app.runtime import Broker
from brokers.handlers import produce
from brokers.log.leader_epoch_cache import CHECKPOINT_NAME, LeaderEpochCache
from brokers.records.builder import build_batch
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.admin_harness import call, entity, standalone_broker

pytestmark = pytest.mark.unit
VERSION = 9


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with standalone_broker(tmp_path) as b:
        b.topics.create_topic("fresh", 3, 1, {})
        yield b


def _produce(broker: Broker, records: dict[int, bytes]) -> dict[int, ErrorCode]:
    data = tuple(
        entity(0, VERSION, "PartitionProduceData", index=index, records=batch)
        for index, batch in records.items()
    )
    topic = entity(0, VERSION, "TopicProduceData", name="fresh", partition_data=data)
    request = entity(
        0, VERSION, "ProduceRequest", transactional_id=None, acks=1,
        timeout=datetime.timedelta(seconds=5), topic_data=(topic,),
    )  # fmt: skip
    route = produce.route(broker.replicas, broker.purgatory, broker.clock, broker.topic_metrics)
    response = call(route, VERSION, request)
    return {p.index: p.error_code for p in response.responses[0].partition_responses}


def test_every_led_partition_of_the_request_gets_its_epoch_before_the_appends(
    broker: Broker,
) -> None:
    good = build_batch([(None, b"v")])
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF  # the CRC no longer matches: the append is refused
    answers = _produce(broker, {0: good, 1: good, 2: bytes(corrupt)})
    assert answers == {0: ErrorCode.none, 1: ErrorCode.none, 2: ErrorCode.corrupt_message}
    for index in range(3):
        partition = broker.replicas.get("fresh", index)
        expected = [(partition.leader_epoch, 0)]
        assert partition.log.leader_epoch_cache.entries() == expected, index
        on_disk = LeaderEpochCache(partition.log.directory / CHECKPOINT_NAME).entries()
        assert on_disk == expected, index
    assert broker.replicas.get("fresh", 2).log.log_end_offset == 0
    assert broker.replicas.get("fresh", 0).log.log_end_offset == 1
