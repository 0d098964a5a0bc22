"""Controller channel over real sockets: per-broker order, retry on a new connection, removal."""

from __future__ import annotations

import asyncio
import struct
import sys
from typing import Any

import pytest

from brokers.controller import requests as rq
from brokers.controller.channel import ControllerChannel
from brokers.wire.headers import parse_request_header
from tests.polling import wait_until_async

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def update_metadata(epoch: int) -> rq.UpdateMetadataRequest:
    return rq.UpdateMetadataRequest(
        controller_id=1, controller_epoch=epoch, broker_epoch=7, topic_states=(), live_brokers=()
    )


class FakeBroker:
    """Decodes framed control requests and answers each with error 0; can drop connections."""

    def __init__(self, drop_first: int = 0) -> None:
        self.received: list[Any] = []
        self.drop_first = drop_first
        self.server: asyncio.Server | None = None

    async def start(self) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = memoryview(await reader.readexactly(size))
                if self.drop_first > 0:
                    self.drop_first -= 1
                    writer.close()
                    return
                header, offset = parse_request_header(frame, flexible=True)
                request = rq.decode(rq.REQUESTS[header.api_key], frame, offset)
                self.received.append(request)
                body = rq.encode(rq.RESPONSES[header.api_key](error_code=0))
                reply = struct.pack(">i", header.correlation_id) + b"\x00" + body
                writer.write(struct.pack(">i", len(reply)) + reply)
                await writer.drain()
        except asyncio.IncompleteReadError:
            writer.close()

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


def test_requests_reach_the_broker_in_order_and_answers_come_back() -> None:
    async def scenario() -> None:
        broker = FakeBroker()
        port = await broker.start()
        channel = ControllerChannel(retry_backoff_s=0.01)
        answers: list[tuple[int, int]] = []
        channel.add_broker(2, "127.0.0.1", port)
        for epoch in range(1, 6):
            channel.send(2, update_metadata(epoch), lambda b, r: answers.append((b, r.error_code)))

        async def all_answered() -> bool:
            return len(answers) == 5

        await wait_until_async(all_answered, what="five answers", timeout=5)
        assert [r.controller_epoch for r in broker.received] == [1, 2, 3, 4, 5]
        assert answers == [(2, 0)] * 5
        await channel.close()
        await broker.stop()

    asyncio.run(scenario())


def test_a_dropped_connection_is_retried_on_a_new_one() -> None:
    async def scenario() -> None:
        broker = FakeBroker(drop_first=2)
        port = await broker.start()
        channel = ControllerChannel(retry_backoff_s=0.01)
        channel.add_broker(3, "127.0.0.1", port)
        done: list[int] = []
        channel.send(3, update_metadata(9), lambda b, r: done.append(b))

        async def answered() -> bool:
            return done == [3]

        await wait_until_async(answered, what="the answer on the new connection", timeout=5)
        assert [r.controller_epoch for r in broker.received] == [9]
        await channel.close()
        await broker.stop()

    asyncio.run(scenario())


def test_a_removed_broker_is_no_longer_retried_and_sends_to_it_are_refused() -> None:
    async def scenario() -> None:
        attempts: list[int] = []

        async def refuse(host: str, port: int) -> Any:
            attempts.append(port)
            raise ConnectionRefusedError("down")

        channel = ControllerChannel(retry_backoff_s=0.01, connect=refuse)
        channel.add_broker(4, "127.0.0.1", 1)
        assert channel.send(4, update_metadata(1))

        async def retried() -> bool:
            return len(attempts) >= 3

        await wait_until_async(retried, what="three connection attempts", timeout=5)
        await channel.remove_broker(4)
        seen = len(attempts)
        await asyncio.sleep(0.05)  # a removed broker's sender must stay silent; nothing to poll
        assert len(attempts) == seen
        assert not channel.send(4, update_metadata(2))
        assert channel.brokers == set()

    asyncio.run(scenario())


def test_a_delivered_request_is_not_kept_while_the_sender_idles() -> None:
    """Issue 25: the sender held its last request (an UpdateMetadata for thousands of new
    partitions, megabytes of objects) until the next one came."""

    async def scenario() -> None:
        broker = FakeBroker()
        port = await broker.start()
        channel = ControllerChannel(retry_backoff_s=0.01)
        channel.add_broker(2, "127.0.0.1", port)
        request = update_metadata(1)
        alone = sys.getrefcount(request)
        answers: list[int] = []
        channel.send(2, request, lambda b, r: answers.append(r.error_code))

        async def released() -> bool:
            return answers == [0] and sys.getrefcount(request) == alone

        await wait_until_async(released, what="the answered request released", timeout=5)
        await channel.close()
        await broker.stop()

    asyncio.run(scenario())
