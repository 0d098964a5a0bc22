"""The SDK against a real gateway (issue 15): the sync and async clients produce and consume
through the tenant HTTP API, and `kafka_config` gives settings each Kafka client connects with
(the same records read back both ways).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Producer
from kafka import KafkaConsumer
from kafka.structs import TopicPartition as KpTopicPartition

import pier_sdk
from gateway.sdk import AsyncPierClient, ConsumedRecord, PierApiError, PierClient, kafka_config
from tests.e2e.gateway.http_stack import http_gateway_stack, http_url, wait_http
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with http_gateway_stack(Path(tmp_path_factory.mktemp("http-sdk"))) as running:
        wait_http(running)
        yield running


@pytest.fixture
def pier(stack: GatewayStack) -> Iterator[PierClient]:
    creds = stack.credentials["acme"]
    with PierClient(http_url(stack), creds.key_id, creds.secret, client_id="sdk-tests") as client:
        yield client


def test_sync_client_round_trip(pier: PierClient) -> None:
    assert pier_sdk.PierClient is PierClient
    pier.create_topic("sdk-sync", partitions=2, configs={"retention.ms": "3600000"})
    assert "sdk-sync" in pier.list_topics()
    assert pier.topic_configs("sdk-sync")["retention.ms"] == "3600000"
    pier.alter_topic_configs("sdk-sync", {"retention.ms": "7200000"})
    assert pier.topic_configs("sdk-sync")["retention.ms"] == "7200000"
    sent = [
        pier.produce("sdk-sync", b"\x00bytes", key=b"k0", partition=0, headers={"h": b"1"}),
        pier.produce("sdk-sync", "text", key="k1", partition=1),
        pier.produce("sdk-sync", {"json": [1, 2]}, partition=1),
    ]
    assert [(r.partition, r.offset) for r in sent] == [(0, 0), (1, 0), (1, 1)]
    with pier.consumer("sdk-group", format="binary") as consumer:
        consumer.subscribe(["sdk-sync"])
        got: list[ConsumedRecord] = []

        def three() -> bool:
            got.extend(consumer.poll(timeout_ms=1000))
            return len(got) >= 3

        wait_until(three, what="3 records", timeout=30)
        consumer.commit()
    values = sorted((r.partition, r.offset, r.key, r.value, r.headers) for r in got)
    assert values == [
        (0, 0, b"k0", b"\x00bytes", [("h", b"1")]),
        (1, 0, b"k1", b"text", []),
        (1, 1, None, b'{"json":[1,2]}', []),
    ]
    assert pier.lag("sdk-group") == {("sdk-sync", 0): 0, ("sdk-sync", 1): 0}
    with pytest.raises(PierApiError) as refused:
        pier.produce("sdk-missing", b"x")
    assert refused.value.status == 404 and refused.value.error_code == 40401


def test_async_client_round_trip(stack: GatewayStack) -> None:
    creds = stack.credentials["bolt"]

    async def run() -> list[object]:
        async with AsyncPierClient(http_url(stack), creds.key_id, creds.secret) as pier:
            await pier.create_topic("sdk-async")
            for i in range(3):
                await pier.produce("sdk-async", {"i": i}, key={"k": i})
            async with await pier.consumer("sdk-async-group", format="json") as consumer:
                await consumer.subscribe(["sdk-async"])
                got: list[object] = []
                async with asyncio.timeout(30):
                    while len(got) < 3:
                        got.extend(r.value for r in await consumer.poll(timeout_ms=1000))
                return got

    assert asyncio.run(run()) == [{"i": 0}, {"i": 1}, {"i": 2}]


def test_a_key_that_is_not_json_is_named_by_both_clients(stack: GatewayStack) -> None:
    """Issue 22 item 7: the json format meets a binary key; the gateway's 422 names the key and
    the record, and the SDK hands that message over unchanged."""
    creds = stack.credentials["acme"]
    url, topic = http_url(stack), "sdk-json-key"
    expected = f"the key of the record at topic {topic!r} partition 0 offset 1 is not JSON"
    with PierClient(url, creds.key_id, creds.secret) as pier:
        pier.create_topic(topic)
        pier.produce(topic, {"ok": 1}, key={"k": 0}, partition=0)
        pier.produce(topic, {"ok": 2}, key=b"\xffraw", partition=0)
        with pier.consumer("sdk-json-key-sync", format="json") as consumer:
            consumer.assign([(topic, 0)])
            with pytest.raises(PierApiError) as refused:
                wait_until(lambda: consumer.poll(timeout_ms=500), what="a poll", timeout=30)
    assert (refused.value.status, refused.value.error_code) == (422, 42203)
    assert refused.value.message.startswith(expected), refused.value.message

    async def poll_async() -> PierApiError:
        async with (
            AsyncPierClient(url, creds.key_id, creds.secret) as pier,
            await pier.consumer("sdk-json-key-async", format="json") as consumer,
        ):
            await consumer.assign([(topic, 0)])
            async with asyncio.timeout(30):
                while True:
                    try:
                        await consumer.poll(timeout_ms=500)
                    except PierApiError as error:
                        return error

    error = asyncio.run(poll_async())
    assert (error.status, error.error_code) == (422, 42203)
    assert error.message.startswith(expected), error.message


def test_kafka_config_works_with_each_client(stack: GatewayStack, pier: PierClient) -> None:
    creds = stack.credentials["acme"]
    pier.create_topic("sdk-kafka")
    for i in range(3):
        pier.produce("sdk-kafka", f"v{i}".encode(), key=f"k{i}".encode())
    producer = Producer(kafka_config(stack.bootstrap, creds.key_id, creds.secret))
    producer.produce("sdk-kafka", b"v3", b"k3")
    assert producer.flush(30) == 0

    kp = KafkaConsumer(
        **kafka_config(stack.bootstrap, creds.key_id, creds.secret, client="kafka-python")
    )
    try:
        kp.assign([KpTopicPartition("sdk-kafka", 0)])
        kp.seek_to_beginning()
        seen: list[bytes] = []

        def four() -> bool:
            seen.extend(m.value for b in kp.poll(timeout_ms=500).values() for m in b)
            return len(seen) >= 4

        wait_until(four, what="kafka-python reads 4 records", timeout=30)
    finally:
        kp.close()
    assert seen == [b"v0", b"v1", b"v2", b"v3"]

    async def aio() -> list[bytes]:
        consumer = AIOKafkaConsumer(
            **kafka_config(stack.bootstrap, creds.key_id, creds.secret, client="aiokafka"),
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            consumer.assign([AioTopicPartition("sdk-kafka", 0)])
            out: list[bytes] = []
            async with asyncio.timeout(30):
                while len(out) < 4:
                    for batch in (await consumer.getmany(timeout_ms=500)).values():
                        out.extend(m.value for m in batch)
            return out
        finally:
            await consumer.stop()

    assert asyncio.run(aio()) == [b"v0", b"v1", b"v2", b"v3"]
    java = kafka_config(stack.bootstrap, creds.key_id, creds.secret, client="java")
    assert f'username="{creds.key_id}"' in java and "security.protocol=SASL_PLAINTEXT" in java
