"""The fault proxy itself, against a local echo server: forwarding, cut (reset + blackhole),
hold (existing connections freeze, new ones pass), heal (held bytes delivered), the tap."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator

import pytest

from infra.fault_proxy import FaultProxy, ProxyLoop

pytestmark = [pytest.mark.fault, pytest.mark.timeout(60)]
SILENCE_S = 0.5  # how long a blackholed request must stay unanswered


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError):  # the proxy resets links on cut
        while data := await reader.read(4096):
            writer.write(data)
            await writer.drain()
    writer.close()


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    with ProxyLoop() as loop:
        server = loop.call(asyncio.start_server(_echo, "127.0.0.1", 0))
        host, port = server.sockets[0].getsockname()[:2]
        yield loop.proxy((host, port))
        loop.call(_close(server))  # on the loop's thread: asyncio servers are not thread-safe


async def _close(server: asyncio.Server) -> None:
    server.close()


def connect(proxy: FaultProxy) -> socket.socket:
    return socket.create_connection((proxy.host, proxy.port), timeout=5)


def receive(sock: socket.socket, size: int) -> bytes:
    received = b""
    while len(received) < size:
        chunk = sock.recv(size - len(received))
        if not chunk:
            break
        received += chunk
    return received


def exchange(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(data)
    return receive(sock, len(data))


def unanswered(sock: socket.socket, data: bytes) -> bool:
    sock.sendall(data)
    sock.settimeout(SILENCE_S)
    try:
        sock.recv(4096)  # an answer, or the end of the stream: either way not silence
        return False
    except TimeoutError:
        return True
    finally:
        sock.settimeout(5)


def test_forwards_both_ways_and_taps_each_direction(proxy: FaultProxy) -> None:
    seen: list[tuple[str, bytes]] = []
    proxy.tap(lambda _conn, direction, data: seen.append((direction, data)))
    with connect(proxy) as sock:
        assert exchange(sock, b"ping") == b"ping"
    assert ("up", b"ping") in seen and ("down", b"ping") in seen


def test_cut_resets_open_connections_and_blackholes_new_ones_until_healed(
    proxy: FaultProxy,
) -> None:
    with connect(proxy) as before:
        assert exchange(before, b"a") == b"a"
        proxy.cut()
        with pytest.raises(ConnectionResetError):
            before.recv(1)
    with connect(proxy) as during:  # accepted: a partition is not a refusal
        assert unanswered(during, b"held")
        proxy.heal()
        during.sendall(b"!")
        assert receive(during, 5) == b"held!"


def test_hold_freezes_open_connections_while_new_ones_pass(proxy: FaultProxy) -> None:
    with connect(proxy) as stalled:
        assert exchange(stalled, b"1") == b"1"
        proxy.hold()
        assert unanswered(stalled, b"late")
        with connect(proxy) as fresh:
            assert exchange(fresh, b"fresh") == b"fresh"
        proxy.heal()
        assert receive(stalled, 4) == b"late"


def test_delayed_link_still_delivers_in_order(proxy: FaultProxy) -> None:
    proxy.delay(0.05)
    with connect(proxy) as sock:
        assert exchange(sock, b"abc") == b"abc"
        assert exchange(sock, b"def") == b"def"
