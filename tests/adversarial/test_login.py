"""Attacks on logging in (issue 21, attacks 5 and 6), against the real gateway.

Attack 5: wrong PLAIN secrets for a valid key id, as fast as a few threads can send them (each
guess on a new connection: SaslHandshake, then SaslAuthenticate written without waiting for the
delayed answer, then close). The defences: the guesses back off per source address (the gateway's
own counters show that almost none reaches a scrypt), the scrypts run on bounded threads off the
event loop, and another tenant's logins (cold and warm) and the attacked key's owner, logging in
from other addresses, each succeed within 2 s while the flood goes on. Attack 6: the attacked key is
revoked (through the tenant store, as the admin API does) during the flood: its open connection is
closed, and the writes of its producer refused, within 1 s of the revoke's answer. The tenant HTTP
API's Basic credentials go through the same checks: wrong secrets there back off the same way.

One machine plays several source addresses through Linux's loopback (127.0.0.0/8): each test's
attacker, victim and owner use addresses of their own, so backoff state never leaks between
tests. The module has its own `GatewayStack`, with the metrics endpoint on and the default backoff
(other test stacks raise the free failures: all their clients share 127.0.0.1). Blocking; the attacker
runs in threads bounded in count and time.
"""

from __future__ import annotations

import base64
import http.client
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from infra.probes import free_port
from tests.adversarial.gateway_probes import gateway_metric
from tests.e2e.raw_wire import RawConnection, frame, request_bytes
from tests.gateway_stack import OPERATOR, Credentials, GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

ATTACK_THREADS = 6
ATTACK_MAX_S = 60.0  # a bound on the flood whatever happens to the test
LOGIN_WITHIN_S = 2.0  # each victim login, while the flood runs
REVOKED_WITHIN_S = 1.0  # the bound, from the revoke's answer
FLOOD_UNDER_WAY = 200  # failed guesses before the victims start
FREE_FAILURES = 5  # the gateway's default `sasl.failure.backoff.free.failures` (tests raise it)


@pytest.fixture(scope="module")
def http_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, http_port: int) -> Iterator[GatewayStack]:
    with GatewayStack(
        Path(tmp_path_factory.mktemp("logins")),
        gateway_settings={
            "sasl.failure.backoff.free.failures": str(FREE_FAILURES),
            "http.port": str(http_port),
        },
        gateway_metrics_port=free_port(),
    ) as started:
        yield started


def fresh_tenant(stack: GatewayStack, accounts: int = 1) -> list[Credentials]:
    tenant = f"l{uuid.uuid4().hex[:9]}"
    with stack.store() as store:
        return [GatewayStack.add_tenant(store, tenant, name=f"sa{i}") for i in range(accounts)]


class From(RawConnection):
    """A raw connection to the gateway from a given loopback source address."""

    def __init__(self, stack: GatewayStack, source: str, timeout: float = LOGIN_WITHIN_S) -> None:
        assert stack.gateway is not None
        address = (stack.gateway.host, stack.gateway.port)
        self.sock = socket.create_connection(address, timeout, source_address=(source, 0))
        self._next_correlation_id = 1


def plain_login(stack: GatewayStack, source: str, key: Credentials) -> From:
    """A PLAIN login from `source`; each step must answer within LOGIN_WITHIN_S (a socket
    timeout fails the test), and the login must succeed."""
    connection = From(stack, source)
    try:
        handshake = connection.call(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse)
        assert handshake.error_code == 0
        token = b"\0" + key.key_id.encode() + b"\0" + key.secret.encode()
        answer = connection.call(
            SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse
        )
        assert answer.error_code == 0, f"login from {source} refused: {answer.error_message}"
    except BaseException:
        connection.close()
        raise
    return connection


@dataclass
class Flood:
    """Threads sending wrong PLAIN secrets for one key id from one source address."""

    stack: GatewayStack
    key_id: str
    source: str
    sent: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def guess(self) -> None:
        connection = From(self.stack, self.source, timeout=5.0)
        with connection:
            handshake = request_bytes(SaslHandshakeRequest(mechanism="PLAIN"), 1)
            token = f"\0{self.key_id}\0{uuid.uuid4().hex}".encode()
            authenticate = request_bytes(SaslAuthenticateRequest(auth_bytes=token), 2)
            connection.send(frame(handshake) + frame(authenticate))
            connection.read_frame(5.0)  # the handshake's answer: both frames were read
        with self.lock:
            self.sent += 1

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.guess()
            except OSError:  # refused or reset under load: pace, then guess on
                self.stop.wait(0.01)


@contextmanager
def flooding(stack: GatewayStack, key_id: str, source: str) -> Iterator[Flood]:
    """The flood runs inside the block (and at least until the gateway has failed 200 of its
    guesses: the attack is in full swing); it is stopped and joined on the way out."""
    flood = Flood(stack, key_id, source)
    failed_before = gateway_metric(stack, "pier_gateway_authentication_failures_total")
    threads = [threading.Thread(target=flood.run, daemon=True) for _ in range(ATTACK_THREADS)]
    bound = threading.Timer(ATTACK_MAX_S, flood.stop.set)
    bound.start()
    for thread in threads:
        thread.start()
    try:
        wait_until(
            lambda: (
                gateway_metric(stack, "pier_gateway_authentication_failures_total")
                >= failed_before + FLOOD_UNDER_WAY
            ),
            what="the flood under way",
        )
        yield flood
    finally:
        flood.stop.set()
        bound.cancel()
        for thread in threads:
            thread.join(10)


