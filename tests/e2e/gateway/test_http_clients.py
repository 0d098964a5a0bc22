"""The tenant HTTP API and the Kafka clients see the same records (issue 15, acceptance).

A tenant produces over HTTP (Confluent v3, one record per request and a stream) and consumes the
records with confluent-kafka, kafka-python and aiokafka through the gateway's Kafka listener; and
the other way round: each client produces, and an HTTP v2 consumer instance reads. Keys, values,
headers and partitions must survive, in the binary and the JSON embedded formats.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka.structs import TopicPartition as KpTopicPartition

from tests.e2e.gateway.clients import security_settings
from tests.e2e.gateway.http_stack import TenantHttp, http_gateway_stack, wait_http
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka")
PARTITIONS = 3
Row = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes], ...]]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with http_gateway_stack(Path(tmp_path_factory.mktemp("http-clients"))) as running:
        wait_http(running)
        yield running


@pytest.fixture(scope="module")
def acme(stack: GatewayStack) -> TenantHttp:
    return TenantHttp(stack, stack.credentials["acme"])


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def expected_rows(tag: str) -> list[tuple[dict[str, Any], Row]]:
    """HTTP records (binary and JSON values) and what a Kafka client must read back."""
    rows: list[tuple[dict[str, Any], Row]] = []
    for i in range(6):
        key = f"{tag}-k{i}".encode()
        headers = (("trace", f"t{i}".encode()), ("bin", bytes([0, 255, i])))
        http_headers = [{"name": n, "value": b64(v)} for n, v in headers]
        if i % 2 == 0:
            value = bytes([i, 0, 200]) + b"binary"
            wire: dict[str, Any] = {"type": "BINARY", "data": b64(value)}
        else:
            document = {"n": i, "tag": tag, "nested": [1, "two"]}
            value = json.dumps(document, separators=(",", ":")).encode()
            wire = {"type": "JSON", "data": document}
        record = {
            "partition_id": i % PARTITIONS,
            "key": {"type": "BINARY", "data": b64(key)},
            "value": wire,
            "headers": http_headers,
        }
        rows.append((record, (i % PARTITIONS, key, value, headers)))
    return rows


# -- Kafka clients reading -----------------------------------------------------------------------
def read_confluent(stack: GatewayStack, topic: str, count: int) -> list[Row]:
    consumer = Consumer(
        {
            "bootstrap.servers": stack.bootstrap,
            **security_settings("confluent-kafka", stack.credentials["acme"], "PLAIN"),
            "group.id": f"{topic}-confluent",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        rows: list[Row] = []

        def more() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                pairs: Any = message.headers() or []
                headers = tuple((str(k), bytes(v)) for k, v in pairs)
                key: Any = message.key()
                value: Any = message.value()
                rows.append((int(message.partition() or 0), key, value, headers))
            return len(rows) >= count

        wait_until(more, what=f"confluent-kafka reads {count} records", timeout=30)
        return rows
    finally:
        consumer.close()


def read_kafka_python(stack: GatewayStack, topic: str, count: int) -> list[Row]:
    consumer = KafkaConsumer(
        bootstrap_servers=stack.bootstrap,
        **security_settings("kafka-python", stack.credentials["acme"], "PLAIN"),
        enable_auto_commit=False,
    )
    try:
        partitions = [KpTopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        rows: list[Row] = []

        def more() -> bool:
            for batch in consumer.poll(timeout_ms=500).values():
                for m in batch:
                    headers = tuple((k, bytes(v)) for k, v in m.headers)
                    rows.append((m.partition, m.key, m.value, headers))
            return len(rows) >= count

        wait_until(more, what=f"kafka-python reads {count} records", timeout=30)
        return rows
    finally:
        consumer.close()


def read_aiokafka(stack: GatewayStack, topic: str, count: int) -> list[Row]:
    async def run() -> list[Row]:
        consumer = AIOKafkaConsumer(
            bootstrap_servers=stack.bootstrap,
            **security_settings("aiokafka", stack.credentials["acme"], "PLAIN"),
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        await consumer.start()
        try:
            consumer.assign([AioTopicPartition(topic, p) for p in range(PARTITIONS)])
            rows: list[Row] = []
            async with asyncio.timeout(30):
                while len(rows) < count:
                    for batch in (await consumer.getmany(timeout_ms=500)).values():
                        for m in batch:
                            headers = tuple((k, bytes(v)) for k, v in m.headers)
                            rows.append((m.partition, m.key, m.value, headers))
            return rows
        finally:
            await consumer.stop()

    return asyncio.run(run())


READERS = {
    "confluent-kafka": read_confluent,
    "kafka-python": read_kafka_python,
    "aiokafka": read_aiokafka,
}


@pytest.mark.parametrize("client", CLIENTS)
def test_http_produced_records_read_by_kafka_clients(
    stack: GatewayStack, acme: TenantHttp, client: str
) -> None:
    topic = f"http-to-{client}"
    acme.create_topic(topic, PARTITIONS)
    rows = expected_rows(client)
    for record, _row in rows[:3]:  # one record per request
        answer = acme.produce(topic, record)
        assert answer.status_code == 200, answer.text
        assert answer.json()["partition_id"] == record["partition_id"]
    stream = "".join(json.dumps(record) + "\n" for record, _row in rows[3:])
    streamed = acme.session.post(
        f"{acme.base}{acme.cluster}/topics/{topic}/records",
        data=iter([stream.encode()]),  # a generator body: sent chunked, Confluent's streaming form
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert streamed.status_code == 200, streamed.text
    results = [json.loads(line) for line in streamed.text.splitlines() if line.strip()]
    assert [r["error_code"] for r in results] == [200, 200, 200], results
    assert [r["partition_id"] for r in results] == [rec["partition_id"] for rec, _ in rows[3:]]
    read = READERS[client](stack, topic, len(rows))
    assert sorted(read) == sorted(row for _record, row in rows)


# -- Kafka clients writing -----------------------------------------------------------------------
def kafka_rows(tag: str) -> list[Row]:
    rows: list[Row] = []
    for i in range(6):
        value = json.dumps({"i": i, "tag": tag}).encode()
        key = json.dumps(f"{tag}-{i}").encode()  # JSON keys: the JSON format reads them too
        rows.append((i % PARTITIONS, key, value, (("h", f"v{i}".encode()),)))
    return rows


def write_with(stack: GatewayStack, client: str, topic: str, rows: list[Row]) -> None:
    creds = stack.credentials["acme"]
    if client == "confluent-kafka":
        producer = Producer(
            {"bootstrap.servers": stack.bootstrap, **security_settings(client, creds, "PLAIN")}
        )
        for partition, key, value, headers in rows:
            producer.produce(topic, value, key, partition=partition, headers=list(headers))
        assert producer.flush(30) == 0
    elif client == "kafka-python":
        kp = KafkaProducer(
            bootstrap_servers=stack.bootstrap, **security_settings(client, creds, "PLAIN")
        )
        for partition, key, value, headers in rows:
            kp.send(topic, value=value, key=key, partition=partition, headers=list(headers))
        kp.flush(30)
        kp.close()
    else:

        async def run() -> None:
            aio = AIOKafkaProducer(
                bootstrap_servers=stack.bootstrap, **security_settings(client, creds, "PLAIN")
            )
            await aio.start()
            try:
                for partition, key, value, headers in rows:
                    await aio.send_and_wait(
                        topic, value, key=key, partition=partition, headers=list(headers)
                    )
            finally:
                await aio.stop()

        asyncio.run(run())


def read_over_http(acme: TenantHttp, topic: str, fmt: str, count: int) -> list[dict[str, Any]]:
    instance = acme.consumer(f"{topic}-{fmt}", format=fmt, **{"auto.offset.reset": "earliest"})
    try:
        answer = acme.post(
            instance + "/assignments",
            {"partitions": [{"topic": topic, "partition": p} for p in range(PARTITIONS)]},
        )
        assert answer.status_code == 204, answer.text
        got: list[dict[str, Any]] = []

        def more() -> bool:
            got.extend(acme.poll(instance, fmt, 500))
            return len(got) >= count

        wait_until(more, what=f"the HTTP consumer reads {count} records", timeout=30)
        return got
    finally:
        acme.delete(instance)


@pytest.mark.parametrize("client", CLIENTS)
def test_kafka_client_records_read_over_http(
    stack: GatewayStack, acme: TenantHttp, client: str
) -> None:
    topic = f"{client}-to-http"
    acme.create_topic(topic, PARTITIONS)
    rows = kafka_rows(client)
    write_with(stack, client, topic, rows)
    binary = read_over_http(acme, topic, "binary", len(rows))
    assert sorted(
        (
            r["partition"],
            base64.b64decode(r["key"]),
            base64.b64decode(r["value"]),
            tuple((h["name"], base64.b64decode(h["value"])) for h in r["headers"]),
        )
        for r in binary
    ) == sorted(rows)
    as_json = read_over_http(acme, topic, "json", len(rows))
    assert sorted(
        (
            r["partition"],
            r["key"],
            r["value"],
            tuple((h["name"], base64.b64decode(h["value"])) for h in r["headers"]),
        )
        for r in as_json
    ) == sorted((p, json.loads(k or b""), json.loads(v or b""), h) for p, k, v, h in rows)


def test_json_format_round_trip(stack: GatewayStack, acme: TenantHttp) -> None:
    topic = "json-both-ways"
    acme.create_topic(topic, PARTITIONS)
    documents = [{"id": i, "tags": ["a", i], "ok": i % 2 == 0, "none": None} for i in range(6)]
    for i, document in enumerate(documents):
        answer = acme.produce(
            topic,
            {
                "partition_id": i % PARTITIONS,
                "key": {"type": "JSON", "data": {"id": i}},
                "value": {"type": "JSON", "data": document},
                "headers": [{"name": "n", "value": b64(str(i).encode())}],
            },
        )
        assert answer.status_code == 200, answer.text
    got = read_over_http(acme, topic, "json", len(documents))
    assert sorted(
        (r["partition"], r["key"]["id"], json.dumps(r["value"], sort_keys=True)) for r in got
    ) == sorted((i % PARTITIONS, i, json.dumps(d, sort_keys=True)) for i, d in enumerate(documents))
    assert all(
        r["headers"] == [{"name": "n", "value": b64(str(r["key"]["id"]).encode())}] for r in got
    )
    # And confluent-kafka reads the same JSON bytes.
    read = read_confluent(stack, topic, len(documents))
    assert sorted(json.loads(value or b"null")["id"] for _p, _k, value, _h in read) == list(
        range(6)
    )


def test_json_format_refuses_records_that_are_not_json(
    stack: GatewayStack, acme: TenantHttp
) -> None:
    topic = "not-json"
    acme.create_topic(topic, 1)
    assert (
        acme.produce(topic, {"value": {"type": "BINARY", "data": b64(b"\xff\x00raw")}}).status_code
        == 200
    )
    instance = acme.consumer("not-json-reader", format="json", **{"auto.offset.reset": "earliest"})
    try:
        acme.post(instance + "/assignments", {"partitions": [{"topic": topic, "partition": 0}]})
        answer = acme.get(
            instance + "/records?timeout=2000",
            headers={"Accept": "application/vnd.kafka.json.v2+json"},
        )
        assert answer.status_code == 422, answer.text
        assert answer.json()["error_code"] == 42203
        assert answer.json()["message"].startswith(
            f"the value of the record at topic {topic!r} partition 0 offset 0 is not JSON"
        )
        wrong = acme.get(
            instance + "/records", headers={"Accept": "application/vnd.kafka.binary.v2+json"}
        )
        assert wrong.status_code == 406 and wrong.json()["error_code"] == 40601
    finally:
        acme.delete(instance)


def test_json_format_names_a_key_that_is_not_json(acme: TenantHttp) -> None:
    topic = "not-json-key"
    acme.create_topic(topic, 1)
    record = {"key": {"type": "BINARY", "data": b64(b"\xffk")}, "value": {"data": {"ok": 1}}}
    assert acme.produce(topic, record).status_code == 200
    instance = acme.consumer(
        "not-json-key-reader", format="json", **{"auto.offset.reset": "earliest"}
    )
    try:
        acme.post(instance + "/assignments", {"partitions": [{"topic": topic, "partition": 0}]})
        answer = acme.get(
            instance + "/records?timeout=2000",
            headers={"Accept": "application/vnd.kafka.json.v2+json"},
        )
        assert answer.status_code == 422, answer.text
        assert answer.json()["message"].startswith(
            f"the key of the record at topic {topic!r} partition 0 offset 0 is not JSON"
        )
    finally:
        acme.delete(instance)


def test_keyed_records_land_where_the_java_partitioner_puts_them(acme: TenantHttp) -> None:
    from kafka.partitioner.default import murmur2

    topic = "keyed"
    acme.create_topic(topic, 5)
    for key in (b"alpha", b"beta", b"gamma", b"delta-12345"):
        answer = acme.produce(
            topic,
            {"key": {"type": "BINARY", "data": b64(key)}, "value": {"type": "STRING", "data": "x"}},
        )
        assert answer.status_code == 200
        assert answer.json()["partition_id"] == (murmur2(key) & 0x7FFFFFFF) % 5


def test_unknown_topic_and_partition_are_404(acme: TenantHttp) -> None:
    missing = acme.produce("no-such-topic", {"value": {"type": "STRING", "data": "x"}})
    assert missing.status_code == 404 and missing.json()["error_code"] == 40401
    acme.create_topic("one-partition", 1)
    beyond = acme.produce(
        "one-partition", {"partition_id": 7, "value": {"type": "STRING", "data": "x"}}
    )
    assert beyond.status_code == 404 and beyond.json()["error_code"] == 40402
    bad = acme.post(f"{acme.cluster}/topics/one-partition/records", None, data=b"{not json")
    assert bad.status_code == 400, bad.text
    assert isinstance(requests.get(acme.base + "/openapi.json", timeout=5).json()["paths"], dict)


def test_a_stream_answers_each_record_errors_included(acme: TenantHttp) -> None:
    acme.create_topic("stream-errors", 2)
    lines = [
        {"partition_id": 0, "value": {"type": "STRING", "data": "first"}},
        {"partition_id": 9, "value": {"type": "STRING", "data": "no such partition"}},
        {"value": {"type": "AVRO", "data": 1}},
        {"partition_id": 1, "value": {"type": "STRING", "data": "last"}},
    ]
    stream = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    answer = acme.session.post(
        f"{acme.base}{acme.cluster}/topics/stream-errors/records",
        data=iter([stream[:37], stream[37:]]),  # a record split across chunks
        headers={"Content-Type": "application/json"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    results = [json.loads(line) for line in answer.text.splitlines() if line.strip()]
    assert [r["error_code"] for r in results] == [200, 40402, 42201, 200]
    assert (results[0]["partition_id"], results[0]["offset"]) == (0, 0)
    assert (results[3]["partition_id"], results[3]["offset"]) == (1, 0)
