"""A request frame that arrives in pieces is handed to the dispatcher byte for byte.

Large produce requests (1 MiB batches over 100 partitions, the OpenMessaging shape) arrive in many
socket reads; `Connection._read_body` assembles them into one buffer allocated at the frame's
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
from brokers.server.dispatcher import Peer, Reply
from brokers.wire.framing import FrameLimits
from tests.polling import wait_until_async

pytestmark = pytest.mark.unit
FRAME_BYTES = 3 * 1024 * 1024 + 17  # above the stream buffer, so it cannot arrive in one read


class Recorder:
    """Keeps every frame it is given; answers nothing (as an acks=0 produce)."""

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    async def dispatch(self, frame: memoryview, peer: Peer) -> Reply | None:
        self.frames.append(bytes(frame))
        return None


async def _serve_one(payloads: list[bytes], pieces: int) -> list[bytes]:
    ours, theirs = socket.socketpair()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=256 * 1024)
    protocol = asyncio.StreamReaderProtocol(reader)
    transport, _ = await loop.connect_accepted_socket(lambda: protocol, ours)
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    recorder = Recorder()
    connection = Connection(reader, writer, recorder, FrameLimits(), Peer("test", "c1"))  # type: ignore[arg-type]
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
    return recorder.frames


@pytest.mark.parametrize("pieces", [2, 61])
def test_a_frame_sent_in_pieces_reaches_the_dispatcher_unchanged(pieces: int) -> None:
    rng = random.Random(pieces)
    payloads = [rng.randbytes(FRAME_BYTES), rng.randbytes(1000), rng.randbytes(FRAME_BYTES // 3)]
    frames: Any = asyncio.run(_serve_one(payloads, pieces))
    assert [len(f) for f in frames] == [len(p) for p in payloads]
    assert frames == payloads
