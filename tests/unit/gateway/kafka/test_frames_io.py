"""`gateway.kafka.frames` on real sockets: frames read straight into their buffers through an
asyncio `BufferedProtocol`, and `write_parts` sending a frame's parts without copying them."""

from __future__ import annotations

import asyncio
import hashlib
import mmap
import socket
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from gateway.kafka.frames import SCRATCH_BYTES, FrameReader, write_parts


def framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


class Collector(asyncio.BufferedProtocol):
    """Frames read from a socket by a `FrameReader`, with the buffers the reads went into."""

    def __init__(self) -> None:
        self.reader = FrameReader(64 << 20)
        self.frames: list[memoryview] = []
        self.targets: list[Any] = []
        self.done = asyncio.get_running_loop().create_future()
        self.expected = 0

    def get_buffer(self, sizehint: int) -> memoryview:
        target = self.reader.get_buffer()
        self.targets.append(target.obj)
        return target

    def buffer_updated(self, nbytes: int) -> None:
        self.frames.extend(self.reader.updated(nbytes))
        if len(self.frames) >= self.expected and not self.done.done():
            self.done.set_result(None)


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


async def _pair(protocol: asyncio.BaseProtocol) -> tuple[asyncio.Transport, socket.socket]:
    ours, theirs = socket.socketpair()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_accepted_socket(lambda: protocol, ours)
    assert isinstance(transport, asyncio.Transport)
    return transport, theirs


def test_a_large_frame_is_read_from_the_socket_into_a_buffer_of_its_own(
    loop: asyncio.AbstractEventLoop,
) -> None:
    small, large = b"s" * 100, bytes(range(256)) * 16 * 1024  # 4 MiB: many reads

    async def scenario() -> Collector:
        collector = Collector()
        collector.expected = 2
        transport, theirs = await _pair(collector)
        theirs.setblocking(False)
        # The loop sends as the socket takes it; the protocol reads on the same loop meanwhile.
        data = framed(small) + framed(large)
        await asyncio.wait_for(asyncio.get_running_loop().sock_sendall(theirs, data), 30)
        await asyncio.wait_for(collector.done, 30)
        transport.close()
        theirs.close()
        return collector

    collector = loop.run_until_complete(scenario())
    assert [bytes(f) for f in collector.frames] == [small, large]
    own = collector.frames[1].obj
    assert isinstance(own, mmap.mmap) and len(own) == len(large)  # above LAZY_FRAME_BYTES
    # After the first read into the scratch, the rest of the body went straight into its buffer.
    straight = [t for t in collector.targets if t is own]
    assert straight and len(straight) == len(collector.targets) - collector.targets.index(own)
    assert len(large) - SCRATCH_BYTES <= len(own)


class Sink(asyncio.Protocol):
    pass


class CountingTransport:
    """A real socket transport whose `write` calls are counted (the rest is the transport's)."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.inner = transport
        self.writes = 0

    def write(self, data: Any) -> None:
        self.writes += 1
        self.inner.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _read_all(sock: socket.socket, size: int) -> bytes:
    sock.setblocking(True)
    chunks = bytearray()
    while len(chunks) < size:
        chunks += sock.recv(size - len(chunks))
    return bytes(chunks)


def test_a_frame_of_parts_goes_to_an_idle_socket_in_one_gathered_send(
    loop: asyncio.AbstractEventLoop,
) -> None:
    records = memoryview(bytes(range(256)) * 64)  # 16 KiB of "record batches", a view
    parts = [b"\x00\x00\x40\x10", b"head", records, b"tail" * 2, records[:8]]

    async def scenario() -> tuple[int, bytes]:
        transport, theirs = await _pair(Sink())
        counting = CountingTransport(transport)
        write_parts(counting, parts)  # type: ignore[arg-type]
        received = _read_all(theirs, sum(len(p) for p in parts))
        transport.close()
        theirs.close()
        return counting.writes, received

    writes, received = loop.run_until_complete(scenario())
    assert received == b"".join(bytes(p) for p in parts)
    assert writes == 0  # the socket took the frame: the transport never copied a byte


async def _receive(sock: socket.socket, size: int) -> bytearray:
    """`size` bytes from a non-blocking socket, read on the loop (the transport flushes meanwhile)."""
    loop = asyncio.get_running_loop()
    received = bytearray()
    while len(received) < size:
        chunk = await loop.sock_recv(sock, 1 << 20)
        assert chunk, "the peer closed early"
        received += chunk
    return received


def test_what_a_full_socket_does_not_take_is_queued_in_order(
    loop: asyncio.AbstractEventLoop,
) -> None:
    big = memoryview(bytes(range(251)) * 40_000)  # ~10 MB: more than the socket buffers hold
    frames: list[list[bytes | memoryview]] = [
        [b"one", big, b"two"],
        [b"three", big[:1000]],
        [b"four"],
    ]

    async def scenario() -> tuple[bytes, int]:
        transport, theirs = await _pair(Sink())
        for parts in frames:
            write_parts(transport, parts)
        queued = transport.get_write_buffer_size()
        expected = sum(len(p) for parts in frames for p in parts)
        theirs.setblocking(False)
        received = await asyncio.wait_for(_receive(theirs, expected), 30)
        transport.close()
        theirs.close()
        return bytes(received), queued

    received, queued = loop.run_until_complete(scenario())
    assert queued > 0  # the socket did not take everything: the transport queued the rest
    expected = b"".join(bytes(p) for parts in frames for p in parts)
    assert len(received) == len(expected)
    assert hashlib.sha256(received).hexdigest() == hashlib.sha256(expected).hexdigest()
