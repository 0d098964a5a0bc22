"""Attacks on the tenant's limits across a fleet (issue 21, item 5): two gateways on one tenant
store and one broker, so a tenant that spreads its connections or its writes over both must still
stay within `max_connections` and `max_storage_bytes` (docs/gateway.md, limits).

- Kafka logins and HTTP consumer instances through both gateways: exactly `max_connections`
  are admitted in total; the rest get the same refusal a single gateway gives.
- A gateway killed with SIGKILL holds its tenant's slots until its heartbeat is older than
  `limit.holding.timeout.ms`; then the other gateway admits them again.
- Producers on both gateways writing past a small `max_storage_bytes`: what both admitted
  together never passes the limit (the bound documented: stored bytes at the newest sample plus
  every gateway's lease stay within the limit; `storage.lease.settle.ms` covers the sample lag).
Real clients (confluent-kafka, `requests`, a raw SASL client), real broker, store and gateways.
"""

from __future__ import annotations

import base64
import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from confluent_kafka import Producer
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from infra.gateway import GatewayProcess, start_gateway
from infra.probes import free_port
from tests.e2e.gateway.http_stack import TenantHttp, http_gateway_stack, wait_http
from tests.e2e.raw_wire import RawConnection
from tests.gateway_stack import OPERATOR, TEST_GATEWAY_SETTINGS, Credentials, GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

HOLDING_TIMEOUT_S = 3.0
SETTINGS = {
    "limit.holding.timeout.ms": str(int(HOLDING_TIMEOUT_S * 1000)),
    "gateway.heartbeat.interval.ms": "500",
    "connection.release.interval.ms": "100",
    "storage.lease.settle.ms": "1000",
    "consumer.instance.timeout.ms": "60000",
}
DEADLINE_S = 30.0
WRITING_S = 8.0  # producers keep writing past the storage limit this long
REFUSED = "tenant connection limit of {} reached"


@dataclass
class Door:
    """One gateway of the fleet, as the helpers see a stack: its process, HTTP API, credentials."""

    gateway: GatewayProcess
    http_url: str
    credentials: dict[str, Credentials]

    def http(self, tenant: str) -> TenantHttp:
        return TenantHttp(cast(GatewayStack, self), self.credentials[tenant])


def _door(stack: GatewayStack, root: Path) -> Door:
    assert stack.broker is not None
    port = free_port()
    gateway = start_gateway(
        root,
        stack.broker.bootstrap,
        stack.db_url,
        node_ids=[stack.broker.node_id],
        properties={**TEST_GATEWAY_SETTINGS, **SETTINGS, "http.port": str(port)},
    )
    door = Door(gateway, f"http://127.0.0.1:{port}", stack.credentials)
    wait_http(cast(GatewayStack, door))
    return door


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Door, Door, GatewayStack]]:
    root = tmp_path_factory.mktemp("adversarial-fleet-limits")
    with http_gateway_stack(root, SETTINGS) as stack:
        wait_http(stack)
        with stack.store() as store:
            for tenant in ("fleet", "disk", "crash"):
                stack.credentials[tenant] = GatewayStack.add_tenant(store, tenant)
        assert stack.gateway is not None
        first = Door(stack.gateway, str(stack.http_url), stack.credentials)  # type: ignore[attr-defined]
        second = _door(stack, root / "second")
        try:
            yield first, second, stack
        finally:
            second.gateway.stop()


def _set_limits(stack: GatewayStack, tenant: str, **limits: int) -> None:
    with stack.store() as store:
        current = store.get_tenant(tenant).limits
        store.update_tenant(tenant, limits=dataclasses.replace(current, **limits), actor=OPERATOR)


def _kafka_login(door: Door, tenant: str, opened: list[RawConnection]) -> str | None:
    """A raw SASL/PLAIN login: None when admitted (the connection stays open in `opened`), else
    the gateway's error message."""
    creds = door.credentials[tenant]
    connection = RawConnection(door.gateway.host, door.gateway.port, timeout=10)
    connection.api_versions()
    handshake = connection.call(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse)
    assert handshake.error_code == 0
    token = b"\0" + creds.key_id.encode() + b"\0" + creds.secret.encode()
    answer = connection.call(SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse)
    if answer.error_code == 0:
        opened.append(connection)
        return None
    connection.close()
    return str(answer.error_message)


def _http_instance(client: TenantHttp, made: list[tuple[TenantHttp, str]]) -> str | None:
    """An HTTP consumer instance: None when made (kept in `made`), else the problem's message."""
    answer = client.post("/consumers/g-fleet", {"format": "binary"})
    if answer.status_code == 200:
        made.append((client, answer.json()["base_uri"][len(client.base) :]))
        return None
    assert answer.status_code == 429, answer.text
    return str(answer.json()["message"])


def _close(opened: list[RawConnection], made: list[tuple[TenantHttp, str]]) -> None:
    for connection in opened:
        connection.close()
    for client, instance in made:
        client.delete(instance)
    opened.clear()
    made.clear()


def test_connections_through_two_gateways_stay_within_the_limit(
    fleet: tuple[Door, Door, GatewayStack],
) -> None:
    first, second, stack = fleet
    limit = 4
    _set_limits(stack, "fleet", max_connections=limit)
    https = {id(door): door.http("fleet") for door in (first, second)}
    opened: list[RawConnection] = []
    made: list[tuple[TenantHttp, str]] = []
    try:
        answers = []
        for door in (first, second) * 4:  # Kafka and HTTP, alternating gateways
            answers.append(_kafka_login(door, "fleet", opened))
            answers.append(_http_instance(https[id(door)], made))
        assert answers.count(None) == limit, answers
        assert len(opened) + len(made) == limit
        assert set(answers) - {None} == {f"Refused: {REFUSED.format(limit)}", REFUSED.format(limit)}
        # The first admitted (a Kafka session on the first gateway) closes: its slot, written
        # back within the release interval, is admitted on the second gateway.
        assert answers[0] is None
        opened.pop(0).close()
        wait_until(
            lambda: _kafka_login(second, "fleet", opened) is None,
            what="the released slot admitted on the other gateway",
            timeout=DEADLINE_S,
        )
        assert _http_instance(https[id(first)], made) == REFUSED.format(limit)
        assert REFUSED.format(limit) in _client_refusal(first, "fleet")  # librdkafka sees it too
    finally:
        _close(opened, made)


