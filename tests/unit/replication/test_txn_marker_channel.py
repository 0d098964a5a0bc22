"""TxnMarkerChannel's delivery logic with a scripted local writer and remote brokers: grouping by
leader, retries against the leaders the metadata cache names at each attempt, partitions dropped
with their topic, fencing, and close(). Pure logic: no sockets (the remote path over real
brokers is tests/integration/replication/test_txn_markers_remote.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from brokers.client.errors import ConnectionClosedError
from brokers.common.clock import ManualClock
from brokers.replication.metadata_cache import (
    BrokerEndpoint,
    MetadataCache,
    PartitionMetadata,
    TopicMetadata,
)
from brokers.replication.txn_markers import MarkerErrors, MarkerRequest, TxnMarkerChannel
from brokers.wire.errors import ErrorCode

pytestmark = pytest.mark.unit
HERE = 0
OK = ErrorCode.none


def cluster(leaders: dict[str, list[int]]) -> MetadataCache:
    """Topics whose partition i is led by leaders[topic][i]; brokers 0-2."""
    cache = MetadataCache("c", 0, {b: BrokerEndpoint(b, "127.0.0.1", 9000 + b) for b in range(3)})
    for name, by_index in leaders.items():
        cache.topics[name] = TopicMetadata(
            name,
            uuid.uuid4(),
            {
                i: PartitionMetadata(i, leader, 0, [leader], [leader])
                for i, leader in enumerate(by_index)
            },
        )
    return cache


def lead(cache: MetadataCache, topic: str, index: int, leader: int) -> None:
    cache.topics[topic].partitions[index].leader = leader


Script = Callable[[int, MarkerRequest], MarkerErrors]


@dataclass
class Brokers:
    """Every leader's writer: records each call as (broker, partitions) and answers by `script`
    (default: success), which may also change the metadata between attempts."""

    script: Script | None = None
    calls: list[tuple[int, tuple[tuple[str, int], ...]]] = field(default_factory=list)

    async def local(self, marker: MarkerRequest) -> MarkerErrors:
        return await self.remote(HERE, marker)

    async def remote(self, broker: int, marker: MarkerRequest) -> MarkerErrors:
        self.calls.append((broker, marker.partitions))
        if self.script is not None:
            return self.script(broker, marker)
        return dict.fromkeys(marker.partitions, OK)


def channel(cache: MetadataCache, brokers: Brokers) -> TxnMarkerChannel:
    return TxnMarkerChannel(
        cache,
        node_id=HERE,
        local=brokers.local,
        remote=brokers.remote,
        clock=ManualClock(),
        retry_backoff_s=0.001,
    )


def marker(*partitions: tuple[str, int], commit: bool = True) -> MarkerRequest:
    return MarkerRequest(7, 3, commit, 5, tuple(partitions))


def send(cache: MetadataCache, brokers: Brokers, request: MarkerRequest) -> MarkerErrors:
    async def run() -> MarkerErrors:
        sender = channel(cache, brokers)
        try:
            return await sender.send(request)
        finally:
            await sender.close()

    return asyncio.run(run())


def test_partitions_go_to_their_leaders_in_one_call_each() -> None:
    cache = cluster({"a": [0, 1, 2, 1], "b": [2]})
    brokers = Brokers()
    request = marker(("a", 0), ("a", 1), ("a", 2), ("a", 3), ("b", 0))
    assert send(cache, brokers, request) == dict.fromkeys(request.partitions, OK)
    assert sorted(brokers.calls) == [
        (0, (("a", 0),)),
        (1, (("a", 1), ("a", 3))),
        (2, (("a", 2), ("b", 0))),
    ]


def test_standalone_every_partition_is_written_locally() -> None:
    cache = cluster({"a": [HERE, HERE], "__consumer_offsets": [HERE]})
    brokers = Brokers()
    request = marker(("a", 0), ("a", 1), ("__consumer_offsets", 0), commit=False)
    assert send(cache, brokers, request) == dict.fromkeys(request.partitions, OK)
    assert [broker for broker, _ in brokers.calls] == [HERE]


def test_not_leader_is_retried_at_the_leader_the_metadata_names_next() -> None:
    cache = cluster({"a": [1, 1]})

    def script(broker: int, request: MarkerRequest) -> MarkerErrors:
        if broker == 1 and ("a", 0) in request.partitions:
            lead(cache, "a", 0, 2)  # leadership moved; the metadata catches up
            return {("a", 0): ErrorCode.not_leader_or_follower, ("a", 1): OK}
        return dict.fromkeys(request.partitions, OK)

    brokers = Brokers(script)
    assert send(cache, brokers, marker(("a", 0), ("a", 1))) == {("a", 0): OK, ("a", 1): OK}
    assert brokers.calls == [(1, (("a", 0), ("a", 1))), (2, (("a", 0),))]


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.unknown_topic_or_partition,  # the leader's metadata is behind ours
        ErrorCode.not_enough_replicas,
        ErrorCode.not_enough_replicas_after_append,
        ErrorCode.request_timed_out,
        ErrorCode.kafka_storage_error,
        ErrorCode.unknown_server_error,  # unexpected: retried too, never given up on
    ],
)
def test_retriable_answers_are_retried_until_written(code: ErrorCode) -> None:
    cache = cluster({"a": [1]})
    answers = iter([code, code, OK])
    brokers = Brokers(lambda b, m: {("a", 0): next(answers)})
    assert send(cache, brokers, marker(("a", 0))) == {("a", 0): OK}
    assert len(brokers.calls) == 3


def test_a_missing_answer_or_a_lost_connection_is_retried() -> None:
    cache = cluster({"a": [1, 2]})
    attempts = {1: 0, 2: 0}

    def script(broker: int, request: MarkerRequest) -> MarkerErrors:
        attempts[broker] += 1
        if broker == 1 and attempts[1] == 1:
            raise ConnectionClosedError("broker 1 went away")
        if broker == 2 and attempts[2] == 1:
            return {}  # the answer named no partition
        return dict.fromkeys(request.partitions, OK)

    brokers = Brokers(script)
    assert send(cache, brokers, marker(("a", 0), ("a", 1))) == {("a", 0): OK, ("a", 1): OK}
    assert attempts == {1: 2, 2: 2}


def test_a_partition_without_leader_waits_for_one() -> None:
    cache = cluster({"a": [-1]})
    brokers = Brokers()

    async def run() -> MarkerErrors:
        sender = channel(cache, brokers)
        pending = asyncio.ensure_future(sender.send(marker(("a", 0))))
        for _ in range(20):  # several retry rounds pass without any attempt
            await asyncio.sleep(0.002)
        assert not pending.done() and brokers.calls == []
        lead(cache, "a", 0, 2)
        result = await pending
        await sender.close()
        return result

    assert asyncio.run(run()) == {("a", 0): OK}
    assert brokers.calls == [(2, (("a", 0),))]


def test_a_deleted_topic_is_dropped_as_kafka_does() -> None:
    cache = cluster({"a": [1], "gone": [1]})
    del cache.topics["gone"]
    brokers = Brokers()
    result = send(cache, brokers, marker(("a", 0), ("gone", 0), ("a", 9)))
    assert result == {
        ("a", 0): OK,
        ("gone", 0): ErrorCode.unknown_topic_or_partition,
        ("a", 9): ErrorCode.unknown_topic_or_partition,  # no such partition either
    }
    assert brokers.calls == [(1, (("a", 0),))]


def test_a_topic_deleted_while_retrying_is_dropped() -> None:
    cache = cluster({"a": [1], "b": [2]})

    def script(broker: int, request: MarkerRequest) -> MarkerErrors:
        if broker == 2:
            del cache.topics["b"]
            return {("b", 0): ErrorCode.unknown_topic_or_partition}
        return dict.fromkeys(request.partitions, OK)

    result = send(cache, Brokers(script), marker(("a", 0), ("b", 0)))
    assert result == {("a", 0): OK, ("b", 0): ErrorCode.unknown_topic_or_partition}


@pytest.mark.parametrize(
    "fence", [ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced]
)
def test_fencing_stops_the_send_for_every_partition(fence: ErrorCode) -> None:
    cache = cluster({"a": [1, 2]})

    def script(broker: int, request: MarkerRequest) -> MarkerErrors:
        if broker == 1:
            return {("a", 0): fence}
        return {("a", 1): ErrorCode.not_leader_or_follower}

    brokers = Brokers(script)
    assert send(cache, brokers, marker(("a", 0), ("a", 1))) == {("a", 0): fence, ("a", 1): fence}
    assert len(brokers.calls) == 2  # no retry of a-1 once the transaction is fenced


def test_an_unsupported_format_partition_is_dropped() -> None:
    cache = cluster({"a": [1]})
    brokers = Brokers(lambda b, m: {("a", 0): ErrorCode.unsupported_for_message_format})
    assert send(cache, brokers, marker(("a", 0))) == {
        ("a", 0): ErrorCode.unsupported_for_message_format
    }
    assert len(brokers.calls) == 1


def test_close_stops_a_send_that_cannot_finish() -> None:
    cache = cluster({"a": [1, 2]})

    def script(broker: int, request: MarkerRequest) -> MarkerErrors:
        if broker == 1:
            return dict.fromkeys(request.partitions, OK)
        return dict.fromkeys(request.partitions, ErrorCode.not_enough_replicas)

    brokers = Brokers(script)

    async def run() -> MarkerErrors:
        sender = channel(cache, brokers)
        pending = asyncio.ensure_future(sender.send(marker(("a", 0), ("a", 1))))
        while len(brokers.calls) < 4:  # it keeps retrying a-1
            await asyncio.sleep(0.001)
        await sender.close()
        return await asyncio.wait_for(pending, 5)

    assert asyncio.run(run()) == {("a", 0): OK, ("a", 1): ErrorCode.coordinator_not_available}
    assert [b for b, _ in brokers.calls[1:]] == [2] * (len(brokers.calls) - 1)


def test_close_abandons_a_round_waiting_on_a_leader() -> None:
    cache = cluster({"a": [1]})
    started = asyncio.Event()

    async def never_answers(broker: int, request: MarkerRequest) -> MarkerErrors:
        started.set()
        await asyncio.Event().wait()  # a leader waiting on its ISR for request.timeout.ms
        raise AssertionError("unreachable")

    async def run() -> MarkerErrors:
        sender = TxnMarkerChannel(
            cache, node_id=HERE, local=Brokers().local, remote=never_answers, clock=ManualClock()
        )
        pending = asyncio.ensure_future(sender.send(marker(("a", 0))))
        await started.wait()
        await sender.close()
        return await asyncio.wait_for(pending, 5)

    assert asyncio.run(run()) == {("a", 0): ErrorCode.coordinator_not_available}


def test_backoff_grows_between_failed_rounds_up_to_its_maximum() -> None:
    cache = cluster({"a": [1]})
    brokers = Brokers(lambda b, m: {("a", 0): ErrorCode.not_enough_replicas})
    slept: list[float] = []

    async def run() -> None:
        sender = TxnMarkerChannel(
            cache,
            node_id=HERE,
            local=brokers.local,
            remote=brokers.remote,
            clock=ManualClock(),
            retry_backoff_s=0.001,
            retry_backoff_max_s=0.004,
        )
        real_sleep = asyncio.sleep

        async def recorded(delay: float) -> None:
            slept.append(delay)
            await real_sleep(0)

        pending = asyncio.ensure_future(sender.send(marker(("a", 0))))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(asyncio, "sleep", recorded)
            while len(slept) < 5:
                await real_sleep(0)
        await sender.close()
        await pending

    asyncio.run(run())
    assert slept[:5] == [0.001, 0.002, 0.004, 0.004, 0.004]
