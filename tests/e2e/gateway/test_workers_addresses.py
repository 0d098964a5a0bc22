"""Per-address defences hold across the workers of one gateway (issue 24 item 1; docs/gateway-options.md,
"Workers"): a real `pier gateway --workers 2` whose workers share one per-address table
(`gateway.auth.address_table`), attacked from loopback source addresses of its own.

- `max.connections.per.ip` = 5: 20 raw connections from one address (the kernel spreads them
  over both workers) leave exactly 5 open; per worker it would leave up to 10.
- Login backoff with one free failure and a 60 s wait: after one failed PLAIN login from an
  address, 10 logins with a valid, never-verified key from the same address, each on a new
  connection (so on either worker), are all refused; per worker, the ones reaching the other
  worker would succeed. The same key logs in from another address (the refusal is the address's).
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from infra.probes import free_port
from tests.adversarial.test_connections import closed
from tests.adversarial.test_login import From, fresh_tenant
from tests.gateway_stack import Credentials, GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
PER_IP = 5
ATTEMPTS = 10
CROWD = "127.0.0.50"
GUESSER = "127.0.0.60"
ELSEWHERE = "127.0.0.61"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    settings = {
        "workers": "2",
        "max.connections.per.ip": str(PER_IP),
        "sasl.failure.backoff.free.failures": "1",
        "sasl.failure.backoff.ms": "60000",
        "failed.login.connection.rate": "1000",
        "authentication.timeout.ms": "60000",
    }
    root = Path(tmp_path_factory.mktemp("worker-addresses"))
    with GatewayStack(root, gateway_settings=settings, gateway_metrics_port=free_port()) as up:
        assert up.gateway is not None
        log = up.gateway.log_path
        wait_until(
            lambda: "pier gateway ready" in log.read_text(errors="replace"),
            what="every worker ready",
            timeout=60,
        )
        yield up


def test_connections_per_address_are_capped_across_workers(stack: GatewayStack) -> None:
    assert stack.gateway is not None
    address = (stack.gateway.host, stack.gateway.port)
    sockets = [
        socket.create_connection(address, 5, source_address=(CROWD, 0)) for _ in range(4 * PER_IP)
    ]
    try:
        wait_until(
            lambda: sum(map(closed, sockets)) >= 3 * PER_IP,
            what=f"all but {PER_IP} of {len(sockets)} connections refused",
            timeout=20,
        )
        assert sum(not closed(sock) for sock in sockets) == PER_IP
    finally:
        for sock in sockets:
            sock.close()


def _login(stack: GatewayStack, source: str, key: Credentials, secret: str) -> bool:
    """A PLAIN login on a new connection from `source`: whether it succeeded (a connection the
    gateway closes before answering counts as refused)."""
    connection = From(stack, source, timeout=10.0)
    try:
        handshake = connection.call(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse)
        assert handshake.error_code == 0
        token = b"\0" + key.key_id.encode() + b"\0" + secret.encode()
        answer = connection.call(
            SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse
        )
        return bool(answer.error_code == 0)
    except (ConnectionError, EOFError):
        return False
    finally:
        connection.close()


def test_login_backoff_of_an_address_holds_on_every_worker(stack: GatewayStack) -> None:
    guessed, owner = fresh_tenant(stack, accounts=2)
    assert not _login(stack, GUESSER, guessed, "not-the-secret")
    outcomes = [_login(stack, GUESSER, owner, owner.secret) for _ in range(ATTEMPTS)]
    assert not any(outcomes), f"logins from a backing-off address let through: {outcomes}"
    assert _login(stack, ELSEWHERE, owner, owner.secret)
