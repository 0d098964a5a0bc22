"""Produce requests renamed on raw bytes: kio in, raw rewrite, kio out; record sets never copied."""

from __future__ import annotations

import contextlib
import struct
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.wire.messages import MalformedRequestError, encode_entity
from brokers.wire.produce_request import (
    ProducePartition,
    ProduceRequestView,
    ProduceTopic,
    parse_produce_request,
)
from gateway.kafka.raw.produce_request import build_produce_request
from tests.unit.gateway.raw.kio_messages import (
    NAMESPACE,
    PRODUCE_VERSIONS,
    TOPIC_ALPHABET,
    TopicSpec,
    decoded_request,
    encoded,
    produce_request,
)

pytestmark = pytest.mark.unit

BATCH = bytes(range(256)) * 40  # stands in for a record batch: opaque bytes
TOPICS: list[TopicSpec] = [
    ("orders", [(0, BATCH), (3, BATCH[:700]), (5, None)]),
    ("audit.log", [(1, b"")]),
    ("empty", []),
]


def renamed(topics: list[TopicSpec]) -> list[TopicSpec]:
    return [(NAMESPACE.fleet(name), partitions) for name, partitions in topics]


def rebuild(
    view: ProduceRequestView, topics: list[ProduceTopic] | None = None
) -> list[bytes | memoryview]:
    return build_produce_request(
        view,
        topics=topics,
        rename=NAMESPACE.fleet,
        transactional_id=NAMESPACE.fleet_or_none(view.transactional_id),
    )


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
@pytest.mark.parametrize("transactional_id", [None, "tx-1"])
def test_every_version_is_renamed(version: int, transactional_id: str | None) -> None:
    body = encoded(produce_request(version, TOPICS, transactional_id, acks=1))

    view = parse_produce_request(body, version)

    assert (view.version, view.acks, view.timeout_ms) == (version, 1, 1500)
    assert view.transactional_id == transactional_id
    assert [t.name for t in view.topics] == ["orders", "audit.log", "empty"]
    assert view.records_bytes() == len(BATCH) + 700
    expected = produce_request(
        version, renamed(TOPICS), NAMESPACE.fleet_or_none(transactional_id), acks=1
    )
    assert decoded_request(version, rebuild(view)) == expected


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_record_sets_go_out_as_the_views_of_the_request(version: int) -> None:
    body = encoded(produce_request(version, TOPICS))
    view = parse_produce_request(body, version)

    parts = rebuild(view)

    records = [p.records for t in view.topics for p in t.partitions if p.records]
    for batch in records:
        assert batch.obj is body.obj  # a view of the request buffer, not a copy
        assert any(part is batch for part in parts)
    views = [part for part in parts if isinstance(part, memoryview)]
    assert len(views) == len(records)
    copied = sum(len(part) for part in parts if isinstance(part, bytes))
    assert copied < 100  # names, counts, lengths: nothing of the batches


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_a_subset_of_topics_is_forwarded(version: int) -> None:
    view = parse_produce_request(encoded(produce_request(version, TOPICS, "tx")), version)

    parts = rebuild(view, topics=[view.topics[1]])

    expected = produce_request(version, renamed(TOPICS[1:2]), "acme_tx")
    assert decoded_request(version, parts) == expected


@pytest.mark.parametrize("version", PRODUCE_VERSIONS)
def test_topics_the_caller_builds_are_encoded_too(version: int) -> None:
    view = parse_produce_request(encoded(produce_request(version, [])), version)
    topic = ProduceTopic(
        "made", [ProducePartition(2, memoryview(b"abc")), ProducePartition(4, None)]
    )

    parts = rebuild(view, topics=[topic])

    expected = produce_request(version, [("acme_made", [(2, b"abc"), (4, None)])])
    assert decoded_request(version, parts) == expected


@pytest.mark.parametrize("version", range(9, 13))
def test_unknown_tagged_fields_are_dropped(version: int) -> None:
    clean = encode_entity(produce_request(version, [("t", [(0, b"xyz")])]))
    # the last three bytes are the empty tagged sections of the partition, topic and request
    tagged = clean[:-3] + b"\x01\x07\x02ab" + b"\x01\x00\x01z" + b"\x02\x01\x00\x02\x01q"

    parts = build_produce_request(
        parse_produce_request(memoryview(tagged), version),
        rename=lambda name: name,
        transactional_id=None,
    )

    assert b"".join(parts) == clean


names = st.text(TOPIC_ALPHABET, min_size=1, max_size=60)
partitions = st.lists(
    st.tuples(st.integers(0, 2**31 - 1), st.none() | st.binary(max_size=600)), max_size=5
)
topic_lists = st.lists(st.tuples(names, partitions), max_size=6, unique_by=lambda t: t[0])


