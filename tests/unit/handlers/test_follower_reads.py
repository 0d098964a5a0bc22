"""Fetch from a follower replica (KIP-392) through a real broker's Fetch route, as Kafka answers:
a consumer sending v11+ reads up to the follower's high watermark (nothing past it, though the log
has more), an offset past the follower's log end is OFFSET_OUT_OF_RANGE, a consumer below v11
and a replica get NOT_LEADER_OR_FOLLOWER, and a replica awaiting the controller's orders serves
nobody. The answer carries no preferred read replica (only a leader names one)."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from brokers.app.runtime import Broker
from brokers.handlers import fetch
from brokers.records.batch import iter_headers
from brokers.replication.partition import NO_LEADER, LeadershipState
from brokers.server.context import RequestContext
from brokers.server.response import RawResponse
from brokers.wire.errors import ErrorCode
from brokers.wire.headers import RequestHeader
from tests.unit.handlers.admin_harness import entity, produce, routed, standalone_broker

pytestmark = pytest.mark.unit
LEADER = 5  # another broker; this one (node 0) follows it


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """t-0 holds offsets 0-4, replicated; this broker follows LEADER with high watermark 3."""
    with standalone_broker(tmp_path) as b:
        b.topics.create_topic("t", 1, 1, {})
        produce(b, "t", 0, 5)
        partition = b.replicas.get("t", 0)
        partition.become_follower(LeadershipState(LEADER, 2, [LEADER, 0], [LEADER, 0]))
        partition.set_follower_high_watermark(3)
        yield b


def fetch_at(broker: Broker, version: int, offset: int, replica_id: int = -1) -> Any:
    partition = entity(
        1,
        version,
        "FetchPartition",
        partition=0,
        fetch_offset=offset,
        partition_max_bytes=1 << 20,
        current_leader_epoch=2,
        log_start_offset=-1,
    )
    request = entity(
        1,
        version,
        "FetchRequest",
        replica_id=replica_id,
        max_wait=datetime.timedelta(milliseconds=0),
        min_bytes=0,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(entity(1, version, "FetchTopic", topic="t", partitions=(partition,)),),
        forgotten_topics_data=(),
        rack_id="b",
    )

    async def run() -> Any:
        ctx = RequestContext(RequestHeader(1, version, 1, "test"), "127.0.0.1", "c")
        raw = await routed(broker, fetch.API_KEY).handler(ctx, request)
        assert isinstance(raw, RawResponse)
        body = b"".join(
            bytes(p) if isinstance(p, bytes | bytearray | memoryview) else p.read()
            for p in raw.parts
        )
        decoded: Any
        decoded, _ = entity_reader(load_response_schema(1, version))(body, 0)
        return decoded.responses[0].partitions[0]

    return asyncio.run(run())


def offsets(records: bytes | None) -> list[int]:
    found: list[int] = []
    for _, header in iter_headers(records or b""):
        found += range(header.base_offset, header.last_offset + 1)
    return found


@pytest.mark.parametrize("version", [11, 12])
def test_a_v11_consumer_reads_a_follower_up_to_its_high_watermark(
    broker: Broker, version: int
) -> None:
    answer = fetch_at(broker, version, 0)
    assert answer.error_code == ErrorCode.none
    assert offsets(answer.records) == [0, 1, 2]  # the log holds 0-4; the follower's HW is 3
    assert answer.high_watermark == 3
    assert answer.preferred_read_replica == -1
    at_hw = fetch_at(broker, version, 3)  # between the HW and the log end: nothing yet
    assert at_hw.error_code == ErrorCode.none and not at_hw.records


def test_past_the_followers_log_end_is_out_of_range(broker: Broker) -> None:
    assert fetch_at(broker, 11, 6).error_code == ErrorCode.offset_out_of_range


def test_older_consumers_and_replicas_read_only_from_the_leader(broker: Broker) -> None:
    assert fetch_at(broker, 10, 0).error_code == ErrorCode.not_leader_or_follower
    assert fetch_at(broker, 12, 0, replica_id=7).error_code == ErrorCode.not_leader_or_follower


def test_a_replica_without_a_leader_serves_nobody(broker: Broker) -> None:
    partition = broker.replicas.get("t", 0)
    partition.become_follower(LeadershipState(NO_LEADER, 2, [LEADER, 0], [LEADER, 0]))
    assert fetch_at(broker, 12, 0).error_code == ErrorCode.not_leader_or_follower
