"""Tenant limits through the gateway: connections, partitions, request size and storage.

Each limit is set on tenant `acme` in the store (the gateway follows the change feed), then hit
with a real client or a raw SASL connection; the error codes and messages are Kafka's
(SASL_AUTHENTICATION_FAILED with the reason, POLICY_VIOLATION, MESSAGE_TOO_LARGE), and the
other tenant is untouched.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # type: ignore[attr-defined]
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from tests.conftest import remember_log
from tests.e2e.gateway.sasl_wire import login, open_raw
from tests.gateway_stack import OPERATOR, GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

POLICY_VIOLATION = 44
SASL_AUTHENTICATION_FAILED = 58
DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with GatewayStack(tmp_path_factory.mktemp("gateway-limits")) as stack:
        yield stack


@pytest.fixture(autouse=True)
def _logs(stack: GatewayStack, request: pytest.FixtureRequest) -> Iterator[None]:
    assert stack.gateway is not None
    remember_log(request.node, "gateway", stack.gateway.log_path)
    yield
    set_limits(stack, "acme")  # back to the defaults for the next test


def set_limits(stack: GatewayStack, tenant: str, **limits: int | None) -> None:
    with stack.store() as store:
        current = store.get_tenant(tenant).limits
        defaults = (
            dataclasses.replace(current, **limits)
            if limits
            else type(current)(
                max_partitions=100,
                max_storage_bytes=10 * 2**30,
                max_connections=100,
                max_request_bytes=2**20,
            )
        )
        store.update_tenant(tenant, limits=defaults, actor=OPERATOR)


def sasl_error(stack: GatewayStack, tenant: str) -> tuple[int, str | None]:
    """A raw PLAIN login of `tenant`'s key: (error code, message)."""
    creds = stack.credentials[tenant]
    connection = open_raw(stack)
    try:
        connection.api_versions()
        handshake = connection.call(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse)
        assert handshake.error_code == 0
        token = b"\0" + creds.key_id.encode() + b"\0" + creds.secret.encode()
        answer = connection.call(
            SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse
        )
        return int(answer.error_code), answer.error_message
    finally:
        connection.close()


def test_connection_limit_refuses_the_next_login_with_the_reason(stack: GatewayStack) -> None:
    set_limits(stack, "acme", max_connections=2)
    held = [login(stack, "acme"), login(stack, "acme")]
    try:
        wait_until(
            lambda: sasl_error(stack, "acme")[0] == SASL_AUTHENTICATION_FAILED,
            what="a login refused past the connection limit",
            timeout=DEADLINE_S,
        )
        code, message = sasl_error(stack, "acme")
        assert code == SASL_AUTHENTICATION_FAILED
        assert message is not None and "connection limit of 2" in message
        assert sasl_error(stack, "bolt") == (0, None)  # the other tenant is not limited by it
    finally:
        for connection in held:
            connection.close()
    wait_until(
        lambda: sasl_error(stack, "acme")[0] == 0,
        what="a freed connection slot",
        timeout=DEADLINE_S,
    )


def test_partition_limit_answers_policy_violation_with_a_message(
    stack: GatewayStack, topic_name: str
) -> None:
    set_limits(stack, "acme", max_partitions=4)
    admin = AdminClient(stack.client_config("acme"))

    def refused() -> bool:
        probe = f"{topic_name}-probe-{time.monotonic_ns()}"
        # validate_only: a probe sent before the new limit arrives creates nothing
        future = admin.create_topics([NewTopic(probe, num_partitions=5)], validate_only=True)[probe]
        try:
            future.result(30)
        except KafkaException as exc:
            error = exc.args[0]
            assert error.code() == POLICY_VIOLATION, error
            assert "partition limit 4" in error.str(), error.str()
            return True
        return False  # accepted: the gateway has not seen the new limit yet

    wait_until(refused, what="the partition limit", timeout=DEADLINE_S, interval=0.1)
    admin.create_topics([NewTopic(topic_name, num_partitions=3)])[topic_name].result(30)
    grow = admin.create_partitions([NewPartitions(topic_name, 6)])[topic_name]
    with pytest.raises(KafkaException) as raised:
        grow.result(30)
    assert raised.value.args[0].code() == POLICY_VIOLATION
    topics = admin.list_topics(timeout=30).topics
    assert len(topics[topic_name].partitions) == 3


def deliver(stack: GatewayStack, topic: str, value: bytes) -> str | None:
    """Produce one record through the gateway; the delivery error's name, or None."""
    producer = Producer(
        stack.client_config(
            "acme", "PLAIN", **{"message.timeout.ms": 20000, "message.max.bytes": 4_000_000}
        )
    )
    outcome: list[str | None] = []
    producer.produce(
        topic,
        value,
        on_delivery=lambda err, _m: outcome.append(None if err is None else err.name()),
    )
    producer.flush(30)
    assert outcome, "no delivery report"
    return outcome[0]


def test_request_size_limit_answers_message_too_large(stack: GatewayStack, topic_name: str) -> None:
    wait_until(
        lambda: deliver(stack, topic_name, b"x" * 1000) is None,
        what="the default limits",
        timeout=DEADLINE_S,
    )
    set_limits(stack, "acme", max_request_bytes=100_000)
    wait_until(
        lambda: deliver(stack, topic_name, b"y" * 200_000) == "MSG_SIZE_TOO_LARGE",
        what="MESSAGE_TOO_LARGE past the tenant's request limit",
        timeout=DEADLINE_S,
    )
    assert deliver(stack, topic_name, b"z" * 1000) is None  # small requests still go


def test_storage_cap_refuses_produce_once_the_sampled_bytes_reach_it(
    stack: GatewayStack, topic_name: str
) -> None:
    wait_until(
        lambda: deliver(stack, topic_name, b"s" * 50_000) is None,
        what="the default limits",
        timeout=DEADLINE_S,
    )
    set_limits(stack, "acme", max_storage_bytes=10_000)  # the sampler runs every second here
    wait_until(
        lambda: deliver(stack, topic_name, b"t" * 100) == "POLICY_VIOLATION",
        what="POLICY_VIOLATION once the tenant's stored bytes exceed its cap",
        timeout=DEADLINE_S,
    )


def test_a_limit_change_reaches_connections_already_open(
    stack: GatewayStack, topic_name: str
) -> None:
    """The same producer (its connections stay open) is refused once the tenant's request limit
    drops: sessions read the tenant's current limits, not the ones of their login."""
    producer = Producer(
        stack.client_config(
            "acme", "PLAIN", **{"message.timeout.ms": 20000, "message.max.bytes": 4_000_000}
        )
    )

    def send(value: bytes) -> str | None:
        outcome: list[str | None] = []
        producer.produce(
            topic_name,
            value,
            on_delivery=lambda err, _m: outcome.append(None if err is None else err.name()),
        )
        producer.flush(30)
        assert outcome, "no delivery report"
        return outcome[0]

    wait_until(
        lambda: send(b"a" * 200_000) is None, what="the default limits back", timeout=DEADLINE_S
    )
    set_limits(stack, "acme", max_request_bytes=100_000)
    wait_until(
        lambda: send(b"b" * 200_000) == "MSG_SIZE_TOO_LARGE",
        what="the new limit on open connections",
        timeout=DEADLINE_S,
    )
    assert send(b"c" * 1000) is None
