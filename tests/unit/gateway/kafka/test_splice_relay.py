"""`SpliceRelay` moves the rest of a Fetch answer from one socket to another by splice, real
sockets on both sides: the client receives exactly the whole-answer rewrite (partition heads
read by the walk, records spliced, many partitions with aborted transactions, v4/v11/v12), also
when the client reads slowly through a tiny receive buffer (partial splices, EAGAIN on the client
side) and the broker writes in small pieces (EAGAIN on the broker side); a client that goes away
or a broker that closes mid-answer fails the relay with a reason; every descriptor the relay
opened is closed however it ends."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import threading
from collections.abc import Awaitable, Callable, Iterator

import pytest

from brokers.wire.messages import encode_entity
from gateway.kafka import splice_relay
from gateway.kafka.raw.fetch_response import rewrite_fetch_response
from gateway.kafka.raw.fetch_stream import Decision, FetchStream
from gateway.kafka.splice_relay import SpliceRelay
from tests.polling import wait_until_async
from tests.unit.gateway.raw.kio_messages import NAMESPACE, fetch_partition, fetch_response

pytestmark = pytest.mark.unit

CORRELATION = 7
HEAD_BYTES = 256  # fed through Python before the relay takes over (the head and a bit more)


class Walk:
    """The relay's source: a `FetchStream` driven as `gateway.kafka.fetch._Streamed` drives it."""

    def __init__(self, stream: FetchStream) -> None:
        self.stream = stream

    def next_step(self) -> tuple[bool, int]:
        return self.stream.next_step()

    def take(self, chunk: memoryview) -> list[memoryview]:
        self.stream.feed(chunk)
        return self.stream.take_out()

    def skipped(self, count: int) -> None:
        self.stream.skip(count)


def answer(version: int, partitions: int, batch: int) -> bytes:
    """A broker's Fetch answer after its size prefix: header (v12: tagged) and body."""
    parts = [
        fetch_partition(version, i, bytes((i + k) % 256 for k in range(batch)), aborted=True)
        for i in range(partitions)
    ]
    body = encode_entity(fetch_response(version, [("acme_orders", parts)]))
    return struct.pack(">i", CORRELATION) + (b"\x00" if version >= 12 else b"") + body


def expected(version: int, data: bytes) -> bytes:
    header = 5 if version >= 12 else 4
    whole = rewrite_fetch_response(
        memoryview(data[header:]),
        version,
        rename=NAMESPACE.local,
        drop_records=False,
        throttle_time_ms=0,
    )
    return data[:header] + b"".join(whole.parts)


def identity(fd: int) -> tuple[int, int] | None:
    """What `fd` refers to now (device, inode), or None when it is not open."""
    try:
        found = os.fstat(fd)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def relay_descriptors(relay: SpliceRelay) -> dict[int, tuple[int, int] | None]:
    fds = (relay._read_fd, relay._write_fd, relay._pipe_r, relay._pipe_w)
    return {fd: identity(fd) for fd in fds}


@pytest.fixture
def sockets(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[socket.socket, socket.socket, socket.socket, socket.socket]]:
    """(broker writer, gateway's broker side, gateway's client side, client reader); the relay
    keeps the tiny buffers the tests set (it only ever raises them), so it meets EAGAIN."""
    monkeypatch.setattr(splice_relay, "SOCKET_BYTES", 1024)
    broker, upstream = socket.socketpair()
    client_side, client = socket.socketpair()
    for sock in (upstream, client_side):
        sock.setblocking(False)
    yield broker, upstream, client_side, client
    for sock in (broker, upstream, client_side, client):
        sock.close()


def start_stream(version: int, data: bytes, upstream: socket.socket) -> tuple[FetchStream, bytes]:
    """Feed the first bytes through Python, as `Upstream` does until the relay takes over; the
    bytes that went out for them (the renamed head and the records seen)."""
    stream = FetchStream(version, CORRELATION, version >= 12, len(data), NAMESPACE.local)
    upstream.setblocking(True)
    head = upstream.recv(HEAD_BYTES, socket.MSG_WAITALL)
    upstream.setblocking(False)
    stream.feed(memoryview(head))
    assert stream.decision is Decision.STREAM
    header = data[: 5 if version >= 12 else 4]  # the response header, passed on as it is
    return stream, header + stream.head + b"".join(bytes(p) for p in stream.take_out())


