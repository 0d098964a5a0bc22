"""ListOffsets against a real standalone Broker: leader epochs on every kind of lookup (v4+), the
special timestamps by version, leader-only answers, duplicates and KIP-207's lagging leader."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokers.app.runtime import Broker
from brokers.handlers import list_offsets
from brokers.records.builder import simple_batch
from brokers.replication.partition import LeadershipState
from brokers.wire.errors import ErrorCode
from tests.unit.handlers.admin_harness import call, entity, routed, standalone_broker

pytestmark = pytest.mark.unit
KEY = 2
T0 = 1_700_000_000_000
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


def lead(broker: Broker, epoch: int, replicas: list[int] | None = None) -> None:
    members = replicas or [0]
    broker.replicas.get("t", 0).become_leader(LeadershipState(0, epoch, members, list(members)))


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """t-0: offsets 0-2 written in epoch 0 (timestamps T0, T0+10, T0+20 in one batch), offsets
    3-4 in epoch 3 (T0+50, T0+30: the largest timestamp sits at offset 3)."""
    with standalone_broker(tmp_path) as b:
        b.topics.create_topic("t", 1, 1, {})
        replica = b.replicas.get("t", 0)
        replica.append_as_leader(
            simple_batch([b"a", b"b", b"c"], timestamps=[T0, T0 + 10, T0 + 20])
        )
        lead(b, 3)
        replica.append_as_leader(simple_batch([b"d", b"e"], timestamps=[T0 + 50, T0 + 30]))
        yield b


def list_one(
    broker: Broker, timestamp: int, *, version: int = 9, replica_id: int = -1, epoch: int = -1
) -> tuple[ErrorCode, int, int, int]:
    """(error, offset, timestamp, leader epoch) for t-0; the epoch is -1 before v4."""
    (answer,) = _list(broker, [("t", 0)], timestamp, version, replica_id, epoch)
    return (
        answer.error_code,
        answer.offset,
        answer.timestamp,
        getattr(answer, "leader_epoch", -1),
    )


def _list(
    broker: Broker,
    partitions: list[tuple[str, int]],
    timestamp: int,
    version: int = 9,
    replica_id: int = -1,
    epoch: int = -1,
) -> list[Any]:
    topics = tuple(
        entity(
            KEY,
            version,
            "ListOffsetsTopic",
            name=name,
            partitions=(
                entity(
                    KEY,
                    version,
                    "ListOffsetsPartition",
                    partition_index=index,
                    current_leader_epoch=epoch,
                    timestamp=timestamp,
                ),
            ),
        )
        for name, index in partitions
    )
    request = entity(
        KEY, version, "ListOffsetsRequest", replica_id=replica_id, isolation_level=0, topics=topics
    )
    response = call(routed(broker, list_offsets.API_KEY), version, request)
    return [p for t in response.topics for p in t.partitions]


def test_earliest_and_latest_carry_the_first_and_current_epochs(broker: Broker) -> None:
    assert list_one(broker, EARLIEST) == (ErrorCode.none, 0, -1, 0)
    assert list_one(broker, EARLIEST_LOCAL) == (ErrorCode.none, 0, -1, 0)
    assert list_one(broker, LATEST) == (ErrorCode.none, 5, -1, 3)
    lead(broker, 7)  # a new epoch with nothing written yet: latest reports it
    assert list_one(broker, LATEST) == (ErrorCode.none, 5, -1, 7)
    assert list_one(broker, LATEST_TIERED) == (ErrorCode.none, -1, -1, -1)


def test_timestamp_lookups_report_the_epoch_of_the_batch_found(broker: Broker) -> None:
    assert list_one(broker, T0 + 5) == (ErrorCode.none, 1, T0 + 10, 0)  # inside the first batch
    assert list_one(broker, T0 + 25) == (ErrorCode.none, 3, T0 + 50, 3)
    assert list_one(broker, T0 + 40) == (ErrorCode.none, 3, T0 + 50, 3)
    assert list_one(broker, T0 + 51) == (ErrorCode.none, -1, -1, -1)  # none that late
    assert list_one(broker, MAX_TIMESTAMP) == (ErrorCode.none, 3, T0 + 50, 3)
    lead(broker, 9)  # the batch's epoch, not the current one
    assert list_one(broker, T0) == (ErrorCode.none, 0, T0, 0)


def test_the_log_start_inside_a_batch_bounds_timestamp_lookups(broker: Broker) -> None:
    broker.replicas.get("t", 0).delete_records_before(2)
    assert list_one(broker, T0) == (ErrorCode.none, 2, T0 + 20, 0)
    assert list_one(broker, EARLIEST) == (ErrorCode.none, 2, -1, 0)


def test_max_timestamp_answers_its_record_even_below_the_log_start(broker: Broker) -> None:
    """As Kafka 4.1 (docs/compatibility.md, once C5): DeleteRecords past the record holding the
    largest timestamp leaves MAX_TIMESTAMP answering it from the segment; timestamp lookups stay
    at or above the log start."""
    broker.replicas.get("t", 0).delete_records_before(4)
    assert list_one(broker, MAX_TIMESTAMP) == (ErrorCode.none, 3, T0 + 50, 3)
    assert list_one(broker, T0) == (ErrorCode.none, 4, T0 + 30, 3)


@pytest.mark.parametrize(
    ("timestamp", "first_version"), [(MAX_TIMESTAMP, 7), (EARLIEST_LOCAL, 8), (LATEST_TIERED, 9)]
)
def test_special_timestamps_need_their_version(
    broker: Broker, timestamp: int, first_version: int
) -> None:
    assert list_one(broker, timestamp, version=first_version)[0] == ErrorCode.none
    before = list_one(broker, timestamp, version=first_version - 1)
    assert before == (ErrorCode.unsupported_version, -1, -1, -1)


@pytest.mark.parametrize("timestamp", [-6, -100])
def test_unknown_negative_timestamps_are_unsupported(broker: Broker, timestamp: int) -> None:
    assert list_one(broker, timestamp)[0] == ErrorCode.unsupported_version


@pytest.mark.parametrize("version", range(1, 10))
def test_every_version_answers(broker: Broker, version: int) -> None:
    epoch = 3 if version >= 4 else -1
    assert list_one(broker, LATEST, version=version) == (ErrorCode.none, 5, -1, epoch)
    assert list_one(broker, T0 + 25, version=version) == (ErrorCode.none, 3, T0 + 50, epoch)


def test_only_the_leader_answers_except_to_the_debugging_replica(broker: Broker) -> None:
    replica = broker.replicas.get("t", 0)
    replica.become_follower(LeadershipState(1, 4, [0, 1], [0, 1]))
    assert list_one(broker, LATEST)[0] == ErrorCode.not_leader_or_follower
    assert list_one(broker, LATEST, replica_id=-2) == (ErrorCode.none, 5, -1, 4)


def test_current_leader_epoch_is_checked(broker: Broker) -> None:
    assert list_one(broker, LATEST, epoch=3)[0] == ErrorCode.none
    assert list_one(broker, LATEST, epoch=2)[0] == ErrorCode.fenced_leader_epoch
    assert list_one(broker, LATEST, epoch=4)[0] == ErrorCode.unknown_leader_epoch


def test_duplicates_and_unknown_partitions(broker: Broker) -> None:
    answers = _list(broker, [("t", 0), ("t", 0), ("nope", 0)], LATEST)
    assert [a.error_code for a in answers] == [
        ErrorCode.invalid_request,
        ErrorCode.invalid_request,
        ErrorCode.unknown_topic_or_partition,
    ]


def test_a_leader_whose_high_watermark_lags_its_epoch_start_is_not_available(
    broker: Broker,
) -> None:
    replica = broker.replicas.get("t", 0)
    lead(broker, 4, [0, 1])  # follower 1 has fetched nothing: the high watermark stays at 5
    replica.append_as_leader(simple_batch([b"f"], timestamps=[T0 + 60]))
    lead(broker, 5, [0, 1])  # epoch 5 starts at 6, above the high watermark
    assert list_one(broker, LATEST)[0] == ErrorCode.offset_not_available
    assert list_one(broker, LATEST, version=4)[0] == ErrorCode.leader_not_available
    assert list_one(broker, T0 + 55)[0] == ErrorCode.offset_not_available
    assert list_one(broker, T0 + 25) == (ErrorCode.none, 3, T0 + 50, 3)  # below: answered
    assert list_one(broker, EARLIEST) == (ErrorCode.none, 0, -1, 0)
    assert list_one(broker, LATEST, replica_id=1) == (ErrorCode.none, 6, -1, 5)  # log end
