"""Produce v13 and Fetch v13–18 name topics by id (KIP-516) through a real broker's routes: the
topic is found by its id, an id nobody has is UNKNOWN_TOPIC_ID, a local replica holding another id
is INCONSISTENT_TOPIC_ID, and from Fetch v16 a leader error carries the current leader and its
endpoint (KIP-951)."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from brokers.app.runtime import Broker
from brokers.handlers import fetch, produce
from brokers.records.batch import iter_headers
from brokers.records.builder import simple_batch
from brokers.replication.partition import LeadershipState
from brokers.server.context import RequestContext
from brokers.server.response import RawResponse
from brokers.wire.errors import ErrorCode
from brokers.wire.headers import RequestHeader
from tests.unit.handlers.admin_harness import call, entity, routed, standalone_broker

pytestmark = pytest.mark.unit
FETCH_BY_ID = range(13, 19)


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Broker]:
    with standalone_broker(tmp_path) as b:
        b.topics.create_topic("t", 1, 1, {})
        yield b


def topic_id(broker: Broker) -> uuid.UUID:
    meta = broker.metadata.topic("t")
    assert meta is not None and meta.topic_id is not None
    return meta.topic_id


def produce_by_id(broker: Broker, wanted: uuid.UUID, values: list[bytes]) -> Any:
    data = entity(0, 13, "PartitionProduceData", index=0, records=simple_batch(values))
    request = entity(
        0,
        13,
        "ProduceRequest",
        transactional_id=None,
        acks=1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(entity(0, 13, "TopicProduceData", topic_id=wanted, partition_data=(data,)),),
    )
    (topic,) = call(routed(broker, produce.API_KEY), 13, request).responses
    assert topic.topic_id == wanted
    (answer,) = topic.partition_responses
    return answer


def fetch_by_id(broker: Broker, version: int, wanted: uuid.UUID, replica_id: int = -1) -> Any:
    partition = entity(
        1, version, "FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=1 << 20
    )
    request = entity(
        1,
        version,
        "FetchRequest",
        replica_id=replica_id,
        replica_state=entity(1, version, "ReplicaState", replica_id=replica_id, replica_epoch=-1)
        if version >= 15
        else None,
        max_wait=datetime.timedelta(milliseconds=0),
        min_bytes=0,
        topics=(entity(1, version, "FetchTopic", topic_id=wanted, partitions=(partition,)),),
        forgotten_topics_data=(),
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
        decoded, consumed = entity_reader(load_response_schema(1, version))(body, 0)
        assert consumed == len(body)
        return decoded

    return asyncio.run(run())


def offsets(records: bytes | None) -> list[int]:
    found: list[int] = []
    for _, header in iter_headers(records or b""):
        found += range(header.base_offset, header.last_offset + 1)
    return found


def test_produce_and_fetch_by_id(broker: Broker) -> None:
    known = topic_id(broker)
    written = produce_by_id(broker, known, [b"a", b"b"])
    assert (written.error_code, written.base_offset) == (ErrorCode.none, 0)
    for version in FETCH_BY_ID:
        (topic,) = fetch_by_id(broker, version, known).responses
        assert topic.topic_id == known
        (answer,) = topic.partitions
        assert answer.error_code == ErrorCode.none and offsets(answer.records) == [0, 1]


def test_an_id_nobody_has_is_unknown(broker: Broker) -> None:
    nobody = uuid.uuid4()
    assert produce_by_id(broker, nobody, [b"lost"]).error_code == ErrorCode.unknown_topic_id
    for version in FETCH_BY_ID:
        (answer,) = fetch_by_id(broker, version, nobody).responses[0].partitions
        assert answer.error_code == ErrorCode.unknown_topic_id and not answer.records
    assert broker.replicas.get("t", 0).log.log_end_offset == 0  # nothing written anywhere


def test_a_replica_of_another_id_is_inconsistent(broker: Broker) -> None:
    broker.replicas.get("t", 0).topic_id = uuid.uuid4().bytes  # the topic was recreated meanwhile
    (answer,) = fetch_by_id(broker, 13, topic_id(broker)).responses[0].partitions
    assert answer.error_code == ErrorCode.inconsistent_topic_id


@pytest.mark.parametrize("version", [15, 16, 18])
def test_leader_errors_name_the_leader_from_v16(broker: Broker, version: int) -> None:
    """A replica fetching from a broker that follows: NOT_LEADER_OR_FOLLOWER; from v16 with the
    leader and epoch the metadata shows and that leader's endpoint."""
    broker.replicas.get("t", 0).become_follower(LeadershipState(5, 2, [5, 0], [5, 0]))
    decoded = fetch_by_id(broker, version, topic_id(broker), replica_id=7)
    (answer,) = decoded.responses[0].partitions
    assert answer.error_code == ErrorCode.not_leader_or_follower
    if version < 16:
        return
    meta = broker.metadata.partition("t", 0)
    assert meta is not None
    assert (answer.current_leader.leader_id, answer.current_leader.leader_epoch) == (
        meta.leader,
        meta.leader_epoch,
    )
    endpoint = broker.metadata.brokers[meta.leader]
    assert [(n.node_id, n.host, n.port) for n in decoded.node_endpoints] == [
        (endpoint.node_id, endpoint.host, endpoint.port)
    ]
