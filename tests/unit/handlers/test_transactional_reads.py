"""Fetch and ListOffsets under both isolation levels on a real standalone Broker, with the
transactions ended through its WriteTxnMarkers route: read_committed never sees past an open
transaction, lists the aborted ones, and a parked read_committed fetch wakes when a marker
moves the last stable offset."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from brokers.app.runtime import Broker
from brokers.handlers import fetch, list_offsets, write_txn_markers
from brokers.records.batch import iter_headers
from brokers.records.builder import build_batch
from brokers.records.control import EndTxnMarker
from brokers.server.context import RequestContext
from brokers.server.response import RawResponse
from brokers.wire.errors import ErrorCode
from brokers.wire.headers import RequestHeader
from tests.polling import wait_until_async
from tests.unit.handlers.admin_harness import call, entity, routed, standalone_broker

pytestmark = pytest.mark.unit
T0 = int(time.time() * 1000) - 3_600_000  # an hour ago: markers (stamped now) roll nothing
FETCH_VERSION = 12
LATEST, MAX_TIMESTAMP = -1, -3


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """t-0: 0-1 plain (T0), 2-3 producer 7's open transaction (T0+20), 4 plain (T0+40)."""
    with standalone_broker(tmp_path) as b:
        b.topics.create_topic("t", 1, 1, {})
        replica = b.replicas.get("t", 0)
        replica.append_as_leader(plain(2, T0))
        replica.append_as_leader(txn(7, 0, T0 + 20))
        replica.append_as_leader(plain(1, T0 + 40))
        yield b


def plain(count: int, timestamp: int) -> bytes:
    return build_batch([(None, b"plain")] * count, base_timestamp=timestamp)


def txn(producer_id: int, sequence: int, timestamp: int) -> bytes:
    return build_batch(
        [(None, b"txn"), (None, b"txn")],
        producer_id=producer_id,
        producer_epoch=0,
        base_sequence=sequence,
        is_transactional=True,
        base_timestamp=timestamp,
    )


def end_txn(
    broker: Broker, producer_id: int, commit: bool, partitions: list[tuple[str, int]]
) -> list[tuple[str, int, ErrorCode]]:
    """One WriteTxnMarkers v1 request through the broker's route; (topic, partition, error)."""
    version = write_txn_markers.MAX_VERSION
    by_topic: dict[str, list[int]] = {}
    for topic, index in partitions:
        by_topic.setdefault(topic, []).append(index)
    marker = entity(
        27,
        version,
        "WritableTxnMarker",
        producer_id=producer_id,
        producer_epoch=0,
        transaction_result=commit,
        coordinator_epoch=0,
        topics=tuple(
            entity(27, version, "WritableTxnMarkerTopic", name=n, partition_indexes=tuple(i))
            for n, i in by_topic.items()
        ),
    )
    request = entity(27, version, "WriteTxnMarkersRequest", markers=(marker,))
    response = call(routed(broker, write_txn_markers.API_KEY), version, request)
    (result,) = response.markers
    assert result.producer_id == producer_id
    return [(t.name, p.partition_index, p.error_code) for t in result.topics for p in t.partitions]


def fetch_request(offset: int, isolation: int, *, min_bytes: int = 0, wait_ms: int = 0) -> Any:
    v = FETCH_VERSION
    partition = entity(
        1, v, "FetchPartition", partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
    )
    return entity(
        1,
        v,
        "FetchRequest",
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=wait_ms),
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=isolation,
        session_id=0,
        session_epoch=-1,
        topics=(entity(1, v, "FetchTopic", topic="t", partitions=(partition,)),),
        forgotten_topics_data=(),
    )


async def fetch_async(broker: Broker, request: Any) -> Any:
    ctx = RequestContext(RequestHeader(1, FETCH_VERSION, 1, "test"), "127.0.0.1", "c")
    raw = await routed(broker, fetch.API_KEY).handler(ctx, request)
    assert isinstance(raw, RawResponse)
    body = b"".join(
        bytes(p) if isinstance(p, bytes | bytearray | memoryview) else p.read() for p in raw.parts
    )
    decoded: Any
    decoded, _ = entity_reader(load_response_schema(1, FETCH_VERSION))(body, 0)
    (topic,) = decoded.responses
    (partition,) = topic.partitions
    return partition


