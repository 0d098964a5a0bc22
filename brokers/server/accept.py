"""Binding the listener's sockets and accepting on them without ever spinning on EMFILE.

Owns: `bind_listening_sockets`, `accept_forever`, `AcceptBackoff` and `ConnectionQuotas`.
asyncio's own accept loop (3.11) answers an EMFILE by logging a traceback and scheduling a retry
for *each* of up to `backlog` attempts per wake-up, so at the open-file limit retries multiply,
the loop burns a core and the log grows by hundreds of MB while nothing is accepted (issue 13).
Here an accept that fails backs off — 10 ms doubling to 1 s, reset by the next success — and the
failure is logged at most once per `log_interval_s`, with how many failures that line stands
for. Clients that connect meanwhile wait in the kernel's listen backlog and are accepted once
descriptors are free again (a topic deleted, connections closed).

Connection caps (`ConnectionQuotas`, Kafka's SocketServer ConnectionQuotas): `max.connections`
bounds the connections served at once — at the cap the accept loop stops accepting (it awaits
`wait_for_room`, no polling) until a connection ends, and clients wait in the listen backlog, as
Kafka's acceptor blocks; `max.connections.per.ip` (with `max.connections.per.ip.overrides`)
bounds one address's: a connection past it is closed right after accept, before anything is read
from it, as Kafka drops it. Both default to unlimited. Runs on the event loop; `AcceptBackoff`,
`LogLimiter` and `ConnectionQuotas` are pure.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import socket
from collections.abc import Awaitable, Callable, Mapping

from brokers.common.config import UNLIMITED_CONNECTIONS as UNLIMITED
from brokers.common.config import BrokerConfigError

log = logging.getLogger("pier.server")
LISTEN_BACKLOG = 100  # asyncio.start_server's default
FIRST_DELAY_S = 0.01
MAX_DELAY_S = 1.0
LOG_INTERVAL_S = 10.0
_OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class LogLimiter:
    """At most one log line per `interval_s`; each line says how many events it stands for."""

    def __init__(self, clock: Callable[[], float], interval_s: float = LOG_INTERVAL_S) -> None:
        self._clock = clock
        self._interval_s = interval_s
        self._last: float | None = None
        self.unlogged = 0  # events since the last line

    def event(self) -> int | None:
        """Count one event; how many events to log now (None: stay silent)."""
        self.unlogged += 1
        now = self._clock()
        if self._last is not None and now - self._last < self._interval_s:
            return None
        self._last = now
        events, self.unlogged = self.unlogged, 0
        return events


class AcceptBackoff:
    """How long to wait after a failed accept, and whether this failure gets a log line."""

    def __init__(
        self,
        clock: Callable[[], float],
        *,
        first_s: float = FIRST_DELAY_S,
        max_s: float = MAX_DELAY_S,
        log_interval_s: float = LOG_INTERVAL_S,
    ) -> None:
        self._first_s = first_s
        self._max_s = max_s
        self._delay_s = 0.0
        self._log = LogLimiter(clock, log_interval_s)

    @property
    def unlogged(self) -> int:
        """Failures since the last log line."""
        return self._log.unlogged

    def failed(self) -> tuple[float, int | None]:
        """(seconds to wait, failures this log line stands for — None: stay silent)."""
        self._delay_s = min(self._max_s, max(self._first_s, self._delay_s * 2))
        return self._delay_s, self._log.event()

    def succeeded(self) -> None:
        self._delay_s = 0.0


class ConnectionQuotas:
    """Counts of the connections served, in total and per peer address, against the caps.

    Fed events only: `admit` when a connection is accepted (False: over its address's cap, the
    caller closes it), `release` when an admitted one ends. Addresses are IP strings (an
    IPv4-mapped IPv6 address counts as its IPv4 address; a Unix socket's is "").
    """

    def __init__(
        self,
        max_connections: int = UNLIMITED,
        max_per_ip: int = UNLIMITED,
        overrides: Mapping[str, int] | None = None,
    ) -> None:
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self._overrides = dict(overrides or {})
        self.total = 0
        self._per_ip: dict[str, int] = {}

    @property
    def full(self) -> bool:
        """At `max.connections`: accept nothing until a connection ends."""
        return self.total >= self.max_connections

    def limit(self, address: str) -> int:
        return self._overrides.get(address, self.max_per_ip)

    def count(self, address: str) -> int:
        return self._per_ip.get(address, 0)

    def admit(self, address: str) -> bool:
        """Count a new connection from `address`, unless that address is at its cap."""
        held = self._per_ip.get(address, 0)
        if held >= self.limit(address):
            return False
        self._per_ip[address] = held + 1
        self.total += 1
        return True

    def release(self, address: str) -> None:
        """An admitted connection from `address` ended."""
        held = self._per_ip.get(address, 0)
        if held <= 0:
            return
        if held == 1:
            del self._per_ip[address]
        else:
            self._per_ip[address] = held - 1
        self.total -= 1


def peer_address(sock: socket.socket) -> str:
    """The peer's IP as `ConnectionQuotas` counts it; OSError if the peer is gone already."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return ""
    return normalize_address(str(sock.getpeername()[0]))


def normalize_address(address: str) -> str:
    return (
        address.removeprefix("::ffff:")
        if address.startswith("::ffff:") and "." in address
        else address
    )


def resolve_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """`max.connections.per.ip.overrides` by IP address: each host name resolved (every address
    it has); a name that does not resolve is a start-up error, as in Kafka."""
    resolved: dict[str, int] = {}
    for host, count in overrides.items():
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise BrokerConfigError(
                f"max.connections.per.ip.overrides: cannot resolve {host!r}: {exc}"
            ) from None
        for info in infos:
            resolved[normalize_address(str(info[4][0]))] = count
    return resolved


def bind_listening_sockets(host: str, port: int) -> list[socket.socket]:
    """Listening, non-blocking sockets for every address `host` resolves to (as asyncio binds)."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(LISTEN_BACKLOG)
            sock.setblocking(False)
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


async def accept_forever(
    sock: socket.socket,
    on_accepted: Callable[[socket.socket], None],
    backoff: AcceptBackoff,
    on_error: Callable[[str], None] | None = None,
    wait_for_room: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Accept until cancelled; hand each connection to `on_accepted` (which must not block).

    `wait_for_room` (the `max.connections` gate) is awaited before each accept, so at the cap
    clients wait in the listen backlog, and again after it: another listening socket's loop may
    have taken the last place meanwhile, and then this connection waits, accepted but unread,
    as Kafka's acceptor holds it. Nothing awaits between the second wait and `on_accepted`.
    """
    loop = asyncio.get_running_loop()
    while True:
        if wait_for_room is not None:
            await wait_for_room()
        try:
            accepted, _ = await loop.sock_accept(sock)
        except ConnectionAbortedError:
            continue  # the client gave up before we accepted; nothing to report
        except OSError as exc:
            name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
            if on_error is not None:
                on_error(name)
            delay_s, failures = backoff.failed()
            if failures is not None:
                _log_failure(exc, name, failures, delay_s)
            await asyncio.sleep(delay_s)
            continue
        backoff.succeeded()
        if wait_for_room is not None:
            try:
                await wait_for_room()
            except asyncio.CancelledError:
                accepted.close()
                raise
        on_accepted(accepted)


def _log_failure(exc: OSError, name: str, failures: int, delay_s: float) -> None:
    if exc.errno in _OUT_OF_RESOURCES:
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        reason = "out of file descriptors or socket memory; new clients wait in the listen backlog"
        log.error(
            "event=accept_failed errno=%s open_files_limit=%d failures=%d retry_in_ms=%d "
            "reason=%r",
            name, soft, failures, round(delay_s * 1000), reason,
        )  # fmt: skip
        return
    log.error(
        "event=accept_failed errno=%s failures=%d retry_in_ms=%d error=%r",
        name, failures, round(delay_s * 1000), str(exc),
    )  # fmt: skip