def _client_refusal(door: Door, tenant: str) -> str:
    """The error confluent-kafka reports when its login is refused."""
    seen: list[str] = []
    producer = Producer(
        {**_config(door, tenant), "error_cb": lambda error: seen.append(str(error))}
    )
    wait_until(
        lambda: producer.poll(0.2) >= 0 and any("Refused" in error for error in seen),
        what="confluent-kafka's authentication error",
        timeout=DEADLINE_S,
    )
    return next(error for error in seen if "Refused" in error)


def test_a_killed_gateways_slots_expire_with_its_heartbeat(
    fleet: tuple[Door, Door, GatewayStack], tmp_path: Path
) -> None:
    first, _second, stack = fleet
    limit = 3
    _set_limits(stack, "crash", max_connections=limit)
    doomed = _door(stack, tmp_path / "doomed")
    opened: list[RawConnection] = []
    try:
        assert [_kafka_login(doomed, "crash", opened) for _ in range(limit)] == [None] * limit
        assert _kafka_login(first, "crash", opened) == f"Refused: {REFUSED.format(limit)}"
        doomed.gateway.kill()  # SIGKILL: nothing given back
        killed_at = time.monotonic()
        for connection in opened:
            connection.close()
        opened.clear()
        wait_until(
            lambda: _kafka_login(first, "crash", opened) is None,
            what="the killed gateway's slots expired",
            timeout=DEADLINE_S,
        )
        # Within the bound: the holding timeout (plus one heartbeat and the polling step).
        assert time.monotonic() - killed_at <= HOLDING_TIMEOUT_S + 5
        assert [_kafka_login(first, "crash", opened) for _ in range(limit - 1)] == [None] * (
            limit - 1
        )
    finally:
        _close(opened, [])
        doomed.gateway.stop()


def _config(door: Door, tenant: str) -> dict[str, Any]:
    creds = door.credentials[tenant]
    return {
        "bootstrap.servers": door.gateway.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": creds.key_id,
        "sasl.password": creds.secret,
    }


def _producer(door: Door, tenant: str) -> Producer:
    return Producer({**_config(door, tenant), "linger.ms": 5, "message.timeout.ms": 20000})


def test_two_gateways_writing_past_the_storage_limit_admit_at_most_the_limit(
    fleet: tuple[Door, Door, GatewayStack],
) -> None:
    first, second, stack = fleet
    limit, value = 400_000, b"v" * 4_000
    first.http("disk").create_topic("filling", 2)
    _set_limits(stack, "disk", max_storage_bytes=limit)
    producers = [_producer(door, "disk") for door in (first, second)]
    delivered: list[int] = []
    errors: list[str] = []

    def report(err: Any, message: Any) -> None:
        if err is None:
            delivered.append(len(message.value()))
        else:
            errors.append(err.name())

    # Rounds of 10 records on each gateway at once, far faster than one sample a second, for
    # long enough that several samples count what was written (headroom comes back with them).
    end = time.monotonic() + WRITING_S
    while time.monotonic() < end:
        for producer in producers:
            for _ in range(10):
                producer.produce("filling", value, on_delivery=report)
        for producer in producers:
            producer.flush(30)
    assert "POLICY_VIOLATION" in errors, errors[:5]
    assert sum(delivered) <= limit, f"{sum(delivered)} bytes admitted past {limit}"
    assert sum(delivered) >= limit // 2, "the limit refused writes far below it"
    assert set(errors) <= {"POLICY_VIOLATION"}, set(errors)
    # The HTTP API of either gateway charges the same headroom: what is left (at most half the
    # limit, as at least half was delivered) does not take another half.
    big = base64.b64encode(b"h" * (limit // 2)).decode()
    for door in (first, second):
        answer = door.http("disk").produce("filling", {"value": {"type": "BINARY", "data": big}})
        assert answer.status_code == 403, answer.text
        assert "storage limit reached" in answer.json()["message"]


def test_other_tenants_are_admitted_while_these_are_at_their_limits(
    fleet: tuple[Door, Door, GatewayStack],
) -> None:
    """The tenants of the earlier attacks at their limits: another tenant's login and instance
    on either gateway are admitted."""
    first, second, _stack = fleet
    opened: list[RawConnection] = []
    made: list[tuple[TenantHttp, str]] = []
    try:
        for door in (first, second):
            assert _kafka_login(door, "acme", opened) is None
            assert _http_instance(door.http("acme"), made) is None
    finally:
        _close(opened, made)


def test_http_problem_for_a_refused_instance_names_the_limit(
    fleet: tuple[Door, Door, GatewayStack],
) -> None:
    first, _second, stack = fleet
    _set_limits(stack, "bolt", max_connections=1)
    made: list[tuple[TenantHttp, str]] = []
    try:
        client = first.http("bolt")
        assert _http_instance(client, made) is None
        answer = client.post("/consumers/g-fleet", {"format": "binary"})
        assert answer.status_code == 429 and answer.headers.get("Retry-After") == "1"
        assert answer.json()["message"] == REFUSED.format(1)
    finally:
        _close([], made)
