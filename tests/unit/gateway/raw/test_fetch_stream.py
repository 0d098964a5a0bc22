"""Fetch responses rewritten while they stream through: the same bytes as the whole-answer
rewrite, whatever the chunking, records passed on as views; anything else left to the buffer."""

from __future__ import annotations

import random
import struct

import pytest

from brokers.wire.messages import MalformedRequestError, encode_entity
from gateway.kafka.raw.fetch_response import fetch_records_bytes, rewrite_fetch_response
from gateway.kafka.raw.fetch_stream import Decision, FetchStream
from tests.unit.gateway.raw.kio_messages import (
    FETCH_VERSIONS,
    NAMESPACE,
    fetch_partition,
    fetch_response,
)

pytestmark = pytest.mark.unit

BATCH = bytes(range(256)) * 40
CORRELATION = 4242


def frame(version: int, topics: list[tuple[str, list[tuple[int, bytes | None]]]]) -> bytes:
    """The broker's frame after its size prefix: response header (with a tagged field when
    flexible, which the gateway drops), then the body."""
    response = fetch_response(
        version,
        [
            (name, [fetch_partition(version, i, r, aborted=i % 2 == 0) for i, r in parts])
            for name, parts in topics
        ],
    )
    header = struct.pack(">i", CORRELATION) + (b"\x01\x05\x02hi" if version >= 12 else b"")
    return header + encode_entity(response)


def streamed(version: int, data: bytes, seed: int) -> tuple[FetchStream, list[memoryview]]:
    stream = FetchStream(version, CORRELATION, version >= 12, len(data), NAMESPACE.local)
    rng, pos, out = random.Random(seed), 0, []
    chunks = []
    while pos < len(data):
        size = rng.choice([1, 2, 3, 7, 100, 4096, len(data)])
        chunk = memoryview(bytearray(data[pos : pos + size]))  # a fresh buffer, as read
        chunks.append(chunk)
        pos += len(chunk)
        stream.feed(chunk)
        out += stream.take_out()
    return stream, out


@pytest.mark.parametrize("version", FETCH_VERSIONS)
@pytest.mark.parametrize("seed", range(4))
def test_a_streamed_answer_is_the_whole_answer_rewrite(version: int, seed: int) -> None:
    parts = [(0, BATCH), (1, None), (2, BATCH[:300]), (4, b""), (9, BATCH * 3)]
    data = frame(version, [("acme_orders", parts)])
    stream, out = streamed(version, data, seed)
    assert stream.decision is Decision.STREAM and stream.done and stream.topic == "orders"
    body = stream.head + b"".join(out)
    assert len(body) == stream.client_body_size
    start = 4 + (5 if version >= 12 else 0)
    whole = rewrite_fetch_response(
        memoryview(data[start:]),
        version,
        rename=NAMESPACE.local,
        drop_records=False,
        throttle_time_ms=0,
    )
    assert body == b"".join(whole.parts)
    assert stream.record_bytes == fetch_records_bytes(memoryview(data[start:]), version)


def test_the_records_are_passed_on_as_views_of_the_chunks_read() -> None:
    data = frame(12, [("acme_orders", [(0, BATCH * 10)])])
    stream = FetchStream(12, CORRELATION, True, len(data), NAMESPACE.local)
    chunk = memoryview(bytearray(data))
    stream.feed(chunk)
    largest = max(stream.take_out(), key=len)
    assert largest.obj is chunk.obj and len(largest) == len(BATCH * 10)


@pytest.mark.parametrize(
    "topics",
    [
        [("acme_orders", [(0, BATCH)]), ("acme_audit", [(1, BATCH)])],  # two entries
        [("bolt_orders", [(0, BATCH)])],  # not the tenant's
    ],
)
def test_anything_but_one_of_the_tenants_topics_is_left_to_the_buffered_rewrite(
    topics: list[tuple[str, list[tuple[int, bytes | None]]]],
) -> None:
    data = frame(11, topics)
    stream = FetchStream(11, CORRELATION, False, len(data), NAMESPACE.local)
    stream.feed(memoryview(data[:40]))
    assert stream.decision is Decision.BUFFER and stream.take_out() == []
    stream.feed(memoryview(data[40:]))  # ignored from here on: the caller keeps the chunks
    assert stream.take_out() == []


def test_a_wrong_correlation_id_or_a_short_answer_is_refused() -> None:
    data = frame(12, [("acme_orders", [(0, BATCH)])])
    with pytest.raises(ConnectionError):
        FetchStream(12, CORRELATION + 1, True, len(data), NAMESPACE.local).feed(memoryview(data))
    short = FetchStream(12, CORRELATION, True, len(data) - 1, NAMESPACE.local)
    with pytest.raises(MalformedRequestError):
        short.feed(memoryview(data[:-1]))
