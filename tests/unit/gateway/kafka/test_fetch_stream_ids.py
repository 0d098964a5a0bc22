"""Fetch v13–18 answers streamed (`raw.fetch_stream`): the topic is its id, passed unchanged when
it is the tenant's; from v16 the brokers' `node_endpoints` never reach the client: the section is
replaced by padding of the same size (the frame size went out with the head): one tag no version
defines, which clients skip (KIP-482). Without endpoints the stream is the whole-answer rewrite byte for byte."""

from __future__ import annotations

import datetime
import random
import struct
import uuid
from typing import Any

import pytest

from brokers.client.messages import decode_response
from brokers.wire.entities import make, response_module
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import encode_entity
from brokers.wire.raw_reader import Reader
from gateway.kafka.raw.fetch_response import rewrite_fetch_response
from gateway.kafka.raw.fetch_stream import Decision, FetchStream, padding_tags

pytestmark = pytest.mark.unit

OURS, THEIRS = uuid.uuid4(), uuid.uuid4()
KNOWN = {OURS.bytes.hex(): "orders"}
BATCH = bytes(range(256)) * 64
CORRELATION = 99


def answer(version: int, topic_id: uuid.UUID, *, endpoints: int) -> bytes:
    module = response_module(1, version)
    partitions = tuple(
        make(
            module,
            "PartitionData",
            partition_index=i,
            error_code=ErrorCode.none,
            high_watermark=9,
            last_stable_offset=9,
            log_start_offset=0,
            aborted_transactions=None,
            preferred_read_replica=-1,
            records=BATCH[: 1000 * (i + 1)],
        )
        for i in range(5)
    )
    topic = make(module, "FetchableTopicResponse", topic_id=topic_id, partitions=partitions)
    extra: dict[str, Any] = {}
    if version >= 16:
        extra["node_endpoints"] = tuple(
            make(module, "NodeEndpoint", node_id=n, host=f"broker-{n}.fleet", port=9092)
            for n in range(endpoints)
        )
    body = make(
        module,
        "FetchResponse",
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        session_id=0,
        responses=(topic,),
        **extra,
    )
    return struct.pack(">i", CORRELATION) + b"\x00" + encode_entity(body)


def stream(version: int, data: bytes) -> tuple[FetchStream, bytes]:
    walk = FetchStream(version, CORRELATION, True, len(data), KNOWN.get)
    rng, pos, out = random.Random(version), 0, bytearray()
    while pos < len(data):
        chunk = data[pos : pos + rng.choice([1, 3, 17, 500, 4096])]
        pos += len(chunk)
        walk.feed(memoryview(bytearray(chunk)))
        out += b"".join(walk.take_out())
    return walk, walk.head + bytes(out)


@pytest.mark.parametrize("version", range(13, 19))
@pytest.mark.parametrize("endpoints", [0, 1, 3])
def test_an_id_answer_streams_with_no_broker_address(version: int, endpoints: int) -> None:
    data = answer(version, OURS, endpoints=endpoints)
    walk, body = stream(version, data)
    assert walk.decision is Decision.STREAM and walk.done and walk.topic == "orders"
    assert len(body) == walk.client_body_size
    whole = rewrite_fetch_response(
        memoryview(data[5:]), version, rename=KNOWN.get, drop_records=False, throttle_time_ms=0
    )
    expected = b"".join(bytes(p) for p in whole.parts)
    assert b"broker-" not in body
    if version < 16 or endpoints == 0:
        assert body == expected
        return
    # the whole rewrite ends with an empty section (b"\x00"); the stream with padding as long
    # as the broker's section, which clients skip (KIP-482) and kio cannot read: cut it off
    kept = len(expected) - 1
    assert body[:kept] == expected[:kept]
    assert body[kept:] == padding_tags(len(body) - kept) and len(body) - kept > 1
    decoded = decode_response(1, version, memoryview(body[:kept] + b"\x00"), 0)
    assert decoded.node_endpoints == () and decoded.responses[0].topic_id == OURS


@pytest.mark.parametrize("version", [13, 16])
def test_another_tenants_id_is_left_to_the_buffered_rewrite(version: int) -> None:
    data = answer(version, THEIRS, endpoints=0)
    walk = FetchStream(version, CORRELATION, True, len(data), KNOWN.get)
    walk.feed(memoryview(data[:60]))
    assert walk.decision is Decision.BUFFER and walk.take_out() == []


def test_padding_fills_any_section_size_and_reads_as_tags() -> None:
    for size in [1, *range(3, 20_000)]:
        padding = padding_tags(size)
        assert len(padding) == size
        reader = Reader(memoryview(padding))
        reader.tagged_fields()
        reader.expect_end()
