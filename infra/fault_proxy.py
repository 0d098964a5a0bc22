"""A fault-injecting TCP proxy: one listening address per network link, forwarding to a target.

Owns: `FaultProxy` (one link: cut, heal, hold, delay, a byte tap) and `ProxyLoop`, the background
thread whose asyncio loop runs every proxy of a test. Fault tests put one in front of a broker's
inter-broker endpoint (`inter.broker.advertised.address`) and of a broker's ZooKeeper connection,
so a link can fail while the processes at both ends keep running.

Faults model a network partition rather than a crash:
- `cut()` aborts every open connection (both ends see a reset) and from then on accepts new
  connections but forwards nothing (a blackhole: the peer's connect succeeds, its requests never
  get answers, as when packets are dropped; a refused connection would be detected at once, which
  a real partition never is). Bytes in flight when the gate closes are held, not dropped.
- `hold()` freezes the connections open now (their bytes wait) while new ones pass: a stalled
  path, e.g. a controller's request stuck until after a new controller was elected.
- `heal()` opens every gate: held bytes are delivered, blackholed connections are connected to
  the target. `delay(seconds)` postpones every forwarded chunk.
- `tap(callback)` sees each chunk read, with the connection's id and direction ("up": toward
  the target), before any gate; it runs on the proxy thread and must not block.
Public methods are called from any thread (they hop onto the proxy loop and wait); not re-entrant
from the tap callback.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import socket
import struct
import threading
from collections.abc import Callable, Coroutine
from types import TracebackType
from typing import Any, Literal, TypeVar

Direction = Literal["up", "down"]
Tap = Callable[[int, Direction, bytes], None]
T = TypeVar("T")
CHUNK = 65536
CONTROL_TIMEOUT_S = 10.0
_LINGER_RESET = struct.pack("ii", 1, 0)


class ProxyLoop:
    """A daemon thread running one asyncio loop for all the proxies of a test."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="fault-proxy", daemon=True
        )
        self._thread.start()
        self.proxies: list[FaultProxy] = []

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        """Run `coroutine` on the proxy loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(CONTROL_TIMEOUT_S)

    def proxy(
        self, target: tuple[str, int], *, host: str = "127.0.0.1", name: str = ""
    ) -> FaultProxy:
        """Start a proxy for `target` listening on a free port of `host`."""
        proxy = FaultProxy(self, target, name=name)
        self.call(proxy.start(host))
        self.proxies.append(proxy)
        return proxy

    def close(self) -> None:
        """Stop every proxy (their connections are aborted) and the thread."""
        for proxy in self.proxies:
            with contextlib.suppress(Exception):
                self.call(proxy.stop())
        self.proxies.clear()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(CONTROL_TIMEOUT_S)
        self.loop.close()

    def __enter__(self) -> ProxyLoop:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _Connection:
    """One accepted client connection and its (lazily opened) target connection."""

    def __init__(
        self,
        proxy: FaultProxy,
        number: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        gate_open: bool,
    ) -> None:
        self.proxy, self.number = proxy, number
        self.client = (reader, writer)
        self.target: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self.gate = asyncio.Event()
        if gate_open:
            self.gate.set()
        self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            await self.gate.wait()  # a blackholed connection reaches its target only when healed
            self.target = await asyncio.open_connection(*self.proxy.target)
            await asyncio.gather(
                self._pump(self.client[0], self.target[1], "up"),
                self._pump(self.target[0], self.client[1], "down"),
            )
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            self.abort()
            self.proxy.connections.discard(self)

    async def _pump(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, direction: Direction
    ) -> None:
        while data := await source.read(CHUNK):
            if self.proxy.tap_callback is not None:
                self.proxy.tap_callback(self.number, direction, data)
            if self.proxy.delay_s > 0:
                await asyncio.sleep(self.proxy.delay_s)
            await self.gate.wait()  # bytes read while cut or held wait here, in order
            sink.write(data)
            await sink.drain()
        raise asyncio.IncompleteReadError(b"", None)  # EOF: close both sides

    def abort(self) -> None:
        """Close both sides with a reset, as a broken link looks to the peers."""
        for _, writer in (self.client, self.target) if self.target else (self.client,):
            transport = writer.transport
            if not transport.is_closing():
                sock = transport.get_extra_info("socket")
                if sock is not None:  # linger 0: close sends RST, not FIN
                    with contextlib.suppress(OSError):
                        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
                transport.abort()


class FaultProxy:
    def __init__(self, loop: ProxyLoop, target: tuple[str, int], *, name: str = "") -> None:
        self._loop = loop
        self.target = target
        self.name = name or f"proxy-to-{target[0]}:{target[1]}"
        self.connections: set[_Connection] = set()
        self.cut_now = False
        self.delay_s = 0.0
        self.tap_callback: Tap | None = None
        self._numbers = itertools.count(1)
        self._server: asyncio.Server | None = None
        self.host, self.port = "", 0

    @property
    def address(self) -> str:
        """`host:port` to advertise instead of the target."""
        return f"{self.host}:{self.port}"

    async def start(self, host: str) -> None:
        self._server = await asyncio.start_server(self._accept, host, 0)
        self.host, self.port = self._server.sockets[0].getsockname()[:2]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = [connection.task for connection in self.connections]
        for connection in list(self.connections):
            connection.abort()
            connection.task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = _Connection(self, next(self._numbers), reader, writer, not self.cut_now)
        self.connections.add(connection)
        # Awaited so the streams stay owned by this callback's task until the link ends.
        with contextlib.suppress(asyncio.CancelledError):
            await connection.task

    # --- faults (thread-safe: each hops onto the proxy loop) ------------------------------------

    def cut(self) -> None:
        """Partition the link: open connections are reset, new ones blackholed until `heal`."""
        self._loop.call(self._cut())

    async def _cut(self) -> None:
        self.cut_now = True
        for connection in list(self.connections):
            connection.gate.clear()
            connection.abort()

    def hold(self) -> None:
        """Freeze the connections open now (their bytes wait); new connections pass."""
        self._loop.call(self._hold())

    async def _hold(self) -> None:
        for connection in list(self.connections):
            connection.gate.clear()

    def heal(self) -> None:
        """Forward again: held bytes flow, blackholed connections reach the target."""
        self._loop.call(self._heal())

    async def _heal(self) -> None:
        self.cut_now = False
        for connection in list(self.connections):
            connection.gate.set()

    def delay(self, seconds: float) -> None:
        """Postpone each forwarded chunk by `seconds` (0 turns it off)."""
        self._loop.call(self._set(delay_s=seconds))

    def tap(self, callback: Tap | None) -> None:
        """See every chunk read (on the proxy thread; must not block)."""
        self._loop.call(self._set(tap_callback=callback))

    async def _set(self, **values: Any) -> None:
        for key, value in values.items():
            setattr(self, key, value)

    def open_connections(self) -> int:
        return self._loop.call(self._count())

    async def _count(self) -> int:
        return len(self.connections)
