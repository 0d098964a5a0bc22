"""`Session.throttled`: a request that earns a throttle as it is taken stops the pump at once, so
requests pipelined behind it are not charged before the mute (as Kafka, which reads nothing
more from a connection while it handles a request)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from gateway.kafka.exchange import Buffer
from gateway.kafka.metrics import GatewayMetrics
from gateway.kafka.services import SessionServices
from gateway.kafka.session import Channel, Session
from tests.polling import wait_until_async

pytestmark = pytest.mark.unit


class FakeChannel(Channel):
    def __init__(self) -> None:
        self.paused = False

    def write(self, parts: Sequence[Buffer]) -> None:
        pass

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    def close(self) -> None:
        pass


class CountingSession(Session):
    """Counts the frames the pump takes instead of handling them."""

    taken = 0

    def _handle(self, frame: memoryview) -> Any:
        self.taken += 1
        return None


def session() -> tuple[CountingSession, FakeChannel]:
    channel = FakeChannel()
    services = cast(SessionServices, type("Services", (), {"authenticator": None})())
    metrics = GatewayMetrics(CollectorRegistry())
    return CountingSession(
        services, channel, peer_host="127.0.0.1", node_id=0, metrics=metrics
    ), channel


def test_a_throttled_request_stops_the_pump_until_the_throttle_passes() -> None:
    asyncio.run(_throttled_then_unmuted())


async def _throttled_then_unmuted() -> None:
    s, channel = session()
    s.on_frame(memoryview(b"a"))
    assert s.taken == 1
    s.throttled(50)
    assert channel.paused
    s.on_frame(memoryview(b"b"))
    s.on_frame(memoryview(b"c"))
    assert s.taken == 1  # held behind the throttle

    async def unmuted() -> bool:  # by the throttle's own timer
        return s.taken >= 3

    await wait_until_async(unmuted, what="the held frames taken", timeout=5, interval=0.01)
    assert s.taken == 3
    assert not channel.paused


def test_no_throttle_keeps_the_pump_going() -> None:
    s, channel = session()
    s.throttled(0)
    s.on_frame(memoryview(b"a"))
    s.on_frame(memoryview(b"b"))
    assert s.taken == 2
    assert not channel.paused
