"""The controller channel's view of which registered brokers are gone (issue 13), over real sockets.

A broker killed outright keeps its ZooKeeper registration until its session expires; the channel
must tell the controller sooner, from its own connection: closed, then refused. A broker that
only closes an idle connection is not gone; a process answering at a refused broker's address is
a restarted one, not the registration the controller knows, until that re-registers. A close
that arrived while no loop turn has run yet is seen by the check every decision makes first.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from brokers.controller import requests as rq
from brokers.controller.channel import ControllerChannel
from brokers.wire.headers import parse_request_header
from tests.polling import wait_until_async

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]
BROKER = 5
T = TypeVar("T")


class ControlEndpoint:
    """A listener that answers control requests with error 0 and can drop or refuse clients."""

    def __init__(self) -> None:
        self.server: asyncio.Server | None = None
        self.writers: list[asyncio.StreamWriter] = []
        self.connections = 0
        self.answered = 0

    async def start(self, port: int = 0) -> int:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", port)
        return int(self.server.sockets[0].getsockname()[1])

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.writers.append(writer)
        try:
            while True:
                (size,) = struct.unpack(">i", await reader.readexactly(4))
                frame = memoryview(await reader.readexactly(size))
                header, _ = parse_request_header(frame, flexible=True)
                body = rq.encode(rq.RESPONSES[header.api_key](error_code=0))
                reply = struct.pack(">i", header.correlation_id) + b"\x00" + body
                writer.write(struct.pack(">i", len(reply)) + reply)
                await writer.drain()
                self.answered += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    def drop_clients(self) -> None:
        for writer in self.writers:
            writer.close()
        self.writers.clear()

    async def stop(self) -> None:
        """Stop listening and drop every client: what a killed process's sockets do."""
        assert self.server is not None
        self.server.close()
        self.drop_clients()
        await self.server.wait_closed()


def update_metadata() -> rq.UpdateMetadataRequest:
    return rq.UpdateMetadataRequest(
        controller_id=1, controller_epoch=1, broker_epoch=7, topic_states=(), live_brokers=()
    )


def test_a_killed_broker_is_unreachable_until_it_registers_again() -> None:
    async def scenario() -> None:
        broker = ControlEndpoint()
        port = await broker.start()
        channel = ControllerChannel(retry_backoff_s=0.01)
        try:
            channel.add_broker(BROKER, "127.0.0.1", port)
            await wait_until_async(
                async_value(lambda: broker.connections == 1), what="the channel connects at once"
            )
            assert channel.unreachable == set()

            await broker.stop()  # killed: connection closed, then nothing listens
            await wait_until_async(
                async_value(lambda: channel.unreachable == {BROKER}),
                what="the killed broker unreachable",
            )

            # A restarted process on the same address is not the registration the channel
            # knows: still unreachable even once a request got through to it.
            restarted = ControlEndpoint()
            await restarted.start(port)
            channel.send(BROKER, update_metadata())
            await wait_until_async(
                async_value(lambda: restarted.answered == 1), what="the request delivered"
            )
            assert channel.unreachable == {BROKER}

            # It registers again: the controller replaces its sender.
            await channel.remove_broker(BROKER)
            channel.add_broker(BROKER, "127.0.0.1", port)
            assert channel.unreachable == set()
            await wait_until_async(
                async_value(lambda: restarted.connections == 2), what="a new connection"
            )
            assert channel.unreachable == set()
            await restarted.stop()
        finally:
            await channel.close()

    asyncio.run(scenario())


def test_a_broker_closing_an_idle_connection_stays_reachable() -> None:
    async def scenario() -> None:
        broker = ControlEndpoint()
        port = await broker.start()
        channel = ControllerChannel(retry_backoff_s=0.01)
        try:
            channel.add_broker(BROKER, "127.0.0.1", port)
            await wait_until_async(
                async_value(lambda: broker.connections == 1), what="the channel connects at once"
            )
            broker.drop_clients()  # connections.max.idle.ms on the broker side
            await wait_until_async(
                async_value(lambda: broker.connections == 2), what="the channel reconnects"
            )
            assert channel.unreachable == set()
            channel.send(BROKER, update_metadata())
            await wait_until_async(
                async_value(lambda: broker.answered == 1), what="a request answered"
            )
            assert channel.unreachable == set()
            await broker.stop()
        finally:
            await channel.close()

    asyncio.run(scenario())


