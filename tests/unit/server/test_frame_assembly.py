"""A request frame that arrives in pieces is handed to the dispatcher byte for byte.

Large produce requests (1 MiB batches over 100 partitions, the OpenMessaging shape) arrive in many
socket reads; the connection's `FrameStream` reads them into one buffer allocated at the frame's
size. Real sockets (a socketpair) and a real event loop; the dispatcher is a recorder.
"""

from __future__ import annotations

import asyncio
import random
import socket
import struct
from typing import Any

import pytest

from brokers.server.connection import Connection
from brokers.server.dispatcher import CloseConnection, Peer, Reply
from brokers.server.frame_stream import FrameStream, accept
from brokers.server.request_memory import RequestMemory
from brokers.wire.frame_reader import LAZY_FRAME_BYTES
from brokers.wire.framing import FrameLimits
from tests.polling import wait_until_async

pytestmark = pytest.mark.unit
FRAME_BYTES = 3 * 1024 * 1024 + 17  # above the stream buffer, so it cannot arrive in one read


class Recorder:
    """Keeps every frame it is given, and the size of the buffer under it; answers nothing (as
    an acks=0 produce)."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []
        self.buffers: list[tuple[str, int]] = []

    async def dispatch(self, frame: memoryview, peer: Peer) -> Reply | None:
        self.frames.append(bytes(frame))
        self.buffers.append((type(frame.obj).__name__, len(frame.obj)))  # type: ignore[arg-type]
        return None


async def _serve_one(
    payloads: list[bytes], pieces: int, memory: RequestMemory | None = None
) -> Recorder:
    ours, theirs = socket.socketpair()
    memory = memory or RequestMemory(None)
    frames, writer = await accept(ours, FrameLimits().max_request_bytes, memory)
    recorder = Recorder()
    connection = Connection(frames, writer, recorder, Peer("test", "c1"))  # type: ignore[arg-type]
    served = asyncio.create_task(connection.serve())
    _client_reader, client = await asyncio.open_connection(sock=theirs)
    rng = random.Random(7)
    for payload in payloads:
        wire = struct.pack(">i", len(payload)) + payload
        cuts = sorted(rng.sample(range(1, len(wire)), pieces - 1))
        for start, end in zip([0, *cuts], [*cuts, len(wire)], strict=True):
            client.write(wire[start:end])
            await client.drain()
            await asyncio.sleep(0)  # let the connection read what has arrived so far

    async def all_read() -> bool:
        return len(recorder.frames) == len(payloads)

    await wait_until_async(all_read, what="every frame dispatched", timeout=30)
    client.close()
    await asyncio.wait_for(served, 10)
    return recorder


@pytest.mark.parametrize("pieces", [2, 61])
def test_a_frame_sent_in_pieces_reaches_the_dispatcher_unchanged(pieces: int) -> None:
    rng = random.Random(pieces)
    payloads = [rng.randbytes(FRAME_BYTES), rng.randbytes(1000), rng.randbytes(FRAME_BYTES // 3)]
    recorder: Any = asyncio.run(_serve_one(payloads, pieces))
    assert [len(f) for f in recorder.frames] == [len(p) for p in payloads]
    assert recorder.frames == payloads


@pytest.mark.parametrize(
    ("size", "kind"),
    [(LAZY_FRAME_BYTES - 1000, "bytearray"), (LAZY_FRAME_BYTES + 17, "mmap")],
)
def test_a_large_frame_is_read_into_one_buffer_of_its_size(size: int, kind: str) -> None:
    """The body is read straight into a buffer of the announced size (no chunks joined, no
    stream buffer copied out): the view the dispatcher gets spans that whole buffer, from the
    heap or, above LAZY_FRAME_BYTES, a mapping whose pages are touched only as bytes arrive."""
    payloads = [random.Random(3).randbytes(size)]
    recorder: Any = asyncio.run(_serve_one(payloads, 5))
    assert recorder.buffers == [(kind, size)]


def test_request_memory_comes_back_when_requests_are_processed() -> None:
    memory = RequestMemory(64 * 1024 * 1024)
    payloads = [bytes(1000)] * 20 + [bytes(FRAME_BYTES)] * 3
    recorder: Any = asyncio.run(_serve_one(payloads, 7, memory))
    assert len(recorder.frames) == len(payloads)
    assert memory.used == 0


class Refuser:
    """Waits until the next request was read ahead, then ends the connection (as a malformed
    request does)."""

    def __init__(self) -> None:
        self.stream: FrameStream | None = None

    async def dispatch(self, frame: memoryview, peer: Peer) -> Reply | None:
        stream = self.stream
        assert stream is not None

        async def read_ahead() -> bool:
            return stream.frame_ready

        await wait_until_async(read_ahead, what="the next request read ahead", timeout=10)
        raise CloseConnection("refused")


def test_requests_read_ahead_give_their_memory_back_when_the_connection_ends() -> None:
    async def scenario() -> int:
        memory = RequestMemory(64 * 1024 * 1024)
        ours, theirs = socket.socketpair()
        frames, writer = await accept(ours, FrameLimits().max_request_bytes, memory)
        refuser = Refuser()
        refuser.stream = frames
        connection = Connection(frames, writer, refuser, Peer("test", "c1"))  # type: ignore[arg-type]
        served = asyncio.create_task(connection.serve())
        theirs.sendall(b"".join(struct.pack(">i", 1000) + bytes(1000) for _ in range(3)))
        await asyncio.wait_for(served, 10)
        theirs.close()
        return memory.used

    assert asyncio.run(scenario()) == 0