async def relay(
    version: int,
    data: bytes,
    sockets: tuple[socket.socket, socket.socket, socket.socket, socket.socket],
    *,
    piece: int,
    read_piece: int,
    stop_reading_at: int | None = None,
    broker_stops_at: int | None = None,
    before_client_reads: Callable[[SpliceRelay], Awaitable[None]] | None = None,
) -> tuple[bytes, str | None, int]:
    broker, upstream, client_side, client = sockets
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client_side.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    sent_limit = len(data) if broker_stops_at is None else broker_stops_at

    def write_broker() -> None:
        try:
            for start in range(0, sent_limit, piece):
                broker.sendall(data[start : min(start + piece, sent_limit)])
            if broker_stops_at is not None:
                broker.shutdown(socket.SHUT_WR)
        except OSError:  # the relay failed and the gateway's side was shut: the rest is unread
            return

    writer = threading.Thread(target=write_broker, daemon=True)
    writer.start()
    stream, head_out = start_stream(version, data, upstream)
    received = bytearray()
    limit = stop_reading_at
    client_reads = threading.Event()

    def read_client() -> None:
        client_reads.wait(30)
        while limit is None or len(received) < limit:
            chunk = client.recv(read_piece)
            if not chunk:
                return
            received.extend(chunk)
        client.shutdown(socket.SHUT_RDWR)

    reader = threading.Thread(target=read_client, daemon=True)
    reader.start()
    done: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
    moving = SpliceRelay(
        upstream.fileno(),
        client_side.fileno(),
        len(data) - HEAD_BYTES,
        Walk(stream),
        done.set_result,
    )
    # two duplicates and a pipe (their identities, not a count of the process's descriptors:
    # another test's client library may open or close sockets on its own threads meanwhile)
    owned = relay_descriptors(moving)
    assert len(owned) == 4 and None not in owned.values()
    # the relay writes straight to the socket: what Python wrote first must be out before it
    client_side.setblocking(True)
    client_side.sendall(head_out)
    client_side.setblocking(False)
    moving.start()
    if before_client_reads is not None:
        await before_client_reads(moving)
    client_reads.set()
    failure = await asyncio.wait_for(done, 30)
    assert all(identity(fd) != was for fd, was in owned.items()), "a descriptor left open"
    if limit is None:
        client_side.shutdown(socket.SHUT_WR)  # the reader's end of the stream
    if failure is not None:
        upstream.shutdown(socket.SHUT_RDWR)  # as the gateway drops the upstream connection
    reader.join(30)
    writer.join(30)
    return bytes(received), failure, moving.spliced


@pytest.mark.parametrize("version", [4, 11, 12])
def test_the_client_receives_the_whole_answer_rewrite(
    version: int, sockets: tuple[socket.socket, socket.socket, socket.socket, socket.socket]
) -> None:
    data = answer(version, partitions=24, batch=50_000)
    received, failure, spliced = asyncio.run(
        relay(version, data, sockets, piece=7_919, read_piece=1_013)
    )
    assert failure is None
    assert received == expected(version, data)
    assert spliced > 23 * 50_000  # the records went socket to socket, not through Python


def test_a_client_gone_mid_answer_fails_the_relay_and_closes_its_descriptors(
    sockets: tuple[socket.socket, socket.socket, socket.socket, socket.socket],
) -> None:
    data = answer(12, partitions=4, batch=2_000_000)
    _received, failure, _spliced = asyncio.run(
        relay(12, data, sockets, piece=65_536, read_piece=65_536, stop_reading_at=300_000)
    )
    assert failure is not None and failure.startswith("client socket")


def test_a_broker_gone_mid_answer_fails_the_relay(
    sockets: tuple[socket.socket, socket.socket, socket.socket, socket.socket],
) -> None:
    data = answer(12, partitions=4, batch=200_000)
    _received, failure, _spliced = asyncio.run(
        relay(12, data, sockets, piece=65_536, read_piece=65_536, broker_stops_at=500_000)
    )
    assert failure == "broker socket closed mid-answer"


def test_a_pipe_full_of_small_fragments_parks_the_relay_on_the_client_not_the_broker(
    sockets: tuple[socket.socket, socket.socket, socket.socket, socket.socket],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The broker's bytes arrive in 100-byte pieces, each a pipe slot of its own: a pipe of 16
    slots is full with 1.6 KB in it. While the client reads nothing, the broker's socket is
    readable and splicing into the pipe says EAGAIN; a relay parked on that socket would be
    woken again at every turn of the loop, moving nothing. Parked on the client, it sleeps
    until the client reads."""
    monkeypatch.setattr(splice_relay, "PIPE_BYTES", 16 * 4096)
    pumps = 0
    real_pump = SpliceRelay._pump

    def counting_pump(self: SpliceRelay) -> None:
        nonlocal pumps
        pumps += 1
        real_pump(self)

    monkeypatch.setattr(SpliceRelay, "_pump", counting_pump)

    async def parked_on_the_client(moving: SpliceRelay) -> None:
        async def parked() -> bool:
            return moving._writing and not moving._reading

        await wait_until_async(parked, what="the relay waits on the client alone", timeout=10)
        assert moving._in_pipe > 0 and splice_relay._unread(moving._read_fd) > 0
        woken = pumps
        for _ in range(200):  # turns of the loop with the broker's socket readable throughout
            await asyncio.sleep(0)
        assert pumps == woken, f"{pumps - woken} wake-ups in 200 turns with nothing to move"

    data = answer(12, partitions=4, batch=50_000)
    received, failure, _spliced = asyncio.run(
        relay(
            12,
            data,
            sockets,
            piece=100,
            read_piece=512,
            before_client_reads=parked_on_the_client,
        )
    )
    assert failure is None
    assert received == expected(12, data)
