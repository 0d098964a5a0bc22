"""The writer thread (`answer_writer`) bounds what a connection queues, and never hangs or leaks.

A client that does not read its answers holds its connection at `_WRITE_HIGH_WATER` of queued
answers: the connection reads no further request (and so runs no further handler) until the
client reads, and then every answer arrives, in order. A client that leaves with answers queued,
and a connection the idle check closes while its client does not read, end the connection and
close the writer's descriptor. A file region larger than the socket takes arrives whole and in
order between bytes answers (sendfile resumed after EAGAIN). Real sockets (a socketpair), a real
file, a real event loop and the real writer thread; the dispatcher echoes each request.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Iterator

import pytest

from brokers.server.answer_writer import AnswerWriter
from brokers.server.connection import _WRITE_HIGH_WATER, Connection
from tests.polling import wait_until_async
from tests.unit.server.echo_connection import Echo, Served, frame, numbered, serve

pytestmark = pytest.mark.unit

ANSWER = 256 * 1024
REQUESTS = 40  # 10 MiB of answers: over twice the high water
FILE_BYTES = 4 * 1024 * 1024


@pytest.fixture
def writer() -> Iterator[AnswerWriter]:
    answers = AnswerWriter()
    yield answers
    answers.stop()


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


async def _fds_back(before: int) -> int:
    """Descriptors open beyond `before` once the transports' closing callbacks ran (0 when
    nothing leaked; a leak fails the poll, which names the count)."""

    async def extra() -> bool:
        return _open_fds() == before

    await wait_until_async(extra, what=f"open descriptors back to {before}", timeout=10)
    return _open_fds() - before


async def _held_client(writer: AnswerWriter) -> tuple[Echo, Served]:
    """A connection whose client sent every request and read nothing, once it is held."""
    echo = Echo()
    served = await serve(echo, writer)
    served.client.write(b"".join(frame(r) for r in _requests()))
    await wait_until_async(lambda: _held(served.connection), what="connection held", timeout=10)
    return echo, served


async def _held(connection: Connection) -> bool:
    outbox = connection._outbox
    return outbox is not None and outbox.held


def _requests() -> list[bytes]:
    return [bytes([i]) * ANSWER for i in range(REQUESTS)]


def test_a_client_that_does_not_read_holds_its_connection_at_the_bound(
    writer: AnswerWriter,
) -> None:
    async def scenario() -> tuple[int, int, list[tuple[int, bytes]]]:
        echo, served = await _held_client(writer)
        dispatched = echo.correlation
        assert served.connection._outbox is not None
        pending = served.connection._outbox.pending
        answers = await numbered(served.reader, REQUESTS)  # now the client reads: all come
        served.client.close()
        await asyncio.wait_for(served.task, 10)
        return dispatched, pending, answers

    dispatched, pending, answers = asyncio.run(scenario())
    one = ANSWER + 8
    assert pending <= _WRITE_HIGH_WATER + one
    assert dispatched < REQUESTS  # no request read beyond the bound
    assert answers == [(i + 1, r) for i, r in enumerate(_requests())]


def test_a_client_that_leaves_with_answers_queued_ends_the_connection(
    writer: AnswerWriter,
) -> None:
    async def scenario() -> int:
        before = _open_fds()
        _echo, served = await _held_client(writer)
        served.client.transport.abort()  # the client leaves without reading
        await asyncio.wait_for(served.task, 10)
        return await _fds_back(before)

    assert asyncio.run(scenario()) == 0  # both socket ends and the writer's dup closed


def test_closing_a_connection_whose_client_does_not_read_drops_its_answers(
    writer: AnswerWriter,
) -> None:
    async def scenario() -> int:
        before = _open_fds()
        _echo, served = await _held_client(writer)
        served.connection.close()  # the listener's idle check
        await asyncio.wait_for(served.task, 10)  # not waiting for the client to read
        served.client.close()
        return await _fds_back(before)

    assert asyncio.run(scenario()) == 0


def test_a_file_region_larger_than_the_socket_takes_arrives_whole_and_in_order(
    writer: AnswerWriter,
) -> None:
    content = os.urandom(FILE_BYTES)
    with tempfile.TemporaryFile() as file:
        file.write(content)
        file.flush()

        async def scenario() -> list[tuple[int, bytes]]:
            served = await serve(Echo(file.fileno(), FILE_BYTES), writer)
            requests = [b"first-request", b"file-request", b"last-request"]
            served.client.write(b"".join(frame(r) for r in requests))
            answers = await numbered(served.reader, len(requests))
            served.client.close()
            await asyncio.wait_for(served.task, 10)
            return answers

        answers = asyncio.run(scenario())
    assert [c for c, _body in answers] == [1, 2, 3]
    assert answers[0][1] == b"first-request"
    assert answers[1][1] == content
    assert answers[2][1] == b"last-request"