def test_attack_5_wrong_secrets_at_full_speed_starve_no_one(stack: GatewayStack) -> None:
    [attacked] = fresh_tenant(stack)
    victims = fresh_tenant(stack, accounts=6)
    cold, warm = victims[:5], victims[5]
    checks_before = gateway_metric(stack, "pier_gateway_secret_checks_total", outcome="mismatch")
    throttled_before = gateway_metric(stack, "pier_gateway_authentication_throttled_total")
    with flooding(stack, attacked.key_id, "127.0.5.1") as flood:
        for key in [*cold, warm, *[warm] * 14]:  # 5 cold (a scrypt each), then 15 warm
            plain_login(stack, "127.0.5.2", key).close()
        plain_login(stack, "127.0.5.3", attacked).close()  # the attacked key's owner, cold
        sent_by_now = flood.sent
    checks = gateway_metric(stack, "pier_gateway_secret_checks_total", outcome="mismatch")
    throttled = gateway_metric(stack, "pier_gateway_authentication_throttled_total")
    assert sent_by_now >= 100, f"the flood sent only {sent_by_now} guesses"
    wrong_checked = checks - checks_before
    # The free failures, then one check per backoff period (1, 2, 4, 8 ... s): a handful at most.
    assert wrong_checked <= FREE_FAILURES + 6, f"{wrong_checked} wrong secrets reached a scrypt"
    assert throttled - throttled_before >= 10 * max(1.0, wrong_checked), (
        "the guesses were not refused before the check"
    )


@dataclass
class Writer:
    """A producer that keeps writing, each value its send time; the deliveries it saw."""

    producer: Producer
    topic: str
    delivered_sent_at: list[float] = field(default_factory=list)
    errors: list[KafkaError] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def on_delivery(self, error: KafkaError | None, message: Message) -> None:
        value = message.value()
        if error is None and value is not None:
            self.delivered_sent_at.append(float(value.decode()))

    def run(self) -> None:
        while not self.stop.is_set():
            with suppress(BufferError):  # the queue is full while the connection is gone
                self.producer.produce(
                    self.topic, str(time.monotonic()).encode(), on_delivery=self.on_delivery
                )
            self.producer.poll(0.005)


def writer_for(stack: GatewayStack, key: Credentials, topic: str) -> Writer:
    writer = Writer(
        Producer(
            {
                **stack.client_config("acme", "PLAIN"),  # overridden by the key below
                "sasl.username": key.key_id,
                "sasl.password": key.secret,
                "linger.ms": 1,
                "message.timeout.ms": 10_000,
            }
        ),
        topic,
    )
    writer.producer.produce(topic, str(time.monotonic()).encode(), on_delivery=writer.on_delivery)
    assert writer.producer.flush(30) == 0 and writer.delivered_sent_at, "no first write"
    return writer


def test_attack_6_a_key_revoked_during_the_flood_is_cut_off_within_1s(stack: GatewayStack) -> None:
    revoked, other = fresh_tenant(stack, accounts=2)
    writer = writer_for(stack, revoked, f"revoked-{uuid.uuid4().hex[:8]}")
    thread = threading.Thread(target=writer.run, daemon=True)
    thread.start()
    live = plain_login(stack, "127.0.6.3", revoked)
    survivor = plain_login(stack, "127.0.6.4", other)
    try:
        with flooding(stack, revoked.key_id, "127.0.6.1"):
            with stack.store() as store:
                store.revoke_api_key(revoked.key_id, actor=OPERATOR)
            answered = time.monotonic()
            assert live.closed_by_peer(REVOKED_WITHIN_S), "the revoked key's connection is open"
            # Writes sent more than 1 s after the answer must all be refused: write on for 1.5 s.
            time.sleep(max(0.0, answered + REVOKED_WITHIN_S + 1.5 - time.monotonic()))
            writer.stop.set()
            thread.join(10)
        writer.producer.purge()
        writer.producer.poll(0.5)
        late = [sent for sent in writer.delivered_sent_at if sent > answered + REVOKED_WITHIN_S]
        assert not late, f"{len(late)} writes sent over 1 s after the revoke were accepted"
        assert not survivor.closed_by_peer(0.2), "another key's connection was closed"
    finally:
        writer.stop.set()
        thread.join(10)
        live.close()
        survivor.close()


def http_status(port: int, source: str, key_id: str, secret: str) -> int:
    """GET /v3/clusters on the gateway's HTTP API with HTTP Basic from `source`: the status."""
    connection = http.client.HTTPConnection(
        "127.0.0.1", port, timeout=LOGIN_WITHIN_S, source_address=(source, 0)
    )
    try:
        basic = base64.b64encode(f"{key_id}:{secret}".encode()).decode()
        connection.request("GET", "/v3/clusters", headers={"Authorization": f"Basic {basic}"})
        return connection.getresponse().status
    finally:
        connection.close()


def test_attack_5_over_http_basic_wrong_secrets_back_off_too(
    stack: GatewayStack, http_port: int
) -> None:
    [attacked] = fresh_tenant(stack)
    checks_before = gateway_metric(stack, "pier_gateway_secret_checks_total", outcome="mismatch")
    throttled_before = gateway_metric(stack, "pier_gateway_authentication_throttled_total")
    for _ in range(30):
        assert http_status(http_port, "127.0.7.1", attacked.key_id, uuid.uuid4().hex) == 401
    checks = gateway_metric(stack, "pier_gateway_secret_checks_total", outcome="mismatch")
    throttled = gateway_metric(stack, "pier_gateway_authentication_throttled_total")
    assert checks - checks_before <= FREE_FAILURES + 2, "wrong Basic secrets reached a scrypt"
    assert throttled - throttled_before >= 20, "wrong Basic secrets were not refused unchecked"
    assert http_status(http_port, "127.0.7.2", attacked.key_id, attacked.secret) == 200, (
        "the key's owner, from its own address, is not locked out"
    )
