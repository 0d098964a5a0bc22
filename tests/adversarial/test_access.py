"""Attacks on access control (issue 21, attacks #7, #8, #9, #16): access fails closed.

Against the real stack: one broker, `pier gateway` and `pier admin-api` on one SQLite tenant store
(#7–#9), and a gateway whose PostgreSQL connection the test cuts (#16). Each attack is a test:

- #7 a tenant's first ACL, and #8 a new DENY ACL: once the admin API has answered (which it does
  when every live gateway has applied the change, `Pier-Propagation: confirmed`), the very next
  produce the ACL forbids is refused, ten times in a row on ten topics, from a producer whose
  connection was open all along.
- #9 the operator deletes a tenant's last ACL: the tenant's accounts need ACLs (its explicit
  `authorization`), so everything stays refused; nothing falls back to open.
- #16 the gateway loses its store; a key is revoked during the outage; once the store is back the
  revocation is applied: the key's open connection is closed and a new login is refused.

Blocking; pytest's main thread; every process is stopped by PID.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from sqlalchemy import make_url

from infra.admin_api import AdminApiProcess, start_admin_api
from tenancy.store import TenantStore
from tests.e2e.gateway.test_refusals import assert_refused, logged_in
from tests.gateway_stack import OPERATOR, Credentials, GatewayStack
from tests.polling import wait_until
from tests.tenancy_fixtures import postgres_server  # noqa: F401  (a fixture, found by name)

pytestmark = pytest.mark.e2e
TRIES = 10  # "every time": each attack is repeated on fresh topics
DELIVERY_TIMEOUT_S = 15.0
OUTAGE_S = 3.0


@dataclass
class AdminApi:
    process: AdminApiProcess
    token: str

    def call(self, method: str, path: str, body: Any = None) -> requests.Response:
        return requests.request(
            method,
            self.process.url + path,
            json=body,
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=30,
        )


@pytest.fixture(scope="module")
def admin_api(
    gateway_stack: GatewayStack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[AdminApi]:
    with gateway_stack.store() as store:
        token = str(store.create_operator(f"access-{uuid.uuid4().hex[:6]}", actor=OPERATOR))
    log = tmp_path_factory.mktemp("admin-api") / "admin-api.log"
    process = start_admin_api(gateway_stack.db_url, log)
    try:
        yield AdminApi(process, token)
    finally:
        process.stop()


class Writer:
    """A confluent-kafka producer kept open across the attack; `write` answers the delivery's
    error code (0 = written)."""

    def __init__(self, stack: GatewayStack, credentials: Credentials) -> None:
        self.config = _client_config(stack, credentials)
        self.producer = Producer({**self.config, "message.timeout.ms": 10_000, "retries": 0})

    def write(self, topic: str, value: bytes = b"attack") -> int:
        outcome: list[KafkaError | None] = []

        def delivered(error: KafkaError | None, _message: Message) -> None:
            outcome.append(error)

        try:
            self.producer.produce(topic, value, on_delivery=delivered)
        except KafkaException as exc:  # refused before sending: the topic is known unauthorized
            return int(exc.args[0].code())
        self.producer.flush(DELIVERY_TIMEOUT_S)
        assert outcome, f"no delivery report for {topic} within {DELIVERY_TIMEOUT_S:g}s"
        error = outcome[0]
        return 0 if error is None else int(error.code())

    def create_topics(self, names: list[str]) -> dict[str, int]:
        """Each topic's CreateTopics outcome: 0 created, else the Kafka error code."""
        admin = AdminClient(self.config)
        futures = admin.create_topics([NewTopic(name, 1, 1) for name in names])
        codes: dict[str, int] = {}
        for name, future in futures.items():
            try:
                future.result(timeout=30)
                codes[name] = 0
            except Exception as exc:  # a KafkaException carrying the broker's (gateway's) code
                codes[name] = int(exc.args[0].code())
        return codes


def _client_config(stack: GatewayStack, credentials: Credentials) -> dict[str, Any]:
    return {
        "bootstrap.servers": stack.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": credentials.key_id,
        "sasl.password": credentials.secret,
    }


def _acl(principal: str, topic: str, operation: str, permission: str) -> dict[str, str]:
    return {
        "resource_type": "TOPIC",
        "pattern_type": "literal",
        "resource_name": topic,
        "operation": operation,
        "permission": permission,
        "principal": principal,
    }


def _in_force(answer: requests.Response, status: int) -> dict[str, Any]:
    assert answer.status_code == status, answer.text
    assert answer.headers["Pier-Propagation"] == "confirmed", dict(answer.headers)
    return answer.json() if answer.content else {}


