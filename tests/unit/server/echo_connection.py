"""A `Connection` served over a socketpair with an echoing dispatcher, for the answer-path tests.

`Echo` answers each request with its own bytes (its correlation id counts the requests); a
`park-request` waits until `release` is set, and a `file-request` is answered with the first
`file_bytes` of the file `fd` as a file region (as Fetch is; a duplicate of `fd` it holds open), or with `region` when one is given
(handed over once: the echo keeps no reference, as a Fetch answer keeps none once sent); a
`fill-request` is answered with `fill_bytes` bytes, and a `quiet-request` not at all (as a
Produce with acks=0). `serve` starts the connection on one
end of a socketpair and returns it with the client's streams; `frame` and `numbered` write and
read the wire format, `read_to_eof` what a client gets until the connection ends; `run_on` runs a scenario on one answer path (`thread`: the writer thread on
asyncio's loop; `asyncio`, `uvloop`: the transport on that loop). Runs on the test's event loop.
"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import uvloop

from brokers.log.file_records import FileHandle, FileRegion
from brokers.server.answer_writer import AnswerWriter
from brokers.server.connection import Connection
from brokers.server.dispatcher import Peer, Reply
from brokers.server.frame_stream import accept
from brokers.server.request_memory import RequestMemory
from brokers.server.response import RawResponse
from brokers.wire.framing import FrameLimits

SERVE_END_S = 30.0  # how long `serve` may take to end once the client closed (bounds a hang)
LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


class Echo:
    def __init__(
        self,
        fd: int = -1,
        file_bytes: int = 0,
        *,
        region: FileRegion | None = None,
        fill_bytes: int = 0,
    ) -> None:
        self.fd = fd
        self.file_bytes = file_bytes
        self.region = region
        self.fill_bytes = fill_bytes
        self.file_answered = asyncio.Event()
        self.release = asyncio.Event()
        self.parked = asyncio.Event()
        self.correlation = 0

    async def dispatch(self, frame: memoryview, peer: Peer) -> Reply | None:
        self.correlation += 1
        if bytes(frame) == b"park-request":
            self.parked.set()
            await self.release.wait()
        if bytes(frame) == b"quiet-request":
            return None
        if bytes(frame) == b"fill-request":
            return Reply(self.correlation, False, b"f" * self.fill_bytes)
        if bytes(frame) == b"file-request":
            region, self.region = self.region, None
            if region is None:
                region = FileRegion(FileHandle(os.dup(self.fd)), 0, self.file_bytes)
            self.file_answered.set()
            return Reply(self.correlation, False, RawResponse([region]))
        return Reply(self.correlation, False, bytes(frame))


@dataclass
class Served:
    connection: Connection
    task: asyncio.Task[None]
    transport: asyncio.Transport  # the connection's (tests may count its writes)
    reader: asyncio.StreamReader  # the client's
    client: asyncio.StreamWriter


async def serve(echo: Echo, answers: AnswerWriter | None) -> Served:
    ours, theirs = socket.socketpair()
    frames, writer = await accept(ours, FrameLimits().max_request_bytes, RequestMemory(None))
    transport = cast(asyncio.Transport, writer.transport)
    dispatcher: Any = echo
    connection = Connection(frames, writer, dispatcher, Peer("test", "c1"), answers=answers)
    task = asyncio.create_task(connection.serve())
    client_reader, client = await asyncio.open_connection(sock=theirs)
    return Served(connection, task, transport, client_reader, client)


async def read_to_eof(
    served: Served,
    data: bytes,
    bound: float,
    *,
    ready: Callable[[], Awaitable[object]] | None = None,
) -> bytes:
    """Send `data`, wait for `ready` (if given), then read until the connection ends (TimeoutError
    after `bound` seconds if it never does); the client closes and `serve` ends either way."""
    try:
        served.client.write(data)
        if ready is not None:
            await ready()
        async with asyncio.timeout(bound):
            return await served.reader.read()
    finally:
        served.client.close()
        await asyncio.wait_for(served.task, SERVE_END_S)


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


async def numbered(reader: asyncio.StreamReader, count: int) -> list[tuple[int, bytes]]:
    """The next `count` answers as (correlation id, body)."""
    found = []
    for _ in range(count):
        size = struct.unpack(">i", await asyncio.wait_for(reader.readexactly(4), 10))[0]
        body = await asyncio.wait_for(reader.readexactly(size), 10)
        found.append((int.from_bytes(body[:4], "big"), body[4:]))
    return found


def run_on(path: str, scenario: Callable[[AnswerWriter | None], Any]) -> Any:
    """`scenario` on the path: `thread` (asyncio's loop, a writer thread of its own, stopped
    after) or a loop's name (the transport's path)."""
    writer = AnswerWriter() if path == "thread" else None
    try:
        with asyncio.Runner(loop_factory=LOOPS.get(path, asyncio.new_event_loop)) as runner:
            return runner.run(scenario(writer))
    finally:
        if writer is not None:
            writer.stop()
