"""A streamed HTTP produce fails closed when the caller loses WRITE (or its key) mid-stream.

The route decides WRITE once before reading the body; every later chunk is decided again
(`HttpProducer.prepare_many`, and for chunks of plain value-only records `admit_columns`, the
columns path). A DENY for WRITE that reaches the gateway while the stream is open refuses every
record of the chunks after it, each with its own 403 answer, and none of them is stored.

Each test cuts the access only once the first chunk's records are stored (`_wait_stored`): a cut
that reaches the gateway before it has read the first chunk refuses that chunk too (failing
closed, as it should), which is not the case these tests are about.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from confluent_kafka import Consumer, KafkaError, TopicPartition

from gateway.kafka.namespace import TenantNamespace
from tests.e2e.gateway.http_stack import TenantHttp, http_gateway_stack, wait_http
from tests.gateway_stack import OPERATOR, GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

TENANT = "edna"
LEAKED_TENANT = "fern"  # and its suffixes: no ACLs, its accounts may use every topic
PER_CHUNK = 40


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with http_gateway_stack(Path(tmp_path_factory.mktemp("http-revocation"))) as running:
        wait_http(running)
        yield running


def _plain_chunk(first: int) -> bytes:
    """Value-only STRING records for partition 0: the columns path (`stream_columns`)."""
    return b"".join(
        json.dumps({"partition_id": 0, "value": {"type": "STRING", "data": f"r{i}"}}).encode()
        + b"\n"
        for i in range(first, first + PER_CHUNK)
    )


def _stored(stack: GatewayStack, fleet_topic: str) -> list[str]:
    """Every value in the topic's partition 0, read to its end."""
    assert stack.broker is not None
    consumer = Consumer(
        {
            "bootstrap.servers": stack.broker.bootstrap,
            "group.id": f"read-{fleet_topic}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(fleet_topic, 0, 0)])
    values: list[str] = []
    ended = False

    def read() -> bool:
        nonlocal ended
        for message in consumer.consume(500, 0.5):
            error = message.error()
            if error is not None:
                assert error.code() == KafkaError._PARTITION_EOF, error
                ended = True  # read to the partition's end
                continue
            value = message.value()
            assert value is not None
            values.append(value.decode())
        return ended

    try:
        wait_until(read, what=f"{fleet_topic} read to its end", timeout=30)
    finally:
        consumer.close()
    return values


def _end_offset(stack: GatewayStack, fleet_topic: str) -> int:
    """The end offset (high watermark) of the topic's partition 0, asked of the broker."""
    assert stack.broker is not None
    consumer = Consumer({"bootstrap.servers": stack.broker.bootstrap, "group.id": "end-offsets"})
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(fleet_topic, 0), timeout=10)
    finally:
        consumer.close()
    return int(high)


def _wait_stored(stack: GatewayStack, fleet_topic: str, end: int) -> None:
    """Poll until the topic's partition 0 holds records up to `end` (the first chunk's)."""
    wait_until(
        lambda: _end_offset(stack, fleet_topic) >= end,
        what=f"the first chunk stored in {fleet_topic}",
        timeout=30,
    )


def test_write_denied_mid_stream_refuses_every_later_record(stack: GatewayStack) -> None:
    with stack.store() as store:
        writer = GatewayStack.add_tenant(store, TENANT, name="writer")
        store.create_acl(
            TENANT,
            resource_type="TOPIC",
            pattern_type="literal",
            resource_name="*",
            operation="ALL",
            permission="allow",
            principal=f"User:{writer.service_account}",
            actor=OPERATOR,
        )
    caller, probe = TenantHttp(stack, writer), TenantHttp(stack, writer)
    caller.create_topic("revoked", 1)
    wait_until(
        lambda: (
            probe.produce("revoked", {"value": {"type": "STRING", "data": "probe"}}).status_code
            == 200
        ),
        what="the writer's ACL in force at the gateway",
        timeout=30,
    )
    fleet_topic = TenantNamespace(TENANT).fleet("revoked")
    start = _end_offset(stack, fleet_topic)  # after the probe's record

    def body() -> Iterator[bytes]:
        yield _plain_chunk(0)
        _wait_stored(stack, fleet_topic, start + PER_CHUNK)
        with stack.store() as store:  # WRITE denied while the stream is open
            store.create_acl(
                TENANT,
                resource_type="TOPIC",
                pattern_type="literal",
                resource_name="revoked",
                operation="WRITE",
                permission="deny",
                principal=f"User:{writer.service_account}",
                actor=OPERATOR,
            )
        wait_until(
            lambda: (
                probe.produce("revoked", {"value": {"type": "STRING", "data": "x"}}).status_code
                == 403
            ),
            what="the DENY in force at the gateway",
            timeout=30,
        )
        yield _plain_chunk(PER_CHUNK)
        yield _plain_chunk(2 * PER_CHUNK)

    answer = caller.session.post(
        f"{caller.base}{caller.cluster}/topics/revoked/records",
        data=body(),
        headers={"Content-Type": "application/json"},
        timeout=120,
    )
    assert answer.status_code == 200, answer.text
    results = [json.loads(line) for line in answer.text.splitlines() if line.strip()]
    assert len(results) == 3 * PER_CHUNK
    assert [r["error_code"] for r in results[:PER_CHUNK]] == [200] * PER_CHUNK
    assert [r["error_code"] for r in results[PER_CHUNK:]] == [40301] * (2 * PER_CHUNK)
    stored = _stored(stack, fleet_topic)
    streamed = [value for value in stored if value not in ("probe", "x")]  # not the probes'
    assert streamed == [f"r{i}" for i in range(PER_CHUNK)]


@pytest.mark.parametrize("cut", ["revoke", "suspend"])
def test_a_key_revoked_mid_stream_writes_nothing_more(stack: GatewayStack, cut: str) -> None:
    """The Kafka path closes a revoked key's (or suspended tenant's) connections and HTTP refuses
    its next request within a second (docs/security.md, #6, H25 and H28); a stream open with it
    must not go on producing either: its later records are refused, or the stream is ended."""
    tenant = f"{LEAKED_TENANT}-{cut}"
    with stack.store() as store:
        leaked = GatewayStack.add_tenant(store, tenant, name="leaked")
    caller = TenantHttp(stack, leaked)
    caller.create_topic("leaked", 1)
    fleet_topic = TenantNamespace(tenant).fleet("leaked")

    def body() -> Iterator[bytes]:
        yield _plain_chunk(0)
        _wait_stored(stack, fleet_topic, PER_CHUNK)
        with stack.store() as store:
            if cut == "revoke":
                store.revoke_api_key(leaked.key_id, actor=OPERATOR)
            else:
                store.set_tenant_status(tenant, "suspended", actor=OPERATOR)
        wait_until(
            lambda: caller.get("/v3/clusters").status_code in (401, 403),
            what=f"the key refused at the gateway ({cut})",
            timeout=30,
        )
        yield _plain_chunk(PER_CHUNK)
        yield _plain_chunk(2 * PER_CHUNK)

    try:
        answer = caller.session.post(
            f"{caller.base}{caller.cluster}/topics/leaked/records",
            data=body(),
            headers={"Content-Type": "application/json"},
            timeout=120,
        )
        answered = [json.loads(line) for line in answer.text.splitlines() if line.strip()]
    except requests.ConnectionError:
        answered = []  # the gateway ended the stream: acceptable
    later = answered[PER_CHUNK:]
    assert all(r["error_code"] != 200 for r in later), later[:3]
    stored = _stored(stack, fleet_topic)
    assert stored == [f"r{i}" for i in range(PER_CHUNK)]
