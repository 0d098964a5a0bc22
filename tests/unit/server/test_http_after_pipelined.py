"""An HTTP request sent after pipelined Kafka requests: the Kafka answers arrive first, whole and
in order, then the 400 that says what the port is.

A bytes answer is held back while the client's next request is already buffered in full
(connection's pipelined runs); when that next request has no answer (a Produce with acks=0) and
the HTTP request follows at once, the held-back answer is still waiting when the HTTP request is
found, while a large answer before it is still being written. Every answer path: the writer thread, and the transport on asyncio's loop and on uvloop.
Real sockets (a socketpair), real loops, the real writer thread; the dispatcher echoes.
"""

from __future__ import annotations

import pytest

from brokers.server.answer_writer import AnswerWriter
from tests.polling import wait_until_async
from tests.unit.server.echo_connection import Echo, frame, read_to_eof, run_on, serve

pytestmark = pytest.mark.unit

HTTP_REQUEST = b"GET /v1/topics HTTP/1.1\r\nHost: localhost\r\n\r\n"
REQUESTS = (b"fill-request", b"first-request", b"quiet-request")
FILL = 1024 * 1024  # more than the socket takes: still queued when the HTTP request is found
FINISH_S = 30.0  # bounds a hang only


async def _dispatched(echo: Echo) -> None:
    """Until the connection got to the HTTP request (the client reads only then, so the answers
    are all queued or held back before any of them can leave)."""

    async def all_of_them() -> bool:
        return echo.correlation == len(REQUESTS)

    await wait_until_async(all_of_them, what="requests dispatched")


@pytest.mark.parametrize("path", ["thread", "asyncio", "uvloop"])
def test_kafka_answers_before_an_http_request_leave_first(path: str) -> None:
    async def scenario(writer: AnswerWriter | None) -> bytes:
        echo = Echo(fill_bytes=FILL)
        served = await serve(echo, writer)
        data = b"".join(frame(r) for r in REQUESTS) + HTTP_REQUEST
        return await read_to_eof(served, data, FINISH_S, ready=lambda: _dispatched(echo))

    received: bytes = run_on(path, scenario)
    answers = frame(b"\x00\x00\x00\x01" + b"f" * FILL) + frame(b"\x00\x00\x00\x02first-request")
    assert received[: len(answers)] == answers
    assert received[len(answers) :].startswith(b"HTTP/1.1 400 Bad Request\r\n")
