"""A raw SASL/PLAIN client connection to the gateway, for isolation tests that send exact bytes.

Owns: logging a `tests.e2e.raw_wire.RawConnection` in as a tenant's API key (ApiVersions,
SaslHandshake v1, SaslAuthenticate v2 with `\\0key\\0secret`), reading the gateway's advertised
(api key, version) ranges, and the `Outcome` of one request: its answer frame, or the gateway
closing the connection. Blocking sockets with timeouts; one connection belongs to one thread.
"""

from __future__ import annotations

import contextlib
import socket
from dataclasses import dataclass

from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from tests.e2e.raw_wire import RawConnection, frame
from tests.gateway_stack import Credentials, GatewayStack


@dataclass(frozen=True, slots=True)
class Outcome:
    """The answer's payload (correlation id first), or None when the gateway closed instead."""

    payload: bytes | None

    @property
    def closed(self) -> bool:
        return self.payload is None


def open_raw(stack: GatewayStack, timeout: float = 10.0) -> RawConnection:
    assert stack.gateway is not None
    return RawConnection(stack.gateway.host, stack.gateway.port, timeout=timeout)


def authenticate(connection: RawConnection, credentials: Credentials) -> None:
    """SaslHandshake v1 (PLAIN) then SaslAuthenticate v2; fails the test if refused."""
    handshake = connection.call(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse)
    assert handshake.error_code == 0, f"SaslHandshake error {handshake.error_code}"
    token = b"\0" + credentials.key_id.encode() + b"\0" + credentials.secret.encode()
    answer = connection.call(SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse)
    assert answer.error_code == 0, f"SaslAuthenticate error {answer.error_code}"


def login(stack: GatewayStack, tenant: str) -> RawConnection:
    """A raw connection authenticated as `tenant`'s API key."""
    connection = open_raw(stack)
    try:
        connection.api_versions()
        authenticate(connection, stack.credentials[tenant])
    except BaseException:
        connection.close()
        raise
    return connection


def advertised_ranges(connection: RawConnection) -> dict[int, tuple[int, int]]:
    return {k.api_key: (k.min_version, k.max_version) for k in connection.api_versions().api_keys}


def exchange(connection: RawConnection, payload: bytes, timeout: float) -> Outcome:
    """Send one request (header + body) and wait for its answer or the gateway's close.

    Raises AssertionError when neither happens within `timeout` (a hang)."""
    try:
        connection.send(frame(payload))
        return Outcome(connection.read_frame(timeout))
    except (ConnectionError, BrokenPipeError):
        return Outcome(None)
    except TimeoutError:
        raise AssertionError(f"no answer and no close within {timeout:g}s") from None


def closed_without_answer(connection: RawConnection, payload: bytes, timeout: float) -> bool:
    """Send one frame; True when the gateway closes the connection without answering it."""
    outcome = exchange(connection, payload, timeout)
    if not outcome.closed:
        return False
    return connection.closed_by_peer(timeout)


def shut(connection: RawConnection) -> None:
    with contextlib.suppress(OSError):
        connection.sock.shutdown(socket.SHUT_RDWR)
    connection.close()
