"""Pure parts of the HTTP API and the SDK: the range assignor, config, the OpenAPI document,
the producer-quota size bound, `kafka_config`, and the SDK's retry timing and error parsing."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from gateway.config import GatewayConfig, GatewayConfigError
from gateway.http.group_member import range_assign
from gateway.http.openapi import openapi_document
from gateway.kafka.services import QuotaSubject
from gateway.quotas.quota_book import QuotaBook
from gateway.sdk import kafka_config
from gateway.sdk._core import error_of, produce_body, produced, retry_delay_s
from gateway.throttling import GatewayThrottling
from tenancy.domain import DEFAULT_LIMITS, QuotaEntity
from tests.unit.gateway.quotas.fakes import FakeSource

pytestmark = pytest.mark.unit


def test_range_assignor_is_kafkas() -> None:
    plan = range_assign({"m2": ["a", "b"], "m1": ["a"], "m3": ["b"]}, {"a": 5, "b": 3, "c": 9})
    assert plan == {
        "m1": [("a", 0), ("a", 1), ("a", 2)],
        "m2": [("a", 3), ("a", 4), ("b", 0), ("b", 1)],
        "m3": [("b", 2)],
    }
    assert range_assign({"m": ["missing"]}, {}) == {"m": []}


def test_http_port_comes_from_the_flag_or_the_property() -> None:
    base: dict[str, Any] = {"bootstrap": "b:1", "db_url": "sqlite://", "port": 9092}
    assert GatewayConfig(**base).tenant_http_port is None
    assert GatewayConfig(**base, properties={"http.port": "8082"}).tenant_http_port == 8082
    assert (
        GatewayConfig(**base, http_port=7, properties={"http.port": "8082"}).tenant_http_port == 7
    )
    for bad in ("x", "70000"):
        with pytest.raises(GatewayConfigError, match="http"):
            GatewayConfig(**base, properties={"http.port": bad})
    timeout = GatewayConfig(**base, properties={"consumer.instance.timeout.ms": "1000"})
    assert timeout.setting("consumer.instance.timeout.ms") == 1000


def test_openapi_document_names_every_operation_and_resolves_refs() -> None:
    document = openapi_document("http://x")
    operations = {(m, p) for p, item in document["paths"].items() for m in item}
    assert len(operations) == 35
    schemas = document["components"]["schemas"]

    def refs(node: object) -> list[str]:
        if isinstance(node, dict):
            found = [node["$ref"]] if "$ref" in node else []
            return found + [r for v in node.values() for r in refs(v)]
        if isinstance(node, list):
            return [r for v in node for r in refs(v)]
        return []

    for ref in refs(document):
        kind, name = ref.split("/")[-2:]
        assert name in document["components"][kind], ref
    assert "Error" in schemas


def test_producer_quota_size_bound() -> None:
    subject = QuotaSubject("acme", "sa-1", "app")
    source = FakeSource({"acme": {QuotaEntity("<default>", None): {"producer_byte_rate": 1000}}})
    gate = GatewayThrottling(
        QuotaBook(source), samples=11, window_s=1, registry=CollectorRegistry()
    )
    asyncio.run(gate.load("acme"))
    assert gate.produce_max_bytes(subject) == 10_000  # 1000 B/s × (11 − 1) × 1 s
    source.limits["acme"] = dataclasses.replace(DEFAULT_LIMITS, max_producer_byte_rate=500)
    capped = GatewayThrottling(
        QuotaBook(source), samples=11, window_s=1, registry=CollectorRegistry()
    )
    asyncio.run(capped.load("acme"))
    assert capped.produce_max_bytes(subject) == 5_000
    open_source = FakeSource({"acme": {}})
    free = GatewayThrottling(
        QuotaBook(open_source), samples=11, window_s=1, registry=CollectorRegistry()
    )
    asyncio.run(free.load("acme"))
    assert free.produce_max_bytes(subject) is None


def test_kafka_config_shapes() -> None:
    confluent = kafka_config("gw:9092", "KEY", "SECRET")
    assert confluent == {
        "bootstrap.servers": "gw:9092",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "KEY",
        "sasl.password": "SECRET",
    }
    aio = kafka_config("gw:9092", "KEY", "SECRET", client="aiokafka", mechanism="SCRAM-SHA-512")
    assert aio["sasl_mechanism"] == "SCRAM-SHA-512" and aio["sasl_plain_password"] == "SECRET"
    tls = kafka_config("gw:9093", "KEY", "SECRET", client="kafka-python", tls=True)
    assert tls["security_protocol"] == "SASL_SSL" and "ssl_context" in tls
    java = kafka_config("gw:9092", "KEY", 'se"cret', client="java", mechanism="SCRAM-SHA-256")
    assert "ScramLoginModule required" in java and 'password="se\\"cret";' in java
    with pytest.raises(ValueError):
        kafka_config("gw:9092", "k", "s", client="rust")  # type: ignore[call-overload]
    with pytest.raises(ValueError):
        kafka_config("gw:9092", "k", "s", mechanism="GSSAPI")


def test_sdk_pieces() -> None:
    assert retry_delay_s("2", 1) == 2.0
    assert retry_delay_s(None, 1) == 0.2 and retry_delay_s(None, 3) == 0.8
    assert retry_delay_s("junk", 2) == 0.4
    assert retry_delay_s("999", 1) == 30.0
    error = error_of(404, b'{"error_code": 40401, "message": "topic \'x\' not found"}')
    assert (error.status, error.error_code) == (404, 40401)
    assert error_of(502, b"<html>").error_code == 502
    body = produce_body({"a": 1}, key=b"k", partition=0, headers={"h": "v", "n": None})
    assert body == {
        "partition_id": 0,
        "key": {"type": "BINARY", "data": "aw=="},
        "value": {"type": "JSON", "data": {"a": 1}},
        "headers": [{"name": "h", "value": "dg=="}, {"name": "n", "value": None}],
    }
    with pytest.raises(Exception, match="40301"):
        produced({"error_code": 40301, "message": "no"})