def test_a_close_is_noticed_before_the_loop_turns_again() -> None:
    """A ControlledShutdown read in the same loop turn as a killed broker's close: the decision's
    `notice_closed` must already leave that broker out. The broker here is a plain socket, so its
    close reaches the controller's kernel with no loop turn in between."""

    async def scenario() -> None:
        listener = socket.create_server(("127.0.0.1", 0))
        channel = ControllerChannel(retry_backoff_s=0.01)
        try:
            channel.add_broker(BROKER, "127.0.0.1", listener.getsockname()[1])
            sender = channel._senders[BROKER]
            await wait_until_async(
                async_value(lambda: sender.watching), what="the sender idle on its connection"
            )
            channel.notice_closed()
            assert channel.unreachable == set(), "an open idle connection is no suspicion"
            accepted, _ = listener.accept()  # queued in the backlog: returns at once
            accepted.close()  # the FIN is in the controller's socket now; the loop has not run
            assert sender.watching and channel.unreachable == set()
            channel.notice_closed()
            assert channel.unreachable == {BROKER}
            listener.close()  # nothing listens: the sender's own probe is refused
            await wait_until_async(async_value(lambda: sender.refused), what="the probe refused")
            assert channel.unreachable == {BROKER}
        finally:
            listener.close()
            await channel.close()

    asyncio.run(scenario())


def test_an_election_learns_of_a_kill_whose_close_has_not_arrived() -> None:
    """A killed broker's close can reach the controller after a ControlledShutdown sent later
    (the kernel delivers it asynchronously): its connection still looks open, so neither the
    watch nor `notice_closed` can tell. Its listener is gone, though: the fresh connection
    `confirm_reachable` makes before an election is refused. Here the broker's accepted
    connection stays open (the close not delivered yet) while nothing listens any more."""

    async def scenario() -> None:
        listener = socket.create_server(("127.0.0.1", 0))
        channel = ControllerChannel(retry_backoff_s=0.01)
        accepted: socket.socket | None = None
        try:
            channel.add_broker(BROKER, "127.0.0.1", listener.getsockname()[1])
            sender = channel._senders[BROKER]
            await wait_until_async(
                async_value(lambda: sender.watching), what="the sender idle on its connection"
            )
            accepted, _ = listener.accept()
            listener.close()  # the process is gone; its connection's close not yet delivered
            channel.notice_closed()
            assert channel.unreachable == set(), "the old connection cannot tell"
            await channel.confirm_reachable()
            assert channel.unreachable == {BROKER}
            assert sender.refused
        finally:
            listener.close()
            if accepted is not None:
                accepted.close()
            await channel.close()

    asyncio.run(scenario())


def test_confirming_leaves_a_listening_broker_reachable_and_does_not_wait_on_a_silent_one() -> None:
    async def scenario() -> None:
        broker = ControlEndpoint()
        port = await broker.start()
        channel = ControllerChannel(retry_backoff_s=0.01)
        try:
            channel.add_broker(BROKER, "127.0.0.1", port)
            await wait_until_async(
                async_value(lambda: broker.connections == 1), what="the channel connects at once"
            )
            await channel.confirm_reachable()
            assert channel.unreachable == set()
            await wait_until_async(
                async_value(lambda: broker.connections == 2), what="the fresh connection"
            )
            await broker.stop()
        finally:
            await channel.close()

        never = asyncio.Event()

        async def silent(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
            await never.wait()  # a host that neither accepts nor refuses
            raise AssertionError("unreachable")

        silent_channel = ControllerChannel(connect=silent)
        try:
            silent_channel.add_broker(BROKER, "10.0.0.1", 9092)
            await silent_channel.confirm_reachable(timeout_s=0.05)  # returns: nothing proven
            assert silent_channel.unreachable == set()
        finally:
            await silent_channel.close()

    asyncio.run(scenario())


def async_value(check: Callable[[], T]) -> Callable[[], Awaitable[T]]:
    """`wait_until_async` polls a coroutine function; wrap a plain check."""

    async def run() -> T:
        return check()

    return run
