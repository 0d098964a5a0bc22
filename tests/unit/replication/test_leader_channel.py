"""`LeaderChannel` without sockets: a fake transport records what is written and the test
delivers the leader's bytes through the BufferedProtocol callbacks, in arbitrary pieces."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pytest

from brokers.client.errors import (
    ConnectionClosedError,
    ProtocolViolationError,
    RequestTimeoutError,
    ResponseTooLargeError,
)
from brokers.replication.leader_channel import INITIAL_BUFFER, LeaderChannel

pytestmark = pytest.mark.unit


class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.aborted = False

    def writelines(self, data: Any) -> None:
        self.written.append(b"".join(data))

    def abort(self) -> None:
        self.aborted = True


def open_channel(max_frame: int = 1 << 24) -> tuple[LeaderChannel, FakeTransport]:
    channel = LeaderChannel("leader:9092", client_id="replica-1", max_frame_bytes=max_frame)
    transport = FakeTransport()
    channel.connection_made(transport)
    return channel, transport


def deliver(channel: LeaderChannel, data: bytes, piece: int) -> None:
    """Feed `data` as the event loop would: into the buffers the protocol offers."""
    sent = 0
    while sent < len(data) and not channel.closed:
        buffer = channel.get_buffer(-1)
        size = min(len(buffer), piece, len(data) - sent)
        buffer[:size] = data[sent : sent + size]
        sent += size
        channel.buffer_updated(size)


def answer(correlation: int, body: bytes, *, flexible: bool) -> bytes:
    header = struct.pack(">i", correlation) + (b"\x00" if flexible else b"")
    return struct.pack(">i", len(header) + len(body)) + header + body


def request_correlation(written: bytes) -> int:
    return int(struct.unpack_from(">i", written, 8)[0])


async def call(channel: LeaderChannel, transport: FakeTransport, reply: Any, **kw: Any) -> Any:
    task = asyncio.create_task(channel.call(1, 12, b"BODY", flexible=True, timeout_s=5, **kw))
    await asyncio.sleep(0)  # let the request go out
    reply(request_correlation(transport.written[-1]))
    return await task


@pytest.mark.parametrize("piece", [1, 7, 1 << 20])
def test_answers_arrive_whole_in_one_reused_buffer(piece: int) -> None:
    async def scenario() -> None:
        channel, transport = open_channel()
        frames = []
        for body in (b"first answer", b"second"):
            frame, start = await call(
                channel,
                transport,
                lambda c, b=body: deliver(channel, answer(c, b, flexible=True), piece),
            )
            frames.append(frame)
            assert bytes(frame[start:]) == body
        assert frames[0].obj is frames[1].obj  # the same buffer, not a new one per answer
        header = transport.written[0][4:]
        assert struct.unpack_from(">hhih", header) == (1, 12, 1, len(b"replica-1"))
        assert header.endswith(b"replica-1\x00BODY")  # request header v2: empty tagged fields

    asyncio.run(scenario())


def test_a_frame_larger_than_the_buffer_gets_a_new_one() -> None:
    async def scenario() -> None:
        channel, transport = open_channel()
        body = bytes(INITIAL_BUFFER + 10)
        frame, start = await call(
            channel, transport, lambda c: deliver(channel, answer(c, body, flexible=True), 1 << 16)
        )
        assert len(frame) - start == len(body)

    asyncio.run(scenario())


def test_answer_to_another_request_breaks_the_channel() -> None:
    async def scenario() -> None:
        channel, transport = open_channel()
        with pytest.raises(ProtocolViolationError):
            await call(
                channel,
                transport,
                lambda c: deliver(channel, answer(c + 1, b"", flexible=True), 99),
            )
        assert channel.closed and transport.aborted
        with pytest.raises(ProtocolViolationError):
            await channel.call(1, 12, b"", flexible=True, timeout_s=1)

    asyncio.run(scenario())


def test_oversized_frame_and_lost_connection_fail_the_waiting_call() -> None:
    async def scenario() -> None:
        channel, transport = open_channel(max_frame=100)
        with pytest.raises(ResponseTooLargeError):
            await call(
                channel,
                transport,
                lambda c: deliver(channel, answer(c, bytes(200), flexible=True), 4),
            )
        channel, transport = open_channel()
        with pytest.raises(ConnectionClosedError):
            await call(channel, transport, lambda c: channel.connection_lost(None))

    asyncio.run(scenario())


def test_no_answer_in_time_closes_the_channel() -> None:
    async def scenario() -> None:
        channel, _ = open_channel()
        with pytest.raises(RequestTimeoutError):
            await channel.call(1, 12, b"", flexible=True, timeout_s=0.01)
        assert channel.closed

    asyncio.run(scenario())