def fetch_one(broker: Broker, offset: int = 0, isolation: int = 1) -> Any:
    return asyncio.run(fetch_async(broker, fetch_request(offset, isolation)))


def offsets(records: bytes | None) -> list[int]:
    """The offset of every record in the answer (batches decoded by the test only)."""
    found: list[int] = []
    for _, header in iter_headers(records or b""):
        found += range(header.base_offset, header.last_offset + 1)
    return found


def aborted(partition: Any) -> list[tuple[int, int]] | None:
    if partition.aborted_transactions is None:
        return None
    return [(a.producer_id, a.first_offset) for a in partition.aborted_transactions]


def list_latest(broker: Broker, timestamp: int, isolation: int, version: int = 9) -> int:
    partition = entity(
        2, version, "ListOffsetsPartition", partition_index=0, current_leader_epoch=-1,
        timestamp=timestamp,
    )  # fmt: skip
    request = entity(
        2,
        version,
        "ListOffsetsRequest",
        replica_id=-1,
        isolation_level=isolation,
        topics=(entity(2, version, "ListOffsetsTopic", name="t", partitions=(partition,)),),
    )
    response = call(routed(broker, list_offsets.API_KEY), version, request)
    (answer,) = response.topics[0].partitions
    assert answer.error_code == ErrorCode.none
    return int(answer.offset)


def test_read_committed_fetch_stops_at_the_open_transaction(broker: Broker) -> None:
    committed = fetch_one(broker, isolation=1)
    assert offsets(committed.records) == [0, 1]
    assert (committed.high_watermark, committed.last_stable_offset) == (5, 2)
    assert aborted(committed) == []
    assert offsets(fetch_one(broker, 2, isolation=1).records) == []

    uncommitted = fetch_one(broker, isolation=0)
    assert offsets(uncommitted.records) == [0, 1, 2, 3, 4]
    assert uncommitted.last_stable_offset == 2 and aborted(uncommitted) is None


def test_an_aborted_transaction_is_listed_for_the_consumer_to_skip(broker: Broker) -> None:
    assert end_txn(broker, 7, False, [("t", 0)]) == [("t", 0, ErrorCode.none)]
    committed = fetch_one(broker, isolation=1)
    assert offsets(committed.records) == [0, 1, 2, 3, 4, 5]  # 5: the ABORT marker
    assert committed.last_stable_offset == 6 and aborted(committed) == [(7, 2)]
    assert aborted(fetch_one(broker, 6, isolation=1)) == []  # nothing aborted from there


def test_list_offsets_follows_the_isolation_level(broker: Broker) -> None:
    assert list_latest(broker, LATEST, 0) == 5
    assert list_latest(broker, LATEST, 1) == 2  # Kafka: latest is the LSO for read_committed
    assert list_latest(broker, T0 + 30, 0) == 4
    assert list_latest(broker, T0 + 30, 1) == -1  # lookups are bounded by the LSO too
    assert list_latest(broker, MAX_TIMESTAMP, 1) == -1
    assert list_latest(broker, LATEST, 1, version=1) == 5  # v1 has no isolation level
    assert end_txn(broker, 7, True, [("t", 0)]) == [("t", 0, ErrorCode.none)]
    assert list_latest(broker, LATEST, 1) == 6
    assert list_latest(broker, T0 + 30, 1) == 4
    assert list_latest(broker, MAX_TIMESTAMP, 1) == 5  # the marker, stamped now (as Kafka)


def test_a_parked_read_committed_fetch_wakes_when_the_transaction_commits(
    broker: Broker,
) -> None:
    async def scenario() -> Any:
        parked = asyncio.ensure_future(
            fetch_async(broker, fetch_request(2, 1, min_bytes=1, wait_ms=30_000))
        )
        await wait_until_async(
            _true(lambda: broker.purgatory.watched() > 0), what="fetch parked", timeout=10
        )
        assert not parked.done()
        replica = broker.replicas.get("t", 0)
        replica.append_marker(7, 0, EndTxnMarker(commit=True, coordinator_epoch=0))
        # Woken by the high-watermark move, well before its 30 s wait ends.
        await wait_until_async(_true(parked.done), what="fetch woken", timeout=10)
        return parked.result()

    woken = asyncio.run(scenario())
    assert offsets(woken.records) == [2, 3, 4, 5] and woken.last_stable_offset == 6


def _true(check: Any) -> Any:
    async def run() -> bool:
        return bool(check())

    return run
