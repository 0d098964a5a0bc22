"""Answers to a pipelined run of requests leave in one write, in order, and never wait on a
request that parks.

A client with several requests in flight (an idempotent producer keeps up to five, a consumer
its fetches and asynchronous commits) often has more than one whole request buffered when a
starved event loop gets the CPU back. `Connection` then holds a bytes answer back while the next
request is already buffered in full and writes the run's answers together after the last one.
A held-back answer must also leave before a later answer that goes out as parts (a file region,
sent with sendfile or read with pread), since Kafka clients match answers to requests by order,
and a run of large answers leaves in writes of at most the cap (plus the answer that crossed it).
Each scenario runs twice: answers written by the writer thread (`answer_writer`, a "write" is one
hand-over of bytes to it, `PIER_ANSWER_WRITER_THREAD=1`) and through the transport on the loop (the default).
Real sockets (a socketpair), a real file and a real event loop; the dispatcher echoes each request.
"""

from __future__ import annotations

import asyncio
import os
import struct
import tempfile
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest

from brokers.server import connection as connection_module
from brokers.server.answer_writer import AnswerWriter
from tests.unit.server.echo_connection import Echo, frame, numbered, serve

pytestmark = pytest.mark.unit

HELD_CAP = 64 * 1024  # connection._HELD_BYTES
FILE_BYTES = 128 * 1024  # above connection._SMALL_REGION: the sendfile path


class CountingWriter(AnswerWriter):
    """The writer thread, counting the bytes of each hand-over from the loop."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[int] = []

    def enqueue(self, box: Any, items: Any, size: int, *, drop: bool = False) -> None:
        if size:
            self.writes.append(size)
        super().enqueue(box, items, size, drop=drop)


@pytest.fixture(params=["thread", "loop"])
def answer_writer(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[CountingWriter | None]:
    """The writer thread the connection hands its answers to (None: the transport on the loop)."""
    if request.param == "loop":
        monkeypatch.setattr(connection_module, "_WRITER_THREAD", False)
        yield None
        return
    writer = CountingWriter()
    yield writer
    writer.stop()


async def _connection(
    echo: Echo, answers: CountingWriter | None
) -> tuple[Any, asyncio.StreamReader, asyncio.StreamWriter, list[int]]:
    served = await serve(echo, answers)
    writes: list[int] = []  # bytes per write the connection made
    real_write = served.transport.write

    def counted(data: Any) -> None:
        writes.append(len(data))
        real_write(data)

    served.transport.write = counted  # type: ignore[method-assign]
    if answers is not None:
        writes = answers.writes
    return served.task, served.reader, served.client, writes


async def _answers(reader: asyncio.StreamReader, count: int) -> list[bytes]:
    return [body for _correlation, body in await numbered(reader, count)]


def _run(scenario: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    return asyncio.run(scenario())


def test_a_pipelined_run_is_answered_in_one_write_in_order(
    answer_writer: CountingWriter | None,
) -> None:
    async def scenario() -> tuple[list[bytes], list[int]]:
        echo = Echo()
        served, reader, client, writes = await _connection(echo, answer_writer)
        requests = [f"request-{i}".encode() for i in range(5)]
        client.write(b"".join(frame(r) for r in requests))  # all buffered at once
        answers = await _answers(reader, len(requests))
        client.close()
        await asyncio.wait_for(served, 10)
        return answers, writes

    answers, writes = _run(scenario)
    assert answers == [f"request-{i}".encode() for i in range(5)]
    assert len(writes) == 1, writes  # one write (one send, one wake-up) for the five answers


def test_an_answer_is_not_held_behind_a_request_that_parks(
    answer_writer: CountingWriter | None,
) -> None:
    async def scenario() -> list[bytes]:
        echo = Echo()
        served, reader, client, _writes = await _connection(echo, answer_writer)
        client.write(frame(b"first-request") + frame(b"park-request"))
        first = await _answers(reader, 1)  # arrives while the second request is parked
        assert echo.parked.is_set()
        echo.release.set()
        second = await _answers(reader, 1)
        client.close()
        await asyncio.wait_for(served, 10)
        return first + second

    assert _run(scenario) == [b"first-request", b"park-request"]


def test_answers_before_a_bad_frame_still_go_out(answer_writer: CountingWriter | None) -> None:
    async def scenario() -> tuple[list[bytes], bytes]:
        echo = Echo()
        served, reader, client, _writes = await _connection(echo, answer_writer)
        client.write(frame(b"good-request") + struct.pack(">i", -5) + b"junk")
        answers = await _answers(reader, 1)
        rest = await asyncio.wait_for(reader.read(), 10)  # then the broker closes the connection
        await asyncio.wait_for(served, 10)
        client.close()
        return answers, rest

    answers, rest = _run(scenario)
    assert answers == [b"good-request"] and rest == b""


def test_a_held_answer_leaves_before_a_later_file_region_answer(
    answer_writer: CountingWriter | None,
) -> None:
    content = os.urandom(FILE_BYTES)
    with tempfile.TemporaryFile() as file:
        file.write(content)
        file.flush()

        async def scenario() -> list[tuple[int, bytes]]:
            echo = Echo(file.fileno(), FILE_BYTES)
            served, reader, client, _writes = await _connection(echo, answer_writer)
            requests = [b"first-request", b"file-request", b"last-request"]
            client.write(b"".join(frame(r) for r in requests))  # one pipelined run
            answers = await numbered(reader, len(requests))
            client.close()
            await asyncio.wait_for(served, 10)
            return answers

        answers = _run(scenario)
    assert [correlation for correlation, _body in answers] == [1, 2, 3]
    assert answers[0][1] == b"first-request"
    assert answers[1][1] == content
    assert answers[2][1] == b"last-request"


def test_a_run_of_large_answers_leaves_in_writes_of_at_most_the_cap(
    answer_writer: CountingWriter | None,
) -> None:
    answer_bytes = 16 * 1024
    count = 12  # 192 KiB of answers, all pipelined at once

    async def scenario() -> tuple[list[tuple[int, bytes]], list[int]]:
        echo = Echo(-1)
        served, reader, client, writes = await _connection(echo, answer_writer)
        requests = [bytes([i]) * answer_bytes for i in range(count)]
        client.write(b"".join(frame(r) for r in requests))
        answers = await numbered(reader, count)
        client.close()
        await asyncio.wait_for(served, 10)
        return answers, writes

    answers, writes = _run(scenario)
    assert [body for _c, body in answers] == [bytes([i]) * answer_bytes for i in range(count)]
    one_answer = answer_bytes + 8  # size prefix and correlation id
    assert max(writes) < HELD_CAP + one_answer, writes  # never everything held at once
    assert sum(writes) == count * one_answer
