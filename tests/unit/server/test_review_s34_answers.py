"""Review of session 34's answer paths (brokers/server/answer_writer.py, transport_sendfile.py,
connection.py): what a connection does when a fetch region goes wrong, on every path.

Each case runs a real `Connection` on a real socketpair (tests/unit/server/echo_connection.py), a
real file or directory, and the real writer thread (`thread`) or the transport on each real loop
(`asyncio`, `uvloop`). The expected behaviour is Kafka's: a region the broker cannot send
whole ends the connection (FileRecords.writeTo throws, the channel closes), and a connection the
broker closes (the idle check's `close`) ends even while its client does not read. Known defects
were strict xfails until fixed: a short region and a close while the client reads nothing now end
the connection on every path.
"""

from __future__ import annotations

import asyncio
import os
import select
import struct
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from brokers.server.answer_writer import AnswerWriter
from tests.polling import wait_until_async
from tests.unit.server.echo_connection import Echo, Served, frame, read_to_eof, run_on, serve

pytestmark = pytest.mark.unit

FINISH_S = 30.0  # what a passing case may take under load (bounds a hang only)
REQUESTS = (b"first-request", b"file-request", b"last-request")


def _answers_to_eof(path: str, fd: int, size: int, bound: float) -> bytes:
    """What the client receives for `REQUESTS` (a region of `size` bytes of `fd` second) until
    the broker closes the connection; TimeoutError after `bound` seconds if it never does."""

    async def scenario(writer: AnswerWriter | None) -> bytes:
        served = await serve(Echo(fd, size), writer)
        return await read_to_eof(served, b"".join(frame(r) for r in REQUESTS), bound)

    result: bytes = run_on(path, scenario)
    return result


@pytest.fixture
def directory_fd() -> Iterator[int]:
    """A descriptor `pread` and `sendfile` refuse (EISDIR / EINVAL): a region that cannot be read,
    as a segment's descriptor after a disk error (EIO) or a close (EBADF)."""
    with tempfile.TemporaryDirectory() as folder:
        fd = os.open(folder, os.O_RDONLY)
        try:
            yield fd
        finally:
            os.close(fd)


@pytest.mark.parametrize(
    ("path", "bound"),
    [
        ("asyncio", FINISH_S),
        ("thread", FINISH_S),  # H4: _fail closes the connection (Outbox on_failed)
    ],
)
def test_a_region_that_cannot_be_read_ends_the_connection(
    directory_fd: int, path: str, bound: float
) -> None:
    """The answer before it arrives whole; then the broker closes the connection (no answer to
    the request after it can come, and the client must not wait for one)."""

    received = _answers_to_eof(path, directory_fd, 100, bound)
    first = struct.pack(">ii", 4 + len(REQUESTS[0]), 1) + REQUESTS[0]
    assert received.startswith(first)


def _stalled(served: Served) -> Callable[[], Any]:
    server = served.transport.get_extra_info("socket")

    async def full() -> bool:  # the client reads nothing: the broker's socket fills up
        _readable, writable, _errors = select.select([], [server], [], 0)
        return not writable

    return full


@pytest.mark.parametrize(
    ("path", "bound"),
    [
        ("thread", FINISH_S),
        ("asyncio", FINISH_S),  # fixed: transport_sendfile races the send against close()
        ("uvloop", FINISH_S),
    ],
)
def test_closing_a_connection_whose_client_does_not_read_a_region_ends_it(
    path: str, bound: float
) -> None:
    """The idle check's `close` while a 4 MiB region waits for a client that reads nothing:
    `serve` ends (and with it the connection's descriptors), as it does for bytes answers."""
    content = os.urandom(4 * 1024 * 1024)
    with tempfile.TemporaryFile() as file:
        file.write(content)
        file.flush()

        async def scenario(writer: AnswerWriter | None) -> None:
            served = await serve(Echo(file.fileno(), len(content)), writer)
            try:
                served.client.write(frame(b"file-request"))
                await wait_until_async(
                    _stalled(served), what="broker socket full", timeout=FINISH_S
                )
                served.connection.close()
                await asyncio.wait_for(asyncio.shield(served.task), bound)
            finally:
                served.client.close()

        run_on(path, scenario)


@pytest.mark.parametrize(
    ("path", "bound"),
    [
        ("thread", FINISH_S),  # H4: the writer thread ends the connection on a region cut short
        ("asyncio", FINISH_S),
        ("uvloop", FINISH_S),
    ],
)
def test_a_region_past_the_end_of_its_file_ends_the_connection(path: str, bound: float) -> None:
    """A fetch region whose file was truncated under it (a follower's truncation, a leader's
    after an unclean election) cannot be sent whole: the broker closes the connection rather
    than let the next answer's bytes stand in for the missing ones."""
    with tempfile.TemporaryFile() as file:
        file.write(b"x" * 1000)
        file.flush()
        received = _answers_to_eof(path, file.fileno(), 200_000, bound)
    # no complete answer follows the short one: what arrived ends inside the announced size
    first = 4 + 4 + len(REQUESTS[0])
    announced = struct.unpack(">i", received[first : first + 4])[0]
    assert len(received) <= first + 4 + announced
    assert REQUESTS[2] not in received[first:]


@pytest.mark.parametrize(
    ("path", "bound"),
    [
        ("thread", FINISH_S),  # the outbox's abort drops the answers (H4's test_answer_writer too)
        ("asyncio", FINISH_S),
        ("uvloop", FINISH_S),
    ],
)
def test_closing_a_connection_whose_client_does_not_read_its_answers_ends_it(
    path: str, bound: float
) -> None:
    """The idle check's `close` while over 4 MiB of bytes answers wait for a client that reads
    nothing: `serve` ends, as Kafka's selector closes such a channel at once."""
    requests = [bytes([i]) * 256 * 1024 for i in range(40)]  # 10 MiB of answers

    async def scenario(writer: AnswerWriter | None) -> None:
        served = await serve(Echo(), writer)
        try:
            served.client.write(b"".join(frame(r) for r in requests))
            await wait_until_async(_stalled(served), what="broker socket full", timeout=FINISH_S)
            served.connection.close()
            await asyncio.wait_for(asyncio.shield(served.task), bound)
        finally:
            served.transport.abort()  # what a fix does: lets a hung case's serve end too
            served.client.close()

    run_on(path, scenario)
