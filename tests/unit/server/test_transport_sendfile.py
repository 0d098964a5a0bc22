"""`send_region` sends a file region with sendfile on asyncio's loop and on uvloop, in order
after the bytes written before it and before the bytes written after it.

uvloop has no `loop.sendfile` (it inherits the abstract one, which raises NotImplementedError),
so there the region goes with `os.sendfile` on a duplicate of the socket once the transport's
queued bytes (uvloop queues writes until the end of the loop's turn) are written out, waiting on
the duplicate with `add_writer` whenever the socket is full. Real sockets (a socketpair with small
buffers, so the socket fills many times), a real file and each real event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import tempfile
from collections.abc import Callable, Iterator

import pytest
import uvloop

from brokers.log.file_records import FileHandle, FileRegion
from brokers.server.transport_sendfile import send_region

pytestmark = pytest.mark.unit

REGION = 4 * 1024 * 1024  # many socket buffers' worth: the send waits for writability
BEFORE = b"b" * (1024 * 1024)  # more than the socket takes: the transport keeps the rest
FIRST = 64 * 1024  # read before the region is sent: the socket has room, the transport bytes
AFTER = b"a" * 1_000
HANG_S = 60.0  # bounds a hang only (bytes that never come)

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


@pytest.fixture
def file_fd() -> Iterator[tuple[int, bytes]]:
    """An open file whose bytes differ from offset to offset, and those bytes."""
    content = os.urandom(REGION + 4096)
    with tempfile.TemporaryFile() as file:
        file.write(content)
        file.flush()
        yield file.fileno(), content


async def _send_and_read(fd: int, position: int) -> bytes:
    near, far = socket.socketpair()
    for end in (near, far):
        end.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16 * 1024)
        end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    _, writer = await asyncio.open_connection(sock=near)
    reader, peer_writer = await asyncio.open_connection(sock=far)
    expected = len(BEFORE) + REGION + len(AFTER)
    writer.write(BEFORE)
    first = await reader.readexactly(FIRST)
    reading = asyncio.ensure_future(reader.readexactly(expected - FIRST))
    try:
        closed = asyncio.get_running_loop().create_future()  # the connection's, never closed here
        await send_region(writer, FileRegion(FileHandle(os.dup(fd)), position, REGION), closed)
        writer.write(AFTER)
        async with asyncio.timeout(HANG_S):
            return first + await reading
    finally:
        reading.cancel()
        writer.close()
        peer_writer.close()
        # the send waited for a writable socket: the connection's close is still seen (the
        # protocol's close future was cancelled with the send's wait before: CancelledError)
        with contextlib.suppress(ConnectionError):
            await asyncio.wait_for(writer.wait_closed(), HANG_S)


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_region_goes_out_whole_and_in_order(file_fd: tuple[int, bytes], loop_name: str) -> None:
    fd, content = file_fd
    with asyncio.Runner(loop_factory=LOOPS[loop_name]) as runner:
        received = runner.run(_send_and_read(fd, 1000))
    assert len(received) == len(BEFORE) + REGION + len(AFTER)
    assert received[: len(BEFORE)] == BEFORE
    assert received[len(BEFORE) : len(BEFORE) + REGION] == content[1000 : 1000 + REGION]
    assert received[len(BEFORE) + REGION :] == AFTER
