"""The gateway's small core parts: frames, the API table, namespaces, ordered answers."""

from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.kafka.api_table import (
    LOCAL,
    advertised,
    advertised_min,
    client_backs_off,
    gateway_ranges,
)
from gateway.kafka.exchange import ResponseQueue
from gateway.kafka.frames import FrameReader, FrameTooLargeError
from gateway.kafka.namespace import TenantNamespace, tenant_of
from tests.polling import wait_until_async

pytestmark = pytest.mark.unit


def framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


@given(st.lists(st.binary(min_size=4, max_size=300), max_size=20), st.integers(1, 50))
def test_frames_survive_any_split(bodies: list[bytes], chunk: int) -> None:
    stream = b"".join(framed(body) for body in bodies)
    reader = FrameReader(1000)
    out = []
    for start in range(0, len(stream), chunk):
        out += [bytes(frame) for frame in reader.feed(stream[start : start + chunk])]
    assert out == bodies
    assert reader.buffered == 0


def test_frames_over_the_limit_are_refused_before_buffering() -> None:
    reader = FrameReader(512 * 1024)
    with pytest.raises(FrameTooLargeError):
        list(reader.feed(struct.pack(">i", 600 * 1024) + b"x" * 10))
    with pytest.raises(FrameTooLargeError):
        list(FrameReader(100).feed(struct.pack(">i", -1)))


def test_advertised_is_the_intersection_with_the_brokers() -> None:
    brokers = {0: (0, 11), 1: (4, 17), 3: (0, 12), 4: (0, 7), 12: (0, 4), 35: (1, 4)}
    table = advertised(brokers)
    assert (table[0].min_version, table[0].max_version) == (3, 11)
    assert (table[1].min_version, table[1].max_version) == (4, 17)  # topic ids (v13+) mapped
    assert 4 not in table and 35 not in table  # inter-broker and refused APIs never appear
    assert 19 not in table  # the brokers do not serve it here: not advertised
    for api_key in LOCAL:  # answered by the gateway itself, whatever the brokers say
        assert api_key in table
    assert set(table) <= set(gateway_ranges())


def test_produce_is_shown_from_v0_but_served_from_v3() -> None:
    """KAFKA-18659: older librdkafka compresses only when ApiVersions shows Produce v0."""
    table = advertised({0: (0, 11), 1: (4, 12)})
    assert advertised_min(table[0]) == 0 and not table[0].serves(2) and table[0].serves(3)
    assert advertised_min(table[1]) == 4


def test_kip219_versions() -> None:
    assert not client_backs_off(0, 5) and client_backs_off(0, 6)
    assert not client_backs_off(1, 7) and client_backs_off(1, 8)
    assert client_backs_off(60, 0)  # APIs newer than KIP-219


def test_namespace_round_trip_and_foreign_names() -> None:
    acme = TenantNamespace("acme")
    assert acme.fleet("orders") == "acme_orders"
    assert acme.local("acme_orders") == "orders"
    assert acme.local("bolt_orders") is None
    assert acme.local("__consumer_offsets") is None
    assert acme.local("acmex_orders") is None
    assert acme.max_topic_length == 249 - len("acme_")
    assert tenant_of("acme_a_b") == ("acme", "a_b")
    assert tenant_of("__usage") is None
    with pytest.raises(ValueError):
        TenantNamespace("ac_me")


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Topic acme_orders already exists.", "Topic orders already exists."),
        ("Topic 'x' collides with existing topic: bolt_x", None),
        ("bolt_ is not yours", None),
        ("offsets in __consumer_offsets", None),
        ("plain words only", "plain words only"),
        (None, None),
    ],
)
def test_scrub_fails_closed(message: str | None, expected: str | None) -> None:
    assert TenantNamespace("acme").scrub(message) == expected


def test_answers_leave_in_request_order_and_throttled_ones_mute() -> None:
    written: list[bytes] = []
    mutes: list[int] = []
    queue = ResponseQueue(lambda parts: written.extend(bytes(p) for p in parts), mutes.append)

    async def scenario() -> None:
        first, second, third = queue.reserve(), queue.reserve(), queue.reserve()
        queue.complete(third, [b"3"])
        second.throttle_ms = 250
        queue.complete(second, [b"2"])
        assert written == []  # the first answer is not there yet
        queue.complete(first, [b"1"])
        assert written == [b"1", b"2", b"3"]
        assert mutes == [250]
        late = queue.reserve()
        queue.complete(late, None, delay_ms=20)  # an old client's throttled answer waits
        assert len(queue) == 1

        async def sent() -> bool:
            return not len(queue)

        await wait_until_async(sent, what="the delayed answer sent", timeout=5, interval=0.005)

    asyncio.run(scenario())
