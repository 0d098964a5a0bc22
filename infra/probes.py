"""Readiness probes and free ports for the local stack launcher.

Owns the socket-level checks that decide when a started process is usable:
- a Kafka ApiVersions v0 request, which every Kafka-protocol server must answer (KIP-35), even before
  authentication (KIP-43), so the same probe works for a broker, the gateway, or a real Kafka;
- ZooKeeper's `ruok` four-letter word (answer `imok`);
- an HTTP GET answered 200 (the admin API's `/healthz`).
Blocking calls with short socket timeouts; stateless apart from the set of ports already handed out,
which a lock guards, so every function is safe from any thread.
"""

from __future__ import annotations

import http.client
import os
import random
import socket
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path

from infra.errors import LaunchError

_API_VERSIONS_KEY = 18
_PROBE_CORRELATION_ID = 0x50494552  # "PIER": recognisable in a packet capture
_PROBE_CLIENT_ID = b"pier-probe"
# Request header v1 (api_key, api_version, correlation_id, client_id); ApiVersions v0 has no body.
_PROBE_REQUEST = (
    struct.pack(">hhih", _API_VERSIONS_KEY, 0, _PROBE_CORRELATION_ID, len(_PROBE_CLIENT_ID))
    + _PROBE_CLIENT_ID
)
_API_VERSIONS_V0 = struct.pack(">i", len(_PROBE_REQUEST)) + _PROBE_REQUEST
# An ApiVersions response lists ~70 APIs in well under 1 KiB; anything near this limit is not Kafka.
_MAX_PROBE_RESPONSE = 1 << 20

_handed_out: set[tuple[str, int]] = set()
_handed_out_lock = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on `host` that is free now and was not returned before in this process.

    Ports come from below the kernel's ephemeral range (`ip_local_port_range`): a port picked
    there can be taken by any process's outgoing connection (a broker dialling ZooKeeper or a
    peer) between the pick and the bind, which made launches fail with "Address already in use".
    Remembering what we returned keeps two servers of one test from colliding.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    low, high = listen_ports()
    for _ in range(256):
        port = random.randint(low, high)
        with _handed_out_lock:
            if (host, port) in _handed_out:
                continue
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            try:
                sock.bind((host, port))
            except OSError:
                continue
        with _handed_out_lock:
            if (host, port) not in _handed_out:
                _handed_out.add((host, port))
                return port
    raise LaunchError(f"no free TCP port found on {host} in {low}-{high}")


def listen_ports() -> tuple[int, int]:
    """The ports below the ephemeral range (20000 up to its start), where nothing binds by chance;
    or `PIER_PORT_RANGE=LOW-HIGH` when set (the test harness gives each parallel pytest worker a
    slice of its own, which processes it starts inherit)."""
    configured = os.environ.get(PORT_RANGE_ENV, "").strip()
    if configured:
        low, _, high = configured.partition("-")
        try:
            return int(low), int(high)
        except ValueError:
            raise LaunchError(f"{PORT_RANGE_ENV}={configured!r} is not LOW-HIGH") from None
    try:
        first_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first_ephemeral = 32768
    return (20000, max(first_ephemeral - 1, 20999)) if first_ephemeral > 21000 else (49152, 65535)


PORT_RANGE_ENV = "PIER_PORT_RANGE"


def port_in_use(host: str, port: int) -> bool:
    """True when something already listens on host:port (a connect succeeds)."""
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def kafka_ready(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when host:port answers an ApiVersions v0 request with a frame carrying our correlation id.

    Only the response header is checked: any answer, even an error code, proves the listener parses
    Kafka frames and responds, which is what "ready" means for a client.
    """
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(_API_VERSIONS_V0)
            (size,) = struct.unpack(">i", recv_exactly(sock, 4))
            if not 4 <= size <= _MAX_PROBE_RESPONSE:
                return False
            (correlation_id,) = struct.unpack_from(">i", recv_exactly(sock, size))
            return bool(correlation_id == _PROBE_CORRELATION_ID)
    except OSError:
        return False


def zookeeper_ready(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when ZooKeeper answers the `ruok` four-letter word with `imok` (it must be whitelisted)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(b"ruok")
            return recv_exactly(sock, 4) == b"imok"
    except OSError:
        return False


def http_ok(host: str, port: int, path: str, timeout: float = 2.0) -> bool:
    """True when `GET path` on host:port answers status 200."""
    connection = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        connection.request("GET", path)
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def poll_until(
    ready: Callable[[], bool],
    *,
    timeout: float,
    exited: Callable[[], bool],
    interval: float = 0.05,
) -> bool:
    """Poll `ready` until it holds (True) or `exited` holds or the deadline passes (False)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if exited():
            return False
        if ready():
            return not exited()
        time.sleep(interval)
    return False


def recv_exactly(sock: socket.socket, count: int) -> bytes:
    """Exactly `count` bytes from a blocking socket; ConnectionError if it closes first."""
    chunks = bytearray()
    while len(chunks) < count:
        chunk = sock.recv(count - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed by peer during probe")
        chunks += chunk
    return bytes(chunks)