REFUSED = KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_attack_7_a_tenants_first_acl_is_in_force_when_the_admin_api_answers(
    gateway_stack: GatewayStack, admin_api: AdminApi
) -> None:
    with gateway_stack.store() as store:  # open: what no ACL names is open to its accounts
        attacker = GatewayStack.add_tenant(store, "first7", name="attacker")
        owner = GatewayStack.add_tenant(store, "first7", name="owner")
        assert store.get_tenant("first7").authorization == "open"
    writer = Writer(gateway_stack, attacker)
    topics = [f"guarded-{index}" for index in range(TRIES)]
    assert writer.create_topics(topics) == dict.fromkeys(topics, 0)
    for index, topic in enumerate(topics):
        assert writer.write(topic) == 0, "open: a topic no ACL names is writable"
        # The tenant's first ACL (then nine more): only the owner may write this topic.
        _in_force(
            admin_api.call(
                "POST",
                "/v1/tenants/first7/acls",
                _acl(f"User:{owner.service_account}", topic, "WRITE", "allow"),
            ),
            201,
        )
        assert writer.write(topic) == REFUSED, f"try {index}: a write the new ACL forbids passed"


def test_attack_8_a_new_deny_acl_is_in_force_when_the_admin_api_answers(
    gateway_stack: GatewayStack, admin_api: AdminApi
) -> None:
    created = admin_api.call(
        "POST",
        "/v1/tenants",
        {"id": "deny8", "display_name": "deny8", "plan": "free", "authorization": "acls"},
    )
    assert created.status_code == 201, created.text
    with gateway_stack.store() as store:
        attacker = GatewayStack.add_tenant(store, "deny8", name="attacker")
    for resource_type in ("TOPIC", "GROUP"):
        everything = {**_acl("User:*", "*", "ALL", "allow"), "resource_type": resource_type}
        _in_force(admin_api.call("POST", "/v1/tenants/deny8/acls", everything), 201)
    writer = Writer(gateway_stack, attacker)
    topics = [f"open-{index}" for index in range(TRIES)]
    assert writer.create_topics(topics) == dict.fromkeys(topics, 0)
    for index, topic in enumerate(topics):
        assert writer.write(topic) == 0
        deny = _acl(f"User:{attacker.service_account}", topic, "WRITE", "deny")
        _in_force(admin_api.call("POST", "/v1/tenants/deny8/acls", deny), 201)
        assert writer.write(topic) == REFUSED, f"try {index}: a write the DENY forbids passed"


def test_attack_9_deleting_a_tenants_last_acl_opens_nothing(
    gateway_stack: GatewayStack, admin_api: AdminApi
) -> None:
    created = admin_api.call(
        "POST", "/v1/tenants", {"id": "last9", "display_name": "last9", "plan": "free"}
    )
    assert created.status_code == 201, created.text
    assert created.json()["authorization"] == "acls", "a new tenant's accounts need ACLs"
    with gateway_stack.store() as store:
        account = GatewayStack.add_tenant(store, "last9", name="app")
    only = _in_force(
        admin_api.call(
            "POST",
            "/v1/tenants/last9/acls",
            _acl(f"User:{account.service_account}", "kept", "ALL", "allow"),
        ),
        201,
    )
    writer = Writer(gateway_stack, account)
    assert writer.create_topics(["kept", "other"]) == {
        "kept": 0,
        "other": KafkaError.TOPIC_AUTHORIZATION_FAILED,
    }
    assert writer.write("kept") == 0
    _in_force(admin_api.call("DELETE", f"/v1/tenants/last9/acls/{only['id']}"), 204)
    assert admin_api.call("GET", "/v1/tenants/last9/acls").json()["items"] == []
    assert admin_api.call("GET", "/v1/tenants/last9").json()["authorization"] == "acls"
    for index in range(TRIES):  # a new connection each time: librdkafka remembers a refusal
        fresh = Writer(gateway_stack, account)
        assert fresh.write("kept") == REFUSED, f"try {index}: the tenant fell back to open"
    assert writer.create_topics(["other", "another"]) == {
        "other": KafkaError.TOPIC_AUTHORIZATION_FAILED,
        "another": KafkaError.TOPIC_AUTHORIZATION_FAILED,
    }


