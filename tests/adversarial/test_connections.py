"""Attacks on the gateway's memory and descriptors, before and after login (issue 21, #3 and #4).

A real gateway in front of a real broker, with settings small enough for CI: 2 s to log in, at
most 8 connections not logged in sharing 2 MiB of frame bytes, 16 connections per address (every
client here is 127.0.0.1), a partial frame stalled for 1 s closes its connection, and each tenant
may hold 16 MiB of requests not yet answered. The attackers are raw sockets; the well-behaved
tenant `bolt` produces with confluent-kafka. Memory is the gateway process's VmRSS.
"""

from __future__ import annotations

import dataclasses
import select
import socket
import struct
import threading
import uuid
from collections.abc import Callable, Iterator
from functools import partial

import pytest
from confluent_kafka import Producer

from infra.probes import free_port
from tenancy.domain import DEFAULT_LIMITS
from tests.adversarial.gateway_probes import gateway_metric, rss_bytes
from tests.e2e.gateway.sasl_wire import login
from tests.e2e.raw_wire import RawConnection
from tests.gateway_stack import OPERATOR, GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

KiB, MiB = 1024, 1024 * 1024
PER_IP = 16
UNAUTHENTICATED = 8
UNAUTHENTICATED_BYTES = 2 * MiB  # four 512 KiB frames
TENANT_BUDGET = 16 * MiB
SETTINGS = {
    "authentication.timeout.ms": "2000",
    "max.unauthenticated.connections": str(UNAUTHENTICATED),
    "unauthenticated.buffer.max.bytes": str(UNAUTHENTICATED_BYTES),
    "max.connections.per.ip": str(PER_IP),
    "frame.read.timeout.ms": "1000",
    "queued.max.request.bytes": str(TENANT_BUDGET),
}
SLACK = 24 * MiB  # the interpreter's own growth under load (allocator arenas, socket buffers)
_INT32 = struct.Struct(">i")


@pytest.fixture(scope="module")
def gateway_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    root = tmp_path_factory.mktemp("connections")
    stack = GatewayStack(
        root, gateway_settings=SETTINGS, gateway_metrics_port=free_port("127.0.0.1")
    )
    with stack:
        with stack.store() as store:  # acme may send requests up to the most a tenant may
            limits = dataclasses.replace(DEFAULT_LIMITS, max_request_bytes=100 * MiB)
            store.update_tenant("acme", limits=limits, actor=OPERATOR)
        yield stack


# -- helpers -----------------------------------------------------------------------------------
def metric(stack: GatewayStack, name: str, **labels: str) -> float:
    return gateway_metric(stack, name, **labels)


def open_connections(stack: GatewayStack) -> float:
    """Client connections the gateway holds: not yet logged in, plus every tenant's."""
    return gateway_metric(stack, "pier_gateway_unauthenticated_connections") + gateway_metric(
        stack, "pier_gateway_connections"
    )


@pytest.fixture(autouse=True)
def _quiet(gateway_stack: GatewayStack) -> None:
    """Each test starts with no client connection left from another (their counts are exact)."""
    wait_until(
        lambda: open_connections(gateway_stack) == 0,
        what="no client connection left from earlier tests",
        timeout=15,
    )


def closures(stack: GatewayStack, reason: str) -> float:
    return metric(stack, "pier_gateway_connection_close_total", reason=reason)


def closed(sock: socket.socket) -> bool:
    """The gateway has closed this socket (EOF or reset); answers are drained and dropped. Never
    blocks (another thread may be sending on the socket, with its own timeout)."""
    ready = select.poll()  # not select(): this process may hold descriptors past FD_SETSIZE
    ready.register(sock, select.POLLIN)
    try:
        while ready.poll(0):
            if not sock.recv(65536):
                return True
    except ConnectionError:
        return True
    return False


def raw_socket(stack: GatewayStack) -> socket.socket:
    assert stack.gateway is not None
    return socket.create_connection((stack.gateway.host, stack.gateway.port), timeout=5)


def send_partial(sock: socket.socket, size: int, body: int, deadline_s: float = 20.0) -> None:
    """The prefix of a `size`-byte frame and `body` bytes of it, until the gateway stops taking
    them or closes (then the rest is dropped)."""
    sock.settimeout(deadline_s)
    try:
        sock.sendall(_INT32.pack(size))
        chunk = b"\0" * (256 * KiB)
        left = body
        while left > 0:
            part = chunk[: min(left, len(chunk))]
            sock.sendall(part)
            left -= len(part)
    except OSError:
        return


def in_background(jobs: list[Callable[[], None]]) -> list[threading.Thread]:
    threads = [threading.Thread(target=job, daemon=True) for job in jobs]
    for thread in threads:
        thread.start()
    return threads


def peak_while(stack: GatewayStack, until: Callable[[], bool], timeout: float) -> int:
    """The gateway's highest RSS, sampled until `until()` holds (fails on the deadline)."""
    peak = rss_bytes(stack)

    def done() -> bool:
        nonlocal peak
        peak = max(peak, rss_bytes(stack))
        return until()

    wait_until(done, what="the attack to end", timeout=timeout, interval=0.05)
    return peak


def delivered(stack: GatewayStack, tenant: str, topic: str) -> str | None:
    """Produce one record as `tenant`; None when it was written, else the error's name."""
    settings = stack.client_config(tenant)
    producer = Producer({**settings, "message.timeout.ms": 20000})
    outcome: list[str | None] = []
    producer.produce(
        topic,
        b"still served",
        on_delivery=lambda err, _m: outcome.append(None if err is None else err.name()),
    )
    producer.flush(30)
    return outcome[0] if outcome else "no delivery report"


