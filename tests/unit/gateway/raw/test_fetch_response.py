"""Fetch responses rewritten on raw bytes: the tenant's topics renamed, others dropped, records
passed through as views of the broker's answer (or emptied for a throttled fetch)."""

from __future__ import annotations

import struct
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.wire.entities import make, response_module
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import MalformedRequestError, encode_entity
from gateway.kafka.raw.fetch_response import (
    FetchRewrite,
    fetch_records_bytes,
    rewrite_fetch_response,
)
from tests.unit.gateway.raw.kio_messages import (
    FETCH_VERSIONS,
    NAMESPACE,
    TOPIC_ALPHABET,
    decoded_response,
    encoded,
    expected_fetch,
    fetch_partition,
    fetch_response,
)

pytestmark = pytest.mark.unit

BATCH = bytes(range(256)) * 40


def mixed_response(version: int) -> Any:
    """Two of the tenant's topics around another tenant's and an internal one."""

    def partitions(*specs: tuple[int, bytes | None]) -> list[Any]:
        return [fetch_partition(version, i, r, aborted=i % 2 == 0) for i, r in specs]

    return fetch_response(
        version,
        [
            ("acme_orders", partitions((0, BATCH), (1, None), (2, BATCH[:300]), (4, b""))),
            ("bolt_orders", partitions((0, BATCH))),
            ("__consumer_offsets", partitions((3, BATCH[:50]))),
            ("acme_audit", partitions((7, BATCH[:10]))),
            ("acme_idle", []),
        ],
    )


def rewrite(
    body: memoryview, version: int, *, drop: bool = False, throttle: int = 0
) -> FetchRewrite:
    return rewrite_fetch_response(
        body, version, rename=NAMESPACE.local, drop_records=drop, throttle_time_ms=throttle
    )


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_every_version_keeps_only_the_tenants_topics_renamed(version: int) -> None:
    response = mixed_response(version)

    result = rewrite(encoded(response), version, throttle=0)

    assert decoded_response(version, result.parts) == expected_fetch(
        response, throttle_ms=0, drop_records=False
    )
    assert result.size == sum(len(part) for part in result.parts)
    assert result.bytes_per_topic == {"orders": len(BATCH) + 300, "audit": 10, "idle": 0}


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_throttled_fetch_keeps_partitions_without_records(version: int) -> None:
    response = mixed_response(version)

    result = rewrite(encoded(response), version, drop=True, throttle=1234)

    assert decoded_response(version, result.parts) == expected_fetch(
        response, throttle_ms=1234, drop_records=True
    )
    assert result.size == sum(len(part) for part in result.parts) < 600
    assert result.bytes_per_topic == {"orders": 0, "audit": 0, "idle": 0}


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_records_go_out_as_views_of_the_answer(version: int) -> None:
    body = encoded(mixed_response(version))

    result = rewrite(body, version)

    views = [part for part in result.parts if isinstance(part, memoryview)]
    assert all(part.obj is body.obj for part in views)
    assert sum(len(part) for part in views) > len(BATCH) + 300
    copied = sum(len(part) for part in result.parts if isinstance(part, bytes))
    assert copied < 100  # header, names and counts only
    assert len(views) == 3  # one per kept topic with partitions


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_a_response_of_only_other_tenants_topics_is_empty(version: int) -> None:
    response = fetch_response(
        version, [("bolt_x", [fetch_partition(version, 0, BATCH, aborted=True)]), ("plain", [])]
    )

    result = rewrite(encoded(response), version)

    assert decoded_response(version, result.parts).responses == ()
    assert result.bytes_per_topic == {}


@pytest.mark.parametrize("version", FETCH_VERSIONS)
@pytest.mark.parametrize("drop", [False, True])
def test_a_topic_listed_twice_stays_listed_twice(version: int, drop: bool) -> None:
    def entry(name: str, index: int) -> tuple[str, list[Any]]:
        return (name, [fetch_partition(version, index, BATCH[:index], aborted=False)])

    response = fetch_response(
        version, [entry("acme_t", 1), entry("bolt_t", 2), entry("acme_t", 3), entry("acme_u", 4)]
    )

    result = rewrite(encoded(response), version, drop=drop)

    assert decoded_response(version, result.parts) == expected_fetch(
        response, throttle_ms=0, drop_records=drop
    )
    assert result.bytes_per_topic == ({"t": 0, "u": 0} if drop else {"t": 4, "u": 4})


@pytest.mark.parametrize("version", FETCH_VERSIONS)
def test_records_bytes_counts_every_topic(version: int) -> None:
    body = encoded(mixed_response(version))

    assert fetch_records_bytes(body, version) == 2 * len(BATCH) + 300 + 50 + 10


def test_unknown_tagged_fields_are_passed_through() -> None:
    module = response_module(1, 12)
    partition = make(  # tagged fields at their defaults: kio writes empty tagged sections
        module,
        "PartitionData",
        partition_index=1,
        error_code=ErrorCode.none,
        high_watermark=5,
        aborted_transactions=None,
        records=b"r",
    )
    clean = encode_entity(fetch_response(12, [("acme_t", [partition])]))
    # the last three bytes: the tagged sections of the partition, the topic and the response
    assert clean.endswith(b"r\x00\x00\x00")
    tagged = clean[:-3] + b"\x01\x07\x02ab" + b"\x01\x05\x01z" + b"\x02\x01\x00\x09\x01q"
    same_throttle = struct.unpack_from(">i", tagged)[0]

    result = rewrite_fetch_response(
        memoryview(tagged),
        12,
        rename=lambda name: name,
        drop_records=False,
        throttle_time_ms=same_throttle,
    )
    emptied = rewrite_fetch_response(
        memoryview(tagged), 12, rename=lambda name: name, drop_records=True, throttle_time_ms=0
    )

    assert b"".join(result.parts) == tagged
    assert b"".join(emptied.parts).endswith(b"\x01" + tagged[-15:])  # empty records, same tags


