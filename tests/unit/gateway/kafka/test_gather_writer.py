"""`gateway.kafka.gather_writer` on real sockets: requests the socket cannot take at once wait as
views of their own buffers (never copied) and go out in order; a failed socket fails the writer
once; `close` stops it."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator

import pytest

from gateway.kafka.gather_writer import GatherWriter

MiB = 1024 * 1024


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


Pair = tuple[socket.socket, socket.socket]


@pytest.fixture
def pair() -> Iterator[Pair]:
    """A connected pair of small-buffered non-blocking sockets, both closed after the test."""
    ours, theirs = socket.socketpair()
    try:
        yield _small(ours, theirs)
    finally:
        ours.close()
        theirs.close()


def _small(ours: socket.socket, theirs: socket.socket) -> Pair:
    """`ours` sends and `theirs` receives through 64 KiB buffers, without blocking."""
    ours.setblocking(False)
    theirs.setblocking(False)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 * 1024)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
    return ours, theirs


async def _read(sock: socket.socket, count: int) -> bytes:
    loop = asyncio.get_running_loop()
    received = bytearray()
    async with asyncio.timeout(30):
        while len(received) < count:
            received += await loop.sock_recv(sock, min(count - len(received), 256 * 1024))
    return bytes(received)


def test_what_the_socket_does_not_take_waits_as_views_and_goes_out_in_order(
    loop: asyncio.AbstractEventLoop, pair: Pair
) -> None:
    ours, theirs = pair
    errors: list[OSError] = []
    records = [bytearray(bytes([n]) * MiB) for n in (1, 2, 3)]

    async def run() -> bytes:
        writer = GatherWriter(asyncio.get_running_loop(), ours.fileno(), errors.append)
        for n, record in enumerate(records):
            writer.write([b"head%d" % n, memoryview(record)])
        assert writer.waiting_bytes > MiB  # the socket took a fraction: the rest waits
        # The records still waiting are the client's buffers themselves, not copies: a change
        # made now is what reaches the socket.
        records[2][-1] = 0xEE
        received = await _read(theirs, 3 * (5 + MiB))
        assert writer.waiting_bytes == 0
        writer.close()
        return received

    received = loop.run_until_complete(run())
    expected = b"".join(b"head%d" % n + bytes(r) for n, r in enumerate(records))
    assert received == expected and received[-1] == 0xEE
    assert errors == []


def test_it_writes_to_a_socket_an_asyncio_transport_owns(
    loop: asyncio.AbstractEventLoop, pair: Pair
) -> None:
    """The upstream socket is a transport's: the loop refuses to watch that descriptor itself."""
    ours, theirs = pair

    async def run() -> bytes:
        event_loop = asyncio.get_running_loop()
        transport, _ = await event_loop.connect_accepted_socket(asyncio.Protocol, ours)
        writer = GatherWriter(event_loop, ours.fileno(), lambda exc: None)
        writer.write([bytes(range(256)) * (8 * 1024)])  # 2 MiB: more than the socket takes
        received = await _read(theirs, 2 * MiB)
        writer.close()
        transport.close()
        return received

    received = loop.run_until_complete(run())
    assert received == bytes(range(256)) * (8 * 1024)


def test_a_socket_that_fails_fails_the_writer_once_and_nothing_more_is_written(
    loop: asyncio.AbstractEventLoop, pair: Pair
) -> None:
    ours, theirs = pair
    errors: list[OSError] = []

    async def run() -> GatherWriter:
        failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_error(exc: OSError) -> None:
            errors.append(exc)
            if not failed.done():
                failed.set_result(None)

        writer = GatherWriter(asyncio.get_running_loop(), ours.fileno(), on_error)
        writer.write([bytes(4 * MiB)])  # more than the socket takes: the rest waits
        assert writer.waiting_bytes > 0
        theirs.close()  # the peer goes away with bytes unread: the next write fails
        await asyncio.wait_for(failed, 10)
        writer.write([b"after"])
        return writer

    writer = loop.run_until_complete(run())
    assert len(errors) == 1 and isinstance(errors[0], OSError)
    assert writer.waiting_bytes == 0


def test_close_drops_what_waits_and_stops_watching_the_socket(
    loop: asyncio.AbstractEventLoop, pair: Pair
) -> None:
    ours, _theirs = pair

    async def run() -> None:
        event_loop = asyncio.get_running_loop()
        writer = GatherWriter(event_loop, ours.fileno(), lambda exc: None)
        writer.write([bytes(4 * MiB)])
        assert writer.waiting_bytes > 0
        writer.close()
        assert writer.waiting_bytes == 0
        writer.write([b"ignored"])
        assert writer.waiting_bytes == 0
        writer.close()  # twice: nothing more

    loop.run_until_complete(run())


def test_the_backlog_written_out_calls_on_drained_once(
    loop: asyncio.AbstractEventLoop, pair: Pair
) -> None:
    """What lets a session held for MAX_UNSENT_BYTES (an acks=0 producer's requests waiting on a
    broker that stopped reading) take requests again."""
    ours, theirs = pair
    drained: list[int] = []

    async def run() -> bytes:
        event_loop = asyncio.get_running_loop()
        written_out = asyncio.Event()

        def on_drained() -> None:
            drained.append(1)
            written_out.set()

        writer = GatherWriter(event_loop, ours.fileno(), lambda exc: None, on_drained)
        writer.write([b"small"])  # taken at once: nothing waited, nothing to report
        assert drained == [] and writer.waiting_bytes == 0
        writer.write([bytes(4 * MiB)])
        assert writer.waiting_bytes > 0 and drained == []
        received = await _read(theirs, 5 + 4 * MiB)
        await asyncio.wait_for(written_out.wait(), 10)  # may follow the last read
        assert writer.waiting_bytes == 0
        writer.close()
        return received

    received = loop.run_until_complete(run())
    assert len(received) == 5 + 4 * MiB
    assert drained == [1]
