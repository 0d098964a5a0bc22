"""Review of s35 (H5): a queued fetch region is let go once the broker closes the connection.

A fetch region now holds its segment file open (file_records' `FileHandle`) for as long as an
answer holding it waits, so every way a connection ends must drop its queued answers, or a
deleted segment's file (and the socket) stays open for the life of the broker. Here the client
asks for an answer it does not read (the socket fills), then a file region of a segment that is
deleted meanwhile, and then ends its side of the conversation without reading: it shuts its
writing half (EOF), or sends an HTTP request (the broker's 400 path). The broker's idle check
then closes the connection (`Connection.close`, as `Listener.close_idle_connections` does once
connections.max.idle.ms passed) while the client still holds its socket open. The connection
must end and the region's file must close. Also: a region already sent is let go while the
connection waits for the next request, and after an HTTP request without waiting for the
collector; and a connection whose client sent EOF without reading its answers is still closed by
the idle check (its socket is not kept forever). Real files, a real `Connection` (and
`Listener`) on a real socketpair, real loops and the real writer thread.
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from brokers.log.file_records import FileRecords
from brokers.server.answer_writer import AnswerWriter
from brokers.server.listener import Listener
from tests.polling import wait_until_async
from tests.unit.log.partition_helpers import held_by_process
from tests.unit.server.echo_connection import (
    SERVE_END_S,
    Echo,
    Served,
    frame,
    read_to_eof,
    run_on,
    serve,
)
from tests.unit.server.test_connection_limits import FakeClock

pytestmark = pytest.mark.unit

FILL = 3 * 1024 * 1024  # an answer the client does not read: the socket fills, the region waits
REGION = 256 * 1024  # sent with sendfile on every path
RELEASE_S = 2.0  # how long the broker may take to let go once it closed the connection


CASES = [
    pytest.param(
        "thread",
        ending,
        id=f"thread-{ending}",
    )
    for ending in ("eof", "http")
] + [
    pytest.param(path, ending, id=f"{path}-{ending}")
    for path in ("asyncio", "uvloop")
    for ending in ("eof", "http")
]


def _segment(directory: Path, content: bytes) -> FileRecords:
    records = FileRecords.open(directory / "mine.log", create=True)
    records.append([content])
    return records


@pytest.mark.parametrize(("path", "ending"), CASES)
def test_closing_an_ended_connection_lets_go_of_its_queued_region(
    tmp_path: Path, path: str, ending: str
) -> None:
    async def scenario(writer: AnswerWriter | None) -> bool:
        segment = _segment(tmp_path, os.urandom(REGION))
        echo = Echo(region=segment.region(0, REGION), fill_bytes=FILL)
        served = await serve(echo, writer)
        try:
            served.client.write(frame(b"fill-request") + frame(b"file-request"))
            if ending == "eof":
                served.client.write_eof()
            else:
                served.client.write(b"GET / HTTP/1.1\r\nHost: pier\r\n\r\n")
            await wait_until_async(_ended(path, served, echo), what="client's side ended")
            segment.delete()  # file.delete.delay.ms passed while the answer waited
            served.connection.close()  # the idle check: the client reads nothing

            async def released() -> bool:
                return served.task.done() and not held_by_process(tmp_path / "mine.log")

            await wait_until_async(
                released, what="connection ended, file closed", timeout=RELEASE_S
            )
            return True
        finally:
            served.client.close()  # the client leaves: whatever waited on it ends now
            await asyncio.wait_for(asyncio.gather(served.task, return_exceptions=True), SERVE_END_S)

    assert run_on(path, scenario)
    assert not held_by_process(tmp_path / "mine.log")


def _ended(path: str, served: Served, echo: Echo) -> Callable[[], Awaitable[bool]]:
    """Whether the region is answered and, on the writer thread, the connection reached its end
    (its outbox handed to `_end_answers`, waiting for the client to read)."""

    async def check() -> bool:
        ending = path != "thread" or served.connection._outbox is None
        return echo.file_answered.is_set() and ending

    return check


IDLE_PATHS = ("thread", "asyncio", "uvloop")


@pytest.mark.parametrize("path", IDLE_PATHS)
def test_a_sent_region_is_let_go_while_the_connection_waits_for_the_next_request(
    tmp_path: Path, path: str
) -> None:
    async def scenario(writer: AnswerWriter | None) -> bool:
        content = os.urandom(REGION)
        segment = _segment(tmp_path, content)
        echo = Echo(region=segment.region(0, REGION))
        served = await serve(echo, writer)
        try:
            served.client.write(frame(b"file-request"))
            answer = await asyncio.wait_for(served.reader.readexactly(8 + REGION), SERVE_END_S)
            assert answer[8:] == content  # sent whole: the connection needs the region no more
            segment.delete()  # file.delete.delay.ms passed; the client stays, sending nothing

            async def closed() -> bool:
                return not held_by_process(tmp_path / "mine.log")

            await wait_until_async(closed, what="deleted file closed", timeout=RELEASE_S)
            return True
        finally:
            served.client.close()
            await asyncio.wait_for(asyncio.gather(served.task, return_exceptions=True), SERVE_END_S)

    assert run_on(path, scenario)


def test_a_region_sent_before_an_http_request_is_let_go_when_the_connection_ends(
    tmp_path: Path,
) -> None:
    async def scenario(writer: AnswerWriter | None) -> bytes:
        segment = _segment(tmp_path, os.urandom(REGION))
        echo = Echo(region=segment.region(0, REGION))
        served = await serve(echo, writer)
        data = frame(b"file-request") + b"GET / HTTP/1.1\r\nHost: pier\r\n\r\n"
        received = await read_to_eof(served, data, SERVE_END_S)
        segment.delete()
        return received

    collecting = gc.isenabled()
    gc.disable()  # the collector would break the cycle at a time of its own: reference counting only
    try:
        received: bytes = run_on("asyncio", scenario)
        held = held_by_process(tmp_path / "mine.log")
    finally:
        if collecting:
            gc.enable()
    assert b"HTTP/1.1 400 Bad Request\r\n" in received[8 + REGION :]
    assert not held


UNREAD_PATHS = ("asyncio", "uvloop")
IDLE_MS = 1_000


@pytest.mark.parametrize("path", UNREAD_PATHS)
def test_the_idle_check_closes_a_connection_whose_client_stopped_reading_and_sent_eof(
    path: str,
) -> None:
    async def scenario(_writer: AnswerWriter | None) -> bool:
        clock = FakeClock()
        dispatcher: Any = Echo(fill_bytes=FILL)  # an answer below the 4 MiB backpressure mark
        listener = Listener(
            dispatcher, "127.0.0.1", 0, connections_max_idle_ms=IDLE_MS, clock=clock
        )
        ours, theirs = socket.socketpair()
        listener.adopt(ours)
        _reader, client = await asyncio.open_connection(sock=theirs)
        try:
            client.write(frame(b"fill-request"))
            client.write_eof()  # done asking; it never reads the answer

            async def served_out() -> bool:  # its requests served; the answer waits to leave
                return bool(listener.connections) and all(c.ending for c in listener.connections)

            await wait_until_async(served_out, what="the connection's requests served")
            clock.now += 2 * IDLE_MS / 1000  # connections.max.idle.ms passed
            listener.close_idle_connections()

            async def socket_closed() -> bool:
                return ours.fileno() == -1

            await wait_until_async(socket_closed, what="broker's socket closed", timeout=RELEASE_S)
            return True
        finally:
            client.close()
            await listener.stop()

    assert run_on(path, scenario)