names = st.text(TOPIC_ALPHABET, min_size=1, max_size=40)
fleet_names = st.one_of(
    names.map(NAMESPACE.fleet), names.map(lambda n: "bolt_" + n), names, st.just("__usage")
)
partition_specs = st.lists(
    st.tuples(st.integers(0, 2**20), st.none() | st.binary(max_size=600), st.booleans()),
    max_size=4,
)


@settings(max_examples=150, deadline=None)
@given(
    version=st.sampled_from(FETCH_VERSIONS),
    topics=st.lists(st.tuples(fleet_names, partition_specs), max_size=6, unique_by=lambda t: t[0]),
    drop=st.booleans(),
    throttle=st.integers(0, 2**31 - 1),
)
def test_any_response_is_rewritten(
    version: int, topics: list[tuple[str, list[Any]]], drop: bool, throttle: int
) -> None:
    response = fetch_response(
        version,
        [
            (name, [fetch_partition(version, i, r, aborted=a) for i, r, a in partitions])
            for name, partitions in topics
        ],
    )
    body = encoded(response)

    result = rewrite(body, version, drop=drop, throttle=throttle)
    same = rewrite_fetch_response(
        body, version, rename=lambda n: n, drop_records=False, throttle_time_ms=25
    )

    assert b"".join(same.parts) == body  # nothing changed: byte for byte the answer
    assert decoded_response(version, result.parts) == expected_fetch(
        response, throttle_ms=throttle, drop_records=drop
    )
    expected_bytes = {
        local: 0 if drop else sum(len(r or b"") for _, r, _ in partitions)
        for name, partitions in topics
        if (local := NAMESPACE.local(name)) is not None
    }
    assert result.bytes_per_topic == expected_bytes


@pytest.mark.parametrize("version", [4, 5, 7, 11, 12])
@pytest.mark.parametrize("drop", [False, True])
def test_every_truncation_is_malformed(version: int, drop: bool) -> None:
    body = encode_entity(mixed_response(version))
    for size in range(0, len(body), 7 if len(body) > 2000 else 1):
        with pytest.raises(MalformedRequestError):
            rewrite(memoryview(body[:size]), version, drop=drop)
    with pytest.raises(MalformedRequestError):
        rewrite(memoryview(body + b"\x00"), version, drop=drop)


I32 = struct.Struct(">i")
HEAD_V4 = I32.pack(0)
HEAD_V12 = I32.pack(0) + b"\x00\x00" + I32.pack(0)
PARTITION_V4 = I32.pack(0) + b"\x00\x00" + b"\x00" * 16  # index, error, high watermark, stable

HOSTILE = {
    "huge topic count": (4, HEAD_V4 + I32.pack(2**31 - 1)),
    "null topics": (4, HEAD_V4 + I32.pack(-1)),
    "negative name length": (4, HEAD_V4 + I32.pack(1) + b"\xff\xfe" + I32.pack(0)),
    "huge partition count": (4, HEAD_V4 + I32.pack(1) + b"\x00\x01t" + I32.pack(2**29)),
    "huge aborted count": (
        4,
        HEAD_V4 + I32.pack(1) + b"\x00\x01t" + I32.pack(1) + PARTITION_V4 + I32.pack(2**27),
    ),
    "huge records": (
        4,
        HEAD_V4
        + I32.pack(1)
        + b"\x00\x01t"
        + I32.pack(1)
        + PARTITION_V4
        + I32.pack(-1)
        + I32.pack(2**31 - 1),
    ),
    "negative records": (
        4,
        HEAD_V4
        + I32.pack(1)
        + b"\x00\x01t"
        + I32.pack(1)
        + PARTITION_V4
        + I32.pack(-1)
        + I32.pack(-3),
    ),
    "compact huge topic count": (12, HEAD_V12 + b"\xff\xff\xff\xff\x07"),
    "varint too long": (12, HEAD_V12 + b"\x80\x80\x80\x80\x80\x01"),
    "truncated tagged field": (12, HEAD_V12 + b"\x01" + b"\x01\x00\x0aab"),
    "huge tagged field count": (12, HEAD_V12 + b"\x01" + b"\xff\xff\xff\xff\x07"),
}


@pytest.mark.parametrize("case", HOSTILE)
@pytest.mark.parametrize("drop", [False, True])
def test_hostile_lengths_are_malformed_without_allocating(case: str, drop: bool) -> None:
    version, body = HOSTILE[case]
    tracemalloc.start()
    try:
        with pytest.raises(MalformedRequestError):
            rewrite(memoryview(body), version, drop=drop)
        with pytest.raises(MalformedRequestError):
            fetch_records_bytes(memoryview(body), version)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024


@settings(max_examples=300, deadline=None)
@given(version=st.sampled_from(FETCH_VERSIONS), drop=st.booleans(), data=st.data())
def test_corrupted_responses_rewrite_or_are_malformed(
    version: int, drop: bool, data: st.DataObject
) -> None:
    body = bytearray(encode_entity(mixed_response(version)))
    for _ in range(data.draw(st.integers(1, 4))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    try:
        result = rewrite(memoryview(body), version, drop=drop)
    except MalformedRequestError:
        return
    assert result.size == sum(len(part) for part in result.parts)


@pytest.mark.parametrize("version", [3, 19])
def test_versions_outside_4_to_18_are_refused(version: int) -> None:
    with pytest.raises(ValueError, match="not handled raw"):
        rewrite(memoryview(b""), version)
