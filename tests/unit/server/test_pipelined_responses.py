"""Answers to a pipelined run of requests leave in one write, in order, and never wait on a
request that parks.

A client with several requests in flight (an idempotent producer keeps up to five, a consumer
its fetches and asynchronous commits) often has more than one whole request buffered when a
starved event loop gets the CPU back. `Connection` then holds a bytes answer back while the next
request is already buffered in full and writes the run's answers together after the last one.
Real sockets (a socketpair) and a real event loop; the dispatcher echoes each request.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from brokers.server.connection import Connection
from brokers.server.dispatcher import Peer, Reply
from brokers.wire.framing import FrameLimits

pytestmark = pytest.mark.unit


class Echo:
    """Answers each request with its own bytes; a request `park` waits until `release` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.parked = asyncio.Event()
        self.correlation = 0

    async def dispatch(self, frame: memoryview, peer: Peer) -> Reply | None:
        self.correlation += 1
        if bytes(frame) == b"park-request":
            self.parked.set()
            await self.release.wait()
        return Reply(self.correlation, False, bytes(frame))


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


async def _connection(
    echo: Echo,
) -> tuple[Any, asyncio.StreamReader, asyncio.StreamWriter, list[int]]:
    ours, theirs = socket.socketpair()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=256 * 1024)
    protocol = asyncio.StreamReaderProtocol(reader)
    transport, _ = await loop.connect_accepted_socket(lambda: protocol, ours)
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    writes: list[int] = []  # bytes per write the connection made
    real_write = transport.write

    def counted(data: Any) -> None:
        writes.append(len(data))
        real_write(data)

    transport.write = counted  # type: ignore[method-assign]
    connection = Connection(reader, writer, echo, FrameLimits(), Peer("test", "c1"))  # type: ignore[arg-type]
    served = asyncio.create_task(connection.serve())
    client_reader, client = await asyncio.open_connection(sock=theirs)
    return served, client_reader, client, writes


async def _answers(reader: asyncio.StreamReader, count: int) -> list[bytes]:
    found = []
    for _ in range(count):
        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))[0]
        found.append((await reader.readexactly(size))[4:])  # after the correlation id
    return found


def _run(scenario: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    return asyncio.run(scenario())


def test_a_pipelined_run_is_answered_in_one_write_in_order() -> None:
    async def scenario() -> tuple[list[bytes], list[int]]:
        echo = Echo()
        served, reader, client, writes = await _connection(echo)
        requests = [f"request-{i}".encode() for i in range(5)]
        client.write(b"".join(_frame(r) for r in requests))  # all buffered at once
        answers = await _answers(reader, len(requests))
        client.close()
        await asyncio.wait_for(served, 10)
        return answers, writes

    answers, writes = _run(scenario)
    assert answers == [f"request-{i}".encode() for i in range(5)]
    assert len(writes) == 1, writes  # one write (one send, one wake-up) for the five answers


def test_an_answer_is_not_held_behind_a_request_that_parks() -> None:
    async def scenario() -> list[bytes]:
        echo = Echo()
        served, reader, client, _writes = await _connection(echo)
        client.write(_frame(b"first-request") + _frame(b"park-request"))
        first = await _answers(reader, 1)  # arrives while the second request is parked
        assert echo.parked.is_set()
        echo.release.set()
        second = await _answers(reader, 1)
        client.close()
        await asyncio.wait_for(served, 10)
        return first + second

    assert _run(scenario) == [b"first-request", b"park-request"]


def test_answers_before_a_bad_frame_still_go_out() -> None:
    async def scenario() -> tuple[list[bytes], bytes]:
        echo = Echo()
        served, reader, client, _writes = await _connection(echo)
        client.write(_frame(b"good-request") + struct.pack(">i", -5) + b"junk")
        answers = await _answers(reader, 1)
        rest = await asyncio.wait_for(reader.read(), 10)  # then the broker closes the connection
        await asyncio.wait_for(served, 10)
        client.close()
        return answers, rest

    answers, rest = _run(scenario)
    assert answers == [b"good-request"] and rest == b""