# -- #16: the gateway loses its store --------------------------------------------------------------
class CuttableProxy:
    """A TCP forwarder between the gateway and PostgreSQL that the test can cut: `cut()` closes
    every connection through it and refuses new ones until `restore()`. Threads; blocking."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._cut = False
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._cut:
                client.close()
                continue
            upstream = socket.create_connection(self._target)
            with self._lock:
                self._open |= {client, upstream}
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self._cut = True
        with self._lock:
            ends, self._open = self._open, set()
        for end in ends:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def restore(self) -> None:
        self._cut = False

    def close(self) -> None:
        self.cut()
        self._listener.close()


@pytest.fixture
def postgres_gateway(
    postgres_server: Any,  # noqa: F811  (the fixture imported above)
    tmp_path: Path,
) -> Iterator[tuple[GatewayStack, CuttableProxy, str]]:
    direct = postgres_server.new_database()
    url = make_url(direct)
    proxy = CuttableProxy((url.host or "127.0.0.1", url.port or 5432))
    stack = GatewayStack(tmp_path / "stack")
    stack.db_url = url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    try:
        with stack:
            yield stack, proxy, direct
    finally:
        proxy.close()


def test_attack_16_a_revocation_made_while_the_gateway_lost_its_store_is_applied_after(
    postgres_gateway: tuple[GatewayStack, CuttableProxy, str],
) -> None:
    stack, proxy, direct = postgres_gateway
    victim = stack.credentials["acme"]
    live = logged_in(stack, victim, "PLAIN")
    with contextlib.closing(live):
        proxy.cut()  # the gateway's store connections (pool and LISTEN) are gone
        with TenantStore.open(direct) as store:
            store.revoke_api_key(victim.key_id, actor=OPERATOR)
            revoked_at = store.current_version()
        # The outage lasts long enough for the gateway's feed to fail reads (its LISTEN connection
        # is retried each second, and the feed reads after each retry): the attack's duration.
        time.sleep(OUTAGE_S)
        proxy.restore()
        wait_until(
            lambda: live.closed_by_peer(0.2),
            what="the revoked key's connection closed once the store is back",
            timeout=30,
        )
    assert revoked_at > 0
    assert_refused(stack, victim.key_id, victim.secret, "PLAIN")


def test_a_revocation_and_a_suspension_have_closed_connections_when_the_admin_api_answers(
    gateway_stack: GatewayStack, admin_api: AdminApi
) -> None:
    """The answer waits until every live gateway has applied the change, so the key's (and then
    the suspended tenant's) open connections are already closing when it comes."""
    with gateway_stack.store() as store:
        store.create_tenant(
            display_name="held", plan="free", tenant_id="held", authorization="open", actor=OPERATOR
        )
        revoked = GatewayStack.add_tenant(store, "held", name="revoked")
        kept = GatewayStack.add_tenant(store, "held", name="kept")
    doomed = logged_in(gateway_stack, revoked, "PLAIN")
    survivor = logged_in(gateway_stack, kept, "PLAIN")
    with contextlib.closing(doomed), contextlib.closing(survivor):
        _in_force(admin_api.call("DELETE", f"/v1/api-keys/{revoked.key_id}"), 200)
        assert doomed.closed_by_peer(1.0), "the revoked key's connection outlived the answer"
        _in_force(admin_api.call("POST", "/v1/tenants/held/suspend"), 200)
        assert survivor.closed_by_peer(1.0), "a suspended tenant's connection outlived the answer"
    assert_refused(gateway_stack, kept.key_id, kept.secret, "PLAIN")


def test_attack_8_on_postgresql_a_deny_acl_is_in_force_when_the_admin_api_answers(
    postgres_gateway: tuple[GatewayStack, CuttableProxy, str], tmp_path: Path
) -> None:
    """The same attack where the gateway hears of changes by LISTEN/NOTIFY (its store is
    PostgreSQL, reached through the proxy, which stays up here)."""
    stack, _proxy, direct = postgres_gateway
    with TenantStore.open(direct) as store:
        token = str(store.create_operator("access-pg", actor=OPERATOR))
        attacker = GatewayStack.add_tenant(store, "acme", name="pg-attacker")
    process = start_admin_api(direct, tmp_path / "admin-api.log")
    try:
        admin = AdminApi(process, token)
        writer = Writer(stack, attacker)
        topics = [f"pg-open-{index}" for index in range(TRIES // 2)]
        assert writer.create_topics(topics) == dict.fromkeys(topics, 0)
        for index, topic in enumerate(topics):
            assert writer.write(topic) == 0, "open: a topic no ACL names is writable"
            deny = _acl(f"User:{attacker.service_account}", topic, "WRITE", "deny")
            _in_force(admin.call("POST", "/v1/tenants/acme/acls", deny), 201)
            assert writer.write(topic) == REFUSED, f"try {index}: a write the DENY forbids passed"
    finally:
        process.stop()
