"""The listener's connection limits, fed bytes over socketpairs (no network) with a fake clock.

`connections.max.idle.ms`: silent and stalled connections are closed, progress keeps a slow frame
alive. `queued.max.request.bytes`: a stalled partial frame holds its full size, connections over
the bound are muted until memory is released. A plain HTTP request or a TLS handshake on the
Kafka port is named as such (and HTTP gets a 400 saying what the port is).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from brokers.server.connection import Connection
from brokers.server.context import RequestContext
from brokers.server.dispatcher import Dispatcher
from brokers.server.listener import Listener
from brokers.server.metrics import ServerMetrics
from brokers.server.routes import Route, RouteTable
from tests.polling import wait_until_async

pytestmark = pytest.mark.unit
IDLE_MS = 1_000


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def api_versions_v0(correlation_id: int) -> bytes:
    """A whole ApiVersions v0 request frame (header v1, client id "test", empty body)."""
    payload = struct.pack(">hhih", 18, 0, correlation_id, 4) + b"test"
    return struct.pack(">i", len(payload)) + payload


class Broker:
    """A listener (never bound) whose ApiVersions handler waits for `gate` when it is closed."""

    def __init__(self, *, queued_max_request_bytes: int = -1) -> None:
        self.clock = FakeClock()
        self.gate = asyncio.Event()
        self.gate.set()
        self.registry = CollectorRegistry()
        table = RouteTable()
        table.add(Route(18, 0, 3, self._answer))
        self.listener = Listener(
            Dispatcher(table),
            "127.0.0.1",
            0,
            metrics=ServerMetrics(self.registry),
            connections_max_idle_ms=IDLE_MS,
            queued_max_request_bytes=queued_max_request_bytes,
            clock=self.clock,
        )

    async def _answer(self, ctx: RequestContext, request: Any) -> bytes:
        await self.gate.wait()
        return b"served"

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, Connection]:
        ours, theirs = socket.socketpair()
        before = set(self.listener.connections)
        self.listener.adopt(ours)
        reader, writer = await asyncio.open_connection(sock=theirs)

        async def adopted() -> set[Connection]:
            return self.listener.connections - before

        (connection,) = await wait_until_async(adopted, what="connection adopted", timeout=5)
        return reader, writer, connection

    def metric(self, name: str) -> float:
        return self.registry.get_sample_value(name) or 0.0


@asynccontextmanager
async def running(**options: Any) -> AsyncIterator[Broker]:
    broker = Broker(**options)
    try:
        yield broker
    finally:
        await broker.listener.stop()


async def response_of(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 5))
    return await asyncio.wait_for(reader.readexactly(size), 5)


async def closed_by_broker(reader: asyncio.StreamReader) -> bool:
    return await asyncio.wait_for(reader.read(65536), 5) == b""


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(scenario())  # type: ignore[arg-type]


def test_a_silent_connection_is_closed_after_connections_max_idle_ms() -> None:
    async def scenario() -> None:
        async with running() as broker:
            reader, _writer, _ = await broker.connect()
            broker.clock.now += IDLE_MS / 1000 * 0.9
            assert broker.listener.close_idle_connections() == 0, "closed before the limit"
            broker.clock.now += IDLE_MS / 1000 * 0.2
            assert broker.listener.close_idle_connections() == 1
            assert await closed_by_broker(reader)
            assert broker.metric("kafka_network_idle_connections_closed_total") == 1

    run(scenario)


def test_a_connection_that_answers_requests_is_not_idle() -> None:
    async def scenario() -> None:
        async with running() as broker:
            reader, writer, _ = await broker.connect()
            for correlation_id in range(3):
                broker.clock.now += IDLE_MS / 1000 * 0.9
                writer.write(api_versions_v0(correlation_id))
                assert (await response_of(reader)).endswith(b"served")
                assert broker.listener.close_idle_connections() == 0

    run(scenario)


def test_a_stalled_partial_frame_holds_its_full_size_until_closed_for_idleness(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> None:
        async with running(queued_max_request_bytes=10_000_000) as broker:
            memory = broker.listener.memory
            reader, writer, _ = await broker.connect()
            writer.write(struct.pack(">i", 5_000_000) + b"x" * 1000)  # then nothing more

            async def held() -> bool:
                return memory.used == 5_000_000

            await wait_until_async(held, what="the frame's full size allocated", timeout=5)
            broker.clock.now += IDLE_MS / 1000 + 0.1
            with caplog.at_level(logging.INFO, logger="pier.server"):
                assert broker.listener.close_idle_connections() == 1
            assert await closed_by_broker(reader)

            async def released() -> bool:
                return memory.used == 0

            await wait_until_async(released, what="the stalled frame's memory released", timeout=5)
        assert "a 5000000-byte request stalled after 1000 bytes" in caplog.text

    run(scenario)


def test_progress_keeps_a_slowly_sent_frame_alive() -> None:
    async def scenario() -> None:
        async with running() as broker:
            reader, writer, connection = await broker.connect()
            frame = api_versions_v0(7)  # a 4-byte size, then 14 bytes sent one at a time
            writer.write(frame[:5])
            for sent in range(5, len(frame) - 1):
                broker.clock.now += IDLE_MS / 1000 * 0.9
                writer.write(frame[sent : sent + 1])

                async def arrived(body_bytes: int = sent - 3) -> bool:
                    return connection.frame_progress[0] == body_bytes

                await wait_until_async(arrived, what=f"byte {sent} read", timeout=5)
                assert broker.listener.close_idle_connections() == 0
            writer.write(frame[-1:])
            assert (await response_of(reader)).endswith(b"served")

    run(scenario)


def test_connections_over_queued_max_request_bytes_are_muted_until_memory_is_released() -> None:
    async def scenario() -> None:
        async with running(queued_max_request_bytes=20) as broker:  # frames are 14 bytes
            memory = broker.listener.memory
            broker.gate.clear()  # requests stay in processing: their memory stays allocated
            first, second, third = [await broker.connect() for _ in range(3)]
            first[1].write(api_versions_v0(1))
            second[1].write(api_versions_v0(2))  # 6 bytes left: granted, the pool dips below 0

            async def both_held() -> bool:
                return memory.used == 28

            await wait_until_async(both_held, what="two frames in processing", timeout=5)
            third[1].write(api_versions_v0(3))

            async def muted() -> bool:
                return third[2].muted and memory.waiting == 1

            await wait_until_async(muted, what="the third connection muted", timeout=5)
            broker.clock.now += IDLE_MS / 1000 * 2
            assert broker.listener.close_idle_connections() == 0, "muted is not idle"
            broker.gate.set()
            for reader, _, _ in (first, second, third):
                assert (await response_of(reader)).endswith(b"served")
            assert memory.used == 0 and not third[2].muted

    run(scenario)


def test_a_request_larger_than_the_whole_bound_is_still_served() -> None:
    async def scenario() -> None:
        async with running(queued_max_request_bytes=8) as broker:
            reader, writer, _ = await broker.connect()
            writer.write(api_versions_v0(1))
            assert (await response_of(reader)).endswith(b"served")

    run(scenario)


def test_an_http_request_gets_a_400_saying_this_is_the_kafka_port() -> None:
    async def scenario() -> None:
        async with running() as broker:
            reader, writer, _ = await broker.connect()
            writer.write(b"GET /v1/topics HTTP/1.1\r\nHost: localhost\r\n\r\n")
            answer = await asyncio.wait_for(reader.read(65536), 5)
            assert await closed_by_broker(reader)
            assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n"), answer
            assert b"Kafka protocol port; HTTP requests are not served here" in answer, answer
            assert b"frame size" not in answer
            assert broker.metric("kafka_network_malformed_requests_total") == 1

    run(scenario)


def test_a_tls_handshake_is_named_in_the_log(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        async with running() as broker:
            reader, writer, _ = await broker.connect()
            with caplog.at_level(logging.INFO, logger="pier.server"):
                writer.write(bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01]) + b"\x00" * 64)
                assert await closed_by_broker(reader)

    run(scenario)
    assert "a TLS handshake arrived on a plaintext Kafka protocol port" in caplog.text
    assert "frame size" not in caplog.text