# -- attacks -----------------------------------------------------------------------------------
def test_attack_3_unauthenticated_partial_frames_are_bounded(gateway_stack: GatewayStack) -> None:
    stack = gateway_stack
    before = rss_bytes(stack)
    full, crowded = (
        closures(stack, "unauthenticated_buffer_full"),
        closures(stack, "max_unauthenticated_connections"),
    )
    # Six partial 512 KiB frames: four fill the 2 MiB shared before login, the others are
    # closed at once. Then thirty silent connections: past the eight allowed, closed at once.
    senders = [raw_socket(stack) for _ in range(6)]
    silent: list[socket.socket] = []
    try:
        threads = in_background(
            [partial(send_partial, s, 512 * KiB, 512 * KiB - 1, 5.0) for s in senders]
        )
        wait_until(
            lambda: closures(stack, "unauthenticated_buffer_full") > full,
            what="a frame over the pre-login buffer closed",
            timeout=5,
        )
        silent = [raw_socket(stack) for _ in range(30)]
        # The rest are closed when their second to log in runs out: none is left open.
        peak = peak_while(stack, lambda: all(closed(s) for s in senders + silent), timeout=15)
        for thread in threads:
            thread.join(timeout=10)
    finally:
        for sock in senders + silent:
            sock.close()
    assert peak - before < UNAUTHENTICATED_BYTES + SLACK
    assert closures(stack, "max_unauthenticated_connections") - crowded >= 30 - UNAUTHENTICATED
    assert closures(stack, "authentication_timeout") >= 1
    assert metric(stack, "pier_gateway_unauthenticated_buffered_bytes") == 0


def test_an_idle_connection_that_never_logs_in_is_closed_after_the_deadline(
    gateway_stack: GatewayStack,
) -> None:
    stack = gateway_stack
    counted = closures(stack, "authentication_timeout")
    assert stack.gateway is not None
    with RawConnection(stack.gateway.host, stack.gateway.port) as c:
        c.api_versions()  # served before login, but it does not stop the clock
        wait_until(lambda: closed(c.sock), what="the unauthenticated connection closed", timeout=10)
    assert closures(stack, "authentication_timeout") == counted + 1
    assert stack.gateway is not None
    log = stack.gateway.log_path.read_text()
    assert "event=connection_closed reason=authentication_timeout" in log


def test_a_stalled_partial_frame_after_login_is_closed(gateway_stack: GatewayStack) -> None:
    stack = gateway_stack
    counted = closures(stack, "frame_read_timeout")
    connection = login(stack, "acme")
    try:
        connection.send(_INT32.pack(1000) + b"\0" * 400)  # 400 of 1000 bytes, then nothing
        wait_until(lambda: closed(connection.sock), what="the stalled frame closed", timeout=10)
    finally:
        connection.close()
    assert closures(stack, "frame_read_timeout") == counted + 1
    assert metric(stack, "pier_gateway_queued_request_bytes", tenant="acme") == 0


def test_the_per_address_cap_refuses_the_next_connection(gateway_stack: GatewayStack) -> None:
    stack = gateway_stack
    counted = closures(stack, "max_connections_per_ip")
    held = [login(stack, "acme") for _ in range(PER_IP)]
    try:
        extra = raw_socket(stack)
        wait_until(lambda: closed(extra), what="the connection over the cap closed", timeout=5)
        extra.close()
        assert closures(stack, "max_connections_per_ip") == counted + 1
        held.pop().close()
        wait_until(lambda: _served(stack), what="a connection served once one left", timeout=10)
    finally:
        for connection in held:
            connection.close()


def _served(stack: GatewayStack) -> bool:
    assert stack.gateway is not None
    try:
        with RawConnection(stack.gateway.host, stack.gateway.port) as c:
            c.api_versions()
    except (OSError, AssertionError):
        return False
    return True


def test_attack_4_authenticated_partial_frames_are_bounded(gateway_stack: GatewayStack) -> None:
    stack = gateway_stack
    topic_name = f"bolt-during-attack-4-{uuid.uuid4().hex[:8]}"
    assert delivered(stack, "bolt", topic_name) is None  # bolt's connections and topic exist
    # A 100 MiB frame is over what the tenant's budget allows: refused before its body is read.
    counted = closures(stack, "frame_too_large")
    big = login(stack, "acme")
    try:
        send_partial(big.sock, 100 * MiB, 1 * MiB, 5.0)
        wait_until(lambda: closed(big.sock), what="the 100 MiB frame refused", timeout=5)
    finally:
        big.close()
    assert closures(stack, "frame_too_large") == counted + 1

    # Five frames the tenant may send (15 MiB), each stalled after 12 MiB: one at a time fits
    # the tenant's 16 MiB budget; the others are not read until it drains.
    before = rss_bytes(stack)
    attackers = [login(stack, "acme") for _ in range(5)]
    try:
        threads = in_background(
            [partial(send_partial, c.sock, 15 * MiB, 12 * MiB) for c in attackers]
        )
        wait_until(
            lambda: metric(stack, "pier_gateway_muted_connections", tenant="acme") >= 1,
            what="acme's connections muted by its budget",
            timeout=10,
        )
        assert metric(stack, "pier_gateway_queued_request_bytes", tenant="acme") <= TENANT_BUDGET
        assert delivered(stack, "bolt", topic_name) is None  # another tenant is still served
        peak = peak_while(stack, lambda: all(closed(c.sock) for c in attackers), timeout=60)
        for thread in threads:
            thread.join(timeout=20)
    finally:
        for connection in attackers:
            connection.close()
    assert peak - before < TENANT_BUDGET + SLACK
    wait_until(
        lambda: metric(stack, "pier_gateway_queued_request_bytes", tenant="acme") == 0,
        what="acme's budget given back",
        timeout=10,
    )
