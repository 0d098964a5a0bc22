"""Binding the listener's sockets and accepting on them without ever spinning on EMFILE.

Owns: `bind_listening_sockets`, `accept_forever` and `AcceptBackoff`. asyncio's own accept loop
(3.11) answers an EMFILE by logging a traceback and scheduling a retry for *each* of up to
`backlog` attempts per wake-up, so at the open-file limit retries multiply, the loop burns a core
and the log grows by hundreds of MB while nothing is accepted (issue 13). Here an accept that
fails backs off — 10 ms doubling to 1 s, reset by the next success — and the failure is logged at
most once per `log_interval_s`, with how many failures that line stands for. Clients that connect
meanwhile wait in the kernel's listen backlog and are accepted once descriptors are free again
(a topic deleted, connections closed). Runs on the event loop; `AcceptBackoff` is pure.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import resource
import socket
from collections.abc import Callable

log = logging.getLogger("pier.server")
LISTEN_BACKLOG = 100  # asyncio.start_server's default
FIRST_DELAY_S = 0.01
MAX_DELAY_S = 1.0
LOG_INTERVAL_S = 10.0
_OUT_OF_RESOURCES = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


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
        self._clock = clock
        self._first_s = first_s
        self._max_s = max_s
        self._log_interval_s = log_interval_s
        self._delay_s = 0.0
        self._last_log: float | None = None
        self.unlogged = 0  # failures since the last log line

    def failed(self) -> tuple[float, int | None]:
        """(seconds to wait, failures this log line stands for — None: stay silent)."""
        self._delay_s = min(self._max_s, max(self._first_s, self._delay_s * 2))
        self.unlogged += 1
        now = self._clock()
        if self._last_log is not None and now - self._last_log < self._log_interval_s:
            return self._delay_s, None
        self._last_log = now
        failures, self.unlogged = self.unlogged, 0
        return self._delay_s, failures

    def succeeded(self) -> None:
        self._delay_s = 0.0


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
) -> None:
    """Accept until cancelled; hand each connection to `on_accepted` (which must not block)."""
    loop = asyncio.get_running_loop()
    while True:
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
