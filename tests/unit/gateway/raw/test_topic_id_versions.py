"""Produce v13 and Fetch v13–18 on the gateway's raw paths (KIP-516): topics are 16-byte ids that
go through unchanged, and an answer keeps only the ids the caller's `rename` knows (fail closed);
from Fetch v16 the brokers' `node_endpoints` never reach the client."""

from __future__ import annotations

import datetime
import uuid
from typing import Any

import pytest

from brokers.client.messages import decode_response
from brokers.wire.entities import make, request_module, response_module
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import decode_request, encode_entity
from brokers.wire.produce_request import parse_produce_request
from gateway.kafka.raw.fetch_response import fetch_records_bytes, rewrite_fetch_response
from gateway.kafka.raw.produce_request import build_produce_request
from gateway.kafka.raw.produce_response import rewrite_produce_response

pytestmark = pytest.mark.unit

OURS, THEIRS = uuid.uuid4(), uuid.uuid4()
KNOWN = {OURS.bytes.hex(): "orders"}
BATCH = bytes(range(256)) * 4


def _body(entity: Any) -> memoryview:
    return memoryview(encode_entity(entity))


def _fetch_response(version: int) -> Any:
    module = response_module(1, version)

    def topic(topic_id: uuid.UUID, records: bytes) -> Any:
        partition = make(
            module,
            "PartitionData",
            partition_index=0,
            error_code=ErrorCode.none,
            high_watermark=9,
            last_stable_offset=9,
            log_start_offset=0,
            aborted_transactions=None,
            preferred_read_replica=-1,
            records=records,
        )
        return make(module, "FetchableTopicResponse", topic_id=topic_id, partitions=(partition,))

    endpoints: tuple[Any, ...] = ()
    if version >= 16:
        endpoints = (make(module, "NodeEndpoint", node_id=1, host="broker-1.fleet", port=9092),)
    return make(
        module,
        "FetchResponse",
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        session_id=0,
        responses=(topic(THEIRS, BATCH[:100]), topic(OURS, BATCH)),
        node_endpoints=endpoints,
    )


@pytest.mark.parametrize("version", range(13, 19))
def test_fetch_answer_keeps_only_known_ids_unchanged(version: int) -> None:
    body = _body(_fetch_response(version))
    assert fetch_records_bytes(body, version) == len(BATCH) + 100
    out = rewrite_fetch_response(
        body, version, rename=KNOWN.get, drop_records=False, throttle_time_ms=0
    )
    assert out.bytes_per_topic == {"orders": len(BATCH)}
    raw = b"".join(bytes(p) for p in out.parts)
    assert len(raw) == out.size
    decoded = decode_response(1, version, memoryview(raw), 0)
    (topic,) = decoded.responses
    assert topic.topic_id == OURS and topic.partitions[0].records == BATCH
    if version >= 16:  # the brokers' addresses never reach the tenant
        assert decoded.node_endpoints == ()
        assert b"broker-1.fleet" not in raw


@pytest.mark.parametrize("acks", [-1, 0])
def test_produce_v13_request_passes_ids_and_records_unchanged(acks: int) -> None:
    module = request_module(0, 13)
    topics = tuple(
        make(
            module,
            "TopicProduceData",
            topic_id=topic_id,
            partition_data=(make(module, "PartitionProduceData", index=2, records=BATCH),),
        )
        for topic_id in (OURS, THEIRS)
    )
    request = make(
        module,
        "ProduceRequest",
        transactional_id="tx",
        acks=acks,
        timeout=datetime.timedelta(seconds=1),
        topic_data=topics,
    )
    view = parse_produce_request(_body(request), 13)
    assert [t.topic_id for t in view.topics] == [OURS.bytes, THEIRS.bytes]
    assert all(t.name == "" for t in view.topics)
    parts = build_produce_request(
        view, topics=view.topics[:1], rename=lambda n: "never-" + n, transactional_id="acme_tx"
    )
    sent = decode_request(0, 13, memoryview(b"".join(bytes(p) for p in parts)), 0)
    (topic,) = sent.topic_data
    assert topic.topic_id == OURS and topic.partition_data[0].records == BATCH
    assert sent.transactional_id == "acme_tx"


def test_produce_v13_answer_keeps_only_known_ids() -> None:
    module = response_module(0, 13)

    def topic(topic_id: uuid.UUID) -> Any:
        partition = make(
            module,
            "PartitionProduceResponse",
            index=0,
            error_code=ErrorCode.none,
            base_offset=5,
            log_append_time=None,
            log_start_offset=0,
            record_errors=(),
            error_message=None,
        )
        return make(
            module, "TopicProduceResponse", topic_id=topic_id, partition_responses=(partition,)
        )

    response = make(module, "ProduceResponse", responses=(topic(THEIRS), topic(OURS)))
    out = rewrite_produce_response(_body(response), 13, rename=KNOWN.get, throttle_time_ms=7)
    assert out is not None
    decoded = decode_response(0, 13, memoryview(b"".join(bytes(p) for p in out.parts)), 0)
    assert [t.topic_id for t in decoded.responses] == [OURS]
    assert decoded.throttle_time.total_seconds() * 1000 == 7


@pytest.mark.parametrize("version", [13, 16, 18])
def test_throttled_fetch_answer_keeps_partitions_without_records(version: int) -> None:
    """A throttled fetch (Kafka answers it with no data): the tenant's id stays, records go."""
    body = _body(_fetch_response(version))
    out = rewrite_fetch_response(
        body, version, rename=KNOWN.get, drop_records=True, throttle_time_ms=9
    )
    assert out.bytes_per_topic == {"orders": 0}
    decoded = decode_response(1, version, memoryview(b"".join(bytes(p) for p in out.parts)), 0)
    (topic,) = decoded.responses
    assert topic.topic_id == OURS
    (partition,) = topic.partitions
    assert (partition.high_watermark, partition.records) == (9, b"")
    assert decoded.throttle_time.total_seconds() * 1000 == 9
