"""SASL_SSL: the gateway serves TLS (`--tls-cert/--tls-key`) and librdkafka verifies it.

The certificate is a fresh self-signed one for 127.0.0.1 made with the `openssl` command; the
client trusts exactly it (`ssl.ca.location`), so the test fails if the gateway does not speak TLS
with that certificate on the bootstrap port and on the broker's port alike.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

from tests.conftest import remember_log
from tests.gateway_stack import GatewayStack

pytestmark = pytest.mark.e2e


def self_signed(directory: Path) -> tuple[Path, Path]:
    cert, key = directory / "gateway.pem", directory / "gateway.key"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
            "-keyout", str(key), "-out", str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )  # fmt: skip
    return cert, key


@pytest.fixture(scope="module")
def tls_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    root = tmp_path_factory.mktemp("gateway-tls")
    with GatewayStack(root, tls=self_signed(root)) as stack:
        yield stack


def test_sasl_ssl_round_trip(
    tls_stack: GatewayStack, topic_name: str, request: pytest.FixtureRequest
) -> None:
    assert tls_stack.gateway is not None
    remember_log(request.node, "gateway", tls_stack.gateway.log_path)
    producer = Producer(tls_stack.client_config("acme", "SCRAM-SHA-512", acks="all"))
    producer.produce(topic_name, b"over tls")
    assert producer.flush(30) == 0
    consumer = Consumer(
        tls_stack.client_config(
            "acme", "SCRAM-SHA-512", **{"group.id": "tls", "auto.offset.reset": "earliest"}
        )
    )
    consumer.subscribe([topic_name])
    try:
        message = None
        for _ in range(30):
            message = consumer.poll(1)
            if message is not None and message.error() is None:
                break
        assert message is not None and message.error() is None, message
        assert message.value() == b"over tls"
    finally:
        consumer.close()


def test_plaintext_client_gets_nothing_from_a_tls_port(tls_stack: GatewayStack) -> None:
    config = tls_stack.client_config("acme", "PLAIN")
    config["security.protocol"] = "SASL_PLAINTEXT"
    config.pop("ssl.ca.location")
    producer = Producer({**config, "message.timeout.ms": 3000})
    failures: list[str] = []
    producer.produce("anything", b"x", on_delivery=lambda err, _m: failures.append(str(err)))
    producer.flush(10)
    assert failures and failures[0] != "None"