@settings(max_examples=150, deadline=None)
@given(
    version=st.sampled_from(PRODUCE_VERSIONS),
    topics=topic_lists,
    transactional_id=st.none() | st.text(max_size=40),
    acks=st.sampled_from([-1, 0, 1]),
)
def test_any_request_round_trips(
    version: int, topics: list[TopicSpec], transactional_id: str | None, acks: int
) -> None:
    body = encoded(produce_request(version, topics, transactional_id, acks))
    view = parse_produce_request(body, version)

    same = build_produce_request(view, rename=lambda n: n, transactional_id=transactional_id)
    parts = rebuild(view)

    assert b"".join(same) == body  # nothing changed: byte for byte the request
    expected = produce_request(
        version, renamed(topics), NAMESPACE.fleet_or_none(transactional_id), acks
    )
    assert decoded_request(version, parts) == expected
    assert view.records_bytes() == sum(len(r or b"") for _, ps in topics for _, r in ps)


@pytest.mark.parametrize("version", [3, 8, 9, 12])
def test_every_truncation_is_malformed(version: int) -> None:
    body = encode_entity(produce_request(version, TOPICS[:2], "tx"))
    for size in range(len(body)):
        with pytest.raises(MalformedRequestError):
            parse_produce_request(memoryview(body[:size]), version)
    with pytest.raises(MalformedRequestError):
        parse_produce_request(memoryview(body + b"\x00"), version)


I32 = struct.Struct(">i")
HEAD_CLASSIC = b"\xff\xff" + b"\xff\xff" + I32.pack(1000)  # null transactional id, acks, timeout
HEAD_COMPACT = b"\x00" + b"\xff\xff" + I32.pack(1000)

HOSTILE = {
    "huge topic count": (3, HEAD_CLASSIC + I32.pack(2**31 - 1)),
    "negative topic count": (3, HEAD_CLASSIC + I32.pack(-2)),
    "null topics": (3, HEAD_CLASSIC + I32.pack(-1)),
    "negative string length": (3, b"\xff\xfb" + HEAD_CLASSIC[2:] + I32.pack(0)),
    "huge string length": (3, b"\x7f\xff" + b"\x00" * 20),
    "null topic name": (3, HEAD_CLASSIC + I32.pack(1) + b"\xff\xff" + I32.pack(0)),
    "not utf-8": (3, HEAD_CLASSIC + I32.pack(1) + b"\x00\x02\xc3\x28" + I32.pack(0)),
    "huge partition count": (3, HEAD_CLASSIC + I32.pack(1) + b"\x00\x01t" + I32.pack(2**30)),
    "huge records": (
        3,
        HEAD_CLASSIC + I32.pack(1) + b"\x00\x01t" + I32.pack(1) + I32.pack(0) + I32.pack(2**31 - 1),
    ),
    "negative records": (
        3,
        HEAD_CLASSIC + I32.pack(1) + b"\x00\x01t" + I32.pack(1) + I32.pack(0) + I32.pack(-7),
    ),
    "compact huge count": (9, HEAD_COMPACT + b"\xff\xff\xff\xff\x07"),
    "varint too long": (9, HEAD_COMPACT + b"\xff\xff\xff\xff\xff\x01"),
    "compact huge records": (
        9,
        HEAD_COMPACT + b"\x02\x02t\x02" + I32.pack(0) + b"\xff\xff\xff\xff\x07",
    ),
    "truncated tagged field": (9, HEAD_COMPACT + b"\x01" + b"\x01\x00\x0aab"),
    "huge tagged field count": (9, HEAD_COMPACT + b"\x01" + b"\xff\xff\xff\xff\x07"),
    "tagged field past the end": (9, HEAD_COMPACT + b"\x01" + b"\x01\x00\xff\xff\xff\xff\x07"),
}


@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_lengths_are_malformed_without_allocating(case: str) -> None:
    version, body = HOSTILE[case]
    tracemalloc.start()
    try:
        with pytest.raises(MalformedRequestError):
            parse_produce_request(memoryview(body), version)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(PRODUCE_VERSIONS), data=st.data())
def test_corrupted_requests_parse_or_are_malformed(version: int, data: st.DataObject) -> None:
    body = bytearray(encode_entity(produce_request(version, TOPICS[:2], "tx")))
    for _ in range(data.draw(st.integers(1, 4))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    try:
        view = parse_produce_request(memoryview(body), version)
    except MalformedRequestError:
        return
    parts = build_produce_request(view, rename=lambda n: n, transactional_id=view.transactional_id)
    assert parse_produce_request(memoryview(b"".join(parts)), version) == view


@given(body=st.binary(max_size=200), version=st.sampled_from(PRODUCE_VERSIONS))
def test_random_bytes_parse_or_are_malformed(body: bytes, version: int) -> None:
    with contextlib.suppress(MalformedRequestError):
        parse_produce_request(memoryview(body), version)


@pytest.mark.parametrize("version", [0, 2, 14])
def test_versions_outside_3_to_13_are_refused(version: int) -> None:
    with pytest.raises(ValueError, match="not handled raw"):
        parse_produce_request(memoryview(b""), version)
