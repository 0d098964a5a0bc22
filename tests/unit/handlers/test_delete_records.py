import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokers.app.runtime import Broker
from brokers.handlers import delete_records
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.admin_harness import call, entity, produce, routed, standalone_broker

pytestmark = pytest.mark.unit
KEY = 21


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with standalone_broker(tmp_path) as b:
        b.topics.create_topic("t", 2, 1, {})
        b.topics.create_topic("compacted", 1, 1, {"cleanup.policy": "compact"})
        b.topics.create_topic("__consumer_offsets", 1, 1, {})
        produce(b, "t", 0, 5)
        produce(b, "t", 1, 3)
        yield b


def _delete(broker: Broker, wanted: dict[str, list[tuple[int, int]]], version: int = 2) -> Any:
    topics = tuple(
        entity(
            KEY,
            version,
            "DeleteRecordsTopic",
            name=name,
            partitions=tuple(
                entity(KEY, version, "DeleteRecordsPartition", partition_index=p, offset=o)
                for p, o in partitions
            ),
        )
        for name, partitions in wanted.items()
    )
    request = entity(
        KEY, version, "DeleteRecordsRequest", topics=topics, timeout=datetime.timedelta(seconds=5)
    )
    response = call(routed(broker, delete_records.API_KEY), version, request)
    return {
        (t.name, p.partition_index): (p.error_code, p.low_watermark)
        for t in response.topics
        for p in t.partitions
    }


@pytest.mark.parametrize("version", range(3))
def test_every_version_moves_the_log_start(broker: Broker, version: int) -> None:
    results = _delete(broker, {"t": [(0, 2), (1, -1)]}, version)
    assert results == {("t", 0): (ErrorCode.none, 2), ("t", 1): (ErrorCode.none, 3)}
    assert broker.replicas.get("t", 0).log.log_start_offset == 2
    assert broker.replicas.get("t", 1).log.log_start_offset == 3


def test_offsets_outside_the_log(broker: Broker) -> None:
    results = _delete(broker, {"t": [(0, 6), (1, -7)]})
    assert results == {
        ("t", 0): (ErrorCode.offset_out_of_range, -1),
        ("t", 1): (ErrorCode.offset_out_of_range, -1),
    }
    assert broker.replicas.get("t", 0).log.log_start_offset == 0


def test_deleting_below_the_current_start_keeps_it(broker: Broker) -> None:
    _delete(broker, {"t": [(0, 4)]})
    assert _delete(broker, {"t": [(0, 1)]}) == {("t", 0): (ErrorCode.none, 4)}


def test_refused_partitions(broker: Broker) -> None:
    results = _delete(
        broker,
        {"nope": [(0, 1)], "t": [(9, 1)], "compacted": [(0, 0)], "__consumer_offsets": [(0, 0)]},
    )
    assert results == {
        ("nope", 0): (ErrorCode.unknown_topic_or_partition, -1),
        ("t", 9): (ErrorCode.unknown_topic_or_partition, -1),
        ("compacted", 0): (ErrorCode.policy_violation, -1),
        ("__consumer_offsets", 0): (ErrorCode.invalid_topic_exception, -1),
    }


def test_more_than_the_request_limit_deletes_nothing(broker: Broker) -> None:
    partitions = [(0, 1)] + [(i, 0) for i in range(1, delete_records.MAX_ITEMS + 1)]
    results = _delete(broker, {"t": partitions})
    assert {code for code, _ in results.values()} == {ErrorCode.invalid_request}
    assert broker.replicas.get("t", 0).log.log_start_offset == 0
