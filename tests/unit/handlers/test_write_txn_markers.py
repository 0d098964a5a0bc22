"""WriteTxnMarkers (key 27) on a real standalone Broker: markers per marker and partition, the
errors a coordinator acts on (retriable leadership/ISR/timeouts; final fencing), acks=all waits
for the ISR, and committed `__consumer_offsets` markers reach the group side's callback."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from brokers.app.runtime import Broker
from brokers.common.clock import SYSTEM_CLOCK
from brokers.handlers import write_txn_markers
from brokers.records.builder import build_batch
from brokers.replication.partition import LeadershipState
from brokers.server.context import RequestContext
from brokers.server.routes import Route
from brokers.wire.errors import ErrorCode
from brokers.wire.headers import RequestHeader
from tests.polling import wait_until_async
from tests.unit.handlers.admin_harness import call, entity, routed, standalone_broker

pytestmark = pytest.mark.unit
KEY, VERSION = 27, 1
OFFSETS = "__consumer_offsets"
Marker = tuple[int, int, bool, int, list[tuple[str, int]]]  # pid, epoch, commit, coord epoch, tps


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    """t-0, t-1 and __consumer_offsets-0/1, each with an open transaction of producer 7
    (epoch 2), and t-1 also one of producer 8 (epoch 0)."""
    with standalone_broker(tmp_path) as b:
        b.topics.create_topic("t", 2, 1, {})
        b.topics.create_topic(OFFSETS, 2, 1, {"cleanup.policy": "compact"})
        for topic, index in [("t", 0), ("t", 1), (OFFSETS, 0), (OFFSETS, 1)]:
            b.replicas.get(topic, index).append_as_leader(txn(7, 2, topic.encode()))
        b.replicas.get("t", 1).append_as_leader(txn(8, 0))
        yield b


def txn(producer_id: int, epoch: int, key: bytes = b"k") -> bytes:
    return build_batch(
        [(key, b"v")],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=0,
        is_transactional=True,
    )


def request(*markers: Marker) -> Any:
    entries = []
    for producer_id, epoch, commit, coordinator_epoch, partitions in markers:
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        topics = tuple(
            entity(KEY, VERSION, "WritableTxnMarkerTopic", name=n, partition_indexes=tuple(i))
            for n, i in by_topic.items()
        )
        entries.append(
            entity(
                KEY,
                VERSION,
                "WritableTxnMarker",
                producer_id=producer_id,
                producer_epoch=epoch,
                transaction_result=commit,
                coordinator_epoch=coordinator_epoch,
                topics=topics,
            )
        )
    return entity(KEY, VERSION, "WriteTxnMarkersRequest", markers=tuple(entries))


def answers(response: Any) -> list[dict[tuple[str, int], ErrorCode]]:
    return [
        {(t.name, p.partition_index): p.error_code for t in m.topics for p in t.partitions}
        for m in response.markers
    ]


def write(route: Route, *markers: Marker) -> list[dict[tuple[str, int], ErrorCode]]:
    return answers(call(route, VERSION, request(*markers)))


def test_markers_are_written_and_answered_per_marker(broker: Broker) -> None:
    route = routed(broker, KEY)
    result = write(route, (7, 2, True, 0, [("t", 0), ("t", 1)]), (8, 0, False, 0, [("t", 1)]))
    assert result == [{("t", 0): ErrorCode.none, ("t", 1): ErrorCode.none}, {("t", 1): 0}]
    t0, t1 = broker.replicas.get("t", 0), broker.replicas.get("t", 1)
    assert t0.last_stable_offset == t0.log.log_end_offset == 2
    assert t1.last_stable_offset == t1.log.log_end_offset == 4
    assert [t.producer_id for t in t1.log.collect_aborted(0, 4)] == [8]


def test_errors_per_partition(broker: Broker) -> None:
    route = routed(broker, KEY)
    broker.replicas.get("t", 1).become_follower(LeadershipState(1, 1, [0, 1], [0, 1]))
    result = write(route, (7, 2, True, 3, [("t", 0), ("t", 1), ("nope", 0), ("t", 5)]))
    assert result == [
        {
            ("t", 0): ErrorCode.none,
            ("t", 1): ErrorCode.not_leader_or_follower,
            ("nope", 0): ErrorCode.unknown_topic_or_partition,
            ("t", 5): ErrorCode.unknown_topic_or_partition,
        }
    ]
    # A fenced producer epoch, then an older coordinator epoch than the one just written.
    assert write(route, (7, 1, True, 3, [(OFFSETS, 0)])) == [
        {(OFFSETS, 0): ErrorCode.invalid_producer_epoch}
    ]
    assert write(route, (7, 2, False, 2, [("t", 0)])) == [
        {("t", 0): ErrorCode.transaction_coordinator_fenced}
    ]


def test_min_insync_replicas_is_checked_before_writing(broker: Broker) -> None:
    broker.topics.set_topic_configs("t", {"min.insync.replicas": "2"})
    replica = broker.replicas.get("t", 0)
    end = replica.log.log_end_offset
    assert write(routed(broker, KEY), (7, 2, True, 0, [("t", 0)])) == [
        {("t", 0): ErrorCode.not_enough_replicas}
    ]
    assert replica.log.log_end_offset == end


class Completions:
    def __init__(self) -> None:
        self.seen: list[tuple[int, int, bool]] = []

    def __call__(self, offsets_partition: int, producer_id: int, commit: bool) -> None:
        self.seen.append((offsets_partition, producer_id, commit))


def own_route(broker: Broker, completions: Completions, timeout_s: float) -> Route:
    return write_txn_markers.route(
        broker.replicas,
        broker.purgatory,
        SYSTEM_CLOCK,
        on_offsets_marker=completions,
        timeout_s=timeout_s,
    )


def test_offsets_markers_are_reported_once_committed(broker: Broker) -> None:
    completions = Completions()
    route = own_route(broker, completions, timeout_s=0.3)
    # __consumer_offsets-1 waits for a follower that never fetches: not committed, not reported.
    broker.replicas.get(OFFSETS, 1).become_leader(LeadershipState(0, 1, [0, 1], [0, 1]))
    result = write(route, (7, 2, False, 0, [(OFFSETS, 0), (OFFSETS, 1), ("t", 0)]))
    assert result == [
        {
            (OFFSETS, 0): ErrorCode.none,
            (OFFSETS, 1): ErrorCode.request_timed_out,
            ("t", 0): ErrorCode.none,
        }
    ]
    assert completions.seen == [(0, 7, False)]


def test_a_replicated_marker_waits_for_the_isr(broker: Broker) -> None:
    completions = Completions()
    route = own_route(broker, completions, timeout_s=30)
    replica = broker.replicas.get(OFFSETS, 1)
    replica.become_leader(LeadershipState(0, 1, [0, 1], [0, 1]))
    replica.update_follower_fetch_state(1, replica.log.log_end_offset, 0, SYSTEM_CLOCK.time_ms())
    ctx = RequestContext(RequestHeader(KEY, VERSION, 1, "test"), "127.0.0.1", "c")

    async def scenario() -> Any:
        pending = asyncio.ensure_future(
            route.handler(ctx, request((7, 2, True, 0, [(OFFSETS, 1)])))
        )
        await wait_until_async(parked(broker), what="marker waiting for the ISR", timeout=10)
        assert replica.log.log_end_offset == 2  # appended, not yet replicated
        assert not pending.done() and completions.seen == []
        replica.update_follower_fetch_state(1, 2, 0, SYSTEM_CLOCK.time_ms())
        return await asyncio.wait_for(pending, 10)

    response = asyncio.run(scenario())
    assert answers(response) == [{(OFFSETS, 1): ErrorCode.none}]
    assert completions.seen == [(1, 7, True)]


def parked(broker: Broker) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return broker.purgatory.watched() > 0

    return check


def v2_request(producer_id: int, epoch: int, transaction_version: int, tp: tuple[str, int]) -> Any:
    topic = entity(KEY, 2, "WritableTxnMarkerTopic", name=tp[0], partition_indexes=(tp[1],))
    marker = entity(
        KEY,
        2,
        "WritableTxnMarker",
        producer_id=producer_id,
        producer_epoch=epoch,
        transaction_result=True,
        coordinator_epoch=0,
        topics=(topic,),
        transaction_version=transaction_version,
    )
    return entity(KEY, 2, "WriteTxnMarkersRequest", markers=(marker,))


def test_v2_markers_of_transaction_version_2_need_a_higher_epoch(broker: Broker) -> None:
    """KIP-890 part 2, as Kafka 4.2: a TV2 marker at the producer's own epoch (2) is a late or
    duplicate marker and is refused; one epoch above is written. A v2 marker of transaction
    version 1, like v1, needs only the producer's epoch."""
    route = routed(broker, KEY)
    t0, t1 = broker.replicas.get("t", 0), broker.replicas.get("t", 1)
    refused = answers(call(route, 2, v2_request(7, 2, 2, ("t", 0))))
    assert refused == [{("t", 0): ErrorCode.invalid_producer_epoch}]
    assert t0.log.log_end_offset == 1 and t0.last_stable_offset == 0  # nothing written
    assert answers(call(route, 2, v2_request(7, 3, 2, ("t", 0)))) == [{("t", 0): 0}]
    assert t0.last_stable_offset == t0.log.log_end_offset == 2
    # the same marker again (a duplicate at the epoch it wrote): refused
    again = answers(call(route, 2, v2_request(7, 3, 2, ("t", 0))))
    assert again == [{("t", 0): ErrorCode.invalid_producer_epoch}]
    assert answers(call(route, 2, v2_request(7, 2, 1, ("t", 1)))) == [{("t", 1): 0}]
    assert t1.log.log_end_offset == 3
