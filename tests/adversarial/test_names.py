"""Attacks on names and ids: what a tenant names things must never escape the rules or the bill.

Attack #1 of issue 21: a topic named `"nl\\n"` was created (`sec-a_nl\\n-0` on disk), through the
gateway and straight at a broker: the broker checked names with `^…$`, and `$` matches before a
final newline; its usage records were then refused by the usage contract, so its traffic was never
billed. Attack #2: a Kafka `client.id` longer than 255 characters made every usage record of the
connection fail the contract (`usage_records_lost_total` rose), so its traffic was never billed.

Defended (docs/security.md, "Names and ids"): topic names are `[a-zA-Z0-9._-]{1,249}` by
`fullmatch`, not `.` or `..`, on the broker and in the gateway's policy stage (the tenant's fleet
name must fit 249 too); refused names get INVALID_TOPIC_EXCEPTION per topic, HTTP 400 problem JSON.
Client ids are kept as sent for the quota chain and metered as their first 255 printable
characters on every path; the meter fits every key to the contract at the cut, so no usage
record is refused whatever a client sends. Checked on a real broker and `pier gateway` (with its
HTTP API and metrics) with confluent-kafka, hand-made frames and raw HTTP.
"""

from __future__ import annotations

import base64
import http.client
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.schema.create_topics.v5.request import CreatableTopic, CreateTopicsRequest
from kio.schema.create_topics.v5.response import CreateTopicsResponse
from kio.schema.metadata.v9.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v9.response import MetadataResponse
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.types import TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta

from brokers.records.builder import simple_batch
from infra.probes import free_port
from tenancy.usage import TrafficRecord
from tests.adversarial.gateway_probes import gateway_metric
from tests.e2e.gateway.broker_log import usage_records
from tests.e2e.gateway.http_stack import wait_http
from tests.e2e.gateway.sasl_wire import login
from tests.e2e.raw_wire import RawConnection
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

INVALID_TOPIC_EXCEPTION = 17
NEWLINE = "nl\n"
LONG_CLIENT_ID = "c" * 300
DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def gateway_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    """A broker and a gateway with its HTTP API and its metrics endpoint."""
    http_port = free_port()
    with GatewayStack(
        Path(tmp_path_factory.mktemp("names")),
        gateway_settings={"http.port": str(http_port)},
        gateway_metrics_port=free_port(),
    ) as stack:
        stack.http_url = f"http://127.0.0.1:{http_port}"  # type: ignore[attr-defined]
        wait_http(stack)
        yield stack


def lost_usage_records(stack: GatewayStack) -> float:
    return gateway_metric(stack, "pier_gateway_usage_records_lost_total")


def create_raw(connection: RawConnection, name: str) -> tuple[int, str | None]:
    topic = CreatableTopic(
        name=TopicName(name),
        num_partitions=i32(1),
        replication_factor=i16(1),
        assignments=(),
        configs=(),
    )
    request = CreateTopicsRequest(
        topics=(topic,), timeout=i32Timedelta.parse(timedelta(seconds=10)), validate_only=False
    )
    (result,) = connection.call(request, CreateTopicsResponse).topics
    return int(result.error_code), result.error_message


def broker_topics(stack: GatewayStack) -> set[str]:
    assert stack.broker is not None
    host, port = stack.broker.bootstrap.rsplit(":", 1)
    with RawConnection(host, int(port)) as connection:
        request = MetadataRequest(
            topics=None,
            allow_auto_topic_creation=False,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        return {str(t.name) for t in connection.call(request, MetadataResponse).topics}


def on_disk(stack: GatewayStack) -> set[str]:
    assert stack.broker is not None
    data = stack.root / "broker" / "data"
    return {path.name for path in data.rglob("*") if path.is_dir() and "nl" in path.name}


def test_attack_1_newline_topic_refused_by_the_gateway(gateway_stack: GatewayStack) -> None:
    stack = gateway_stack
    admin = AdminClient(stack.client_config("acme", **{"client.id": "names-admin"}))
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([NewTopic(NEWLINE, 1, 1)])[NEWLINE].result(30)
    assert refused.value.args[0].code() == KafkaError.TOPIC_EXCEPTION
    connection = login(stack, "acme")
    try:
        for name in (NEWLINE, "\nnl", ".", "ünï", "x" * 245):  # acme_ + 245 is over 249
            code, message = create_raw(connection, name)
            assert code == INVALID_TOPIC_EXCEPTION, (name, code, message)
            assert message and message.startswith("Topic name")
        auto = MetadataRequest(
            topics=(MetadataRequestTopic(name=TopicName(NEWLINE)),),
            allow_auto_topic_creation=True,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False,
        )
        connection.call(auto, MetadataResponse)
        assert create_raw(connection, "x" * 244)[0] == 0  # the longest name acme may have
    finally:
        connection.close()
    assert not {name for name in broker_topics(stack) if "\n" in name or "nl" in name}
    assert not on_disk(stack)


def test_attack_1_produce_to_a_newline_topic_is_refused_per_topic(
    gateway_stack: GatewayStack,
) -> None:
    """The raw Produce path asks the policy stage: the newline topic gets INVALID_TOPIC_EXCEPTION
    in the answer, the other topic of the same request is written."""
    connection = login(gateway_stack, "acme")
    try:
        assert create_raw(connection, "names-produce")[0] == 0
        now = int(time.time() * 1000)
        batch = simple_batch([b"v"], keys=[b"k"], timestamps=[now])
        topics = tuple(
            TopicProduceData(
                name=TopicName(name),
                partition_data=(PartitionProduceData(index=i32(0), records=Records(batch)),),
            )
            for name in (NEWLINE, "names-produce")
        )
        request = ProduceRequest(
            acks=i16(-1), timeout=i32Timedelta.parse(timedelta(seconds=10)), topic_data=topics
        )
        answer = connection.call(request, ProduceResponse)
    finally:
        connection.close()
    codes = {str(t.name): int(t.partition_responses[0].error_code) for t in answer.responses}
    assert codes == {NEWLINE: INVALID_TOPIC_EXCEPTION, "names-produce": 0}
    assert not on_disk(gateway_stack)


def test_attack_1_newline_topic_refused_over_http(gateway_stack: GatewayStack) -> None:
    stack = gateway_stack
    creds = stack.credentials["acme"]
    base = str(stack.http_url)  # type: ignore[attr-defined]
    auth = base64.b64encode(f"{creds.key_id}:{creds.secret}".encode()).decode()
    headers = {"Authorization": f"Basic {auth}", "Content-Type": "application/json"}
    request = urllib.request.Request(base + "/v3/clusters", headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        cluster = json.load(response)["data"][0]["cluster_id"]
    body = json.dumps({"topic_name": NEWLINE, "partitions_count": 1}).encode()
    create = urllib.request.Request(
        f"{base}/v3/clusters/{cluster}/topics", data=body, headers=headers, method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(create, timeout=10)
    assert refused.value.code == 400
    problem = json.loads(refused.value.read())
    assert problem["error_code"] == 40002 and "illegal" in problem["message"]
    produce = urllib.request.Request(
        f"{base}/v3/clusters/{cluster}/topics/nl%0A/records",
        data=json.dumps({"value": {"type": "JSON", "data": 1}}).encode(),
        headers=headers,
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as produced:
        urllib.request.urlopen(produce, timeout=10)
    assert produced.value.code == 400
    for name in ("ünï", "١٢", "nl\n"):  # consumer instance names are ASCII too
        instance = urllib.request.Request(
            f"{base}/consumers/names-group",
            data=json.dumps({"name": name}).encode(),
            headers={**headers, "Content-Type": "application/vnd.kafka.v2+json"},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as named:
            urllib.request.urlopen(instance, timeout=10)
        assert named.value.code == 422, name
    assert not on_disk(stack)


def test_attack_1_newline_topic_refused_by_the_broker(gateway_stack: GatewayStack) -> None:
    assert gateway_stack.broker is not None
    host, port = gateway_stack.broker.bootstrap.rsplit(":", 1)
    with RawConnection(host, int(port)) as connection:
        for name in ("direct-nl\n", "direct\n-nl", "."):
            code, _message = create_raw(connection, name)
            assert code == INVALID_TOPIC_EXCEPTION, (name, code)
        assert create_raw(connection, "direct-ok")[0] == 0
    names = broker_topics(gateway_stack)
    assert "direct-ok" in names and not {n for n in names if n.startswith("direct") and "\n" in n}


def test_attack_2_long_client_id_is_billed_and_no_usage_record_is_lost(
    gateway_stack: GatewayStack,
) -> None:
    stack = gateway_stack
    topic_name = "long-client-id"
    admin = AdminClient(stack.client_config("acme", **{"client.id": "names-admin"}))
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    producer = Producer(
        stack.client_config("acme", **{"client.id": LONG_CLIENT_ID, "linger.ms": "0"})
    )
    for i in range(20):
        producer.produce(topic_name, b"v" * 100, f"k{i}".encode())
    assert producer.flush(30) == 0
    metered = LONG_CLIENT_ID[:255]
    principal = stack.credentials["acme"].service_account

    def billed() -> int:
        assert stack.broker is not None
        return sum(
            record.bytes_in
            for record in usage_records(stack.broker.bootstrap).values()  # decodes every record
            if isinstance(record, TrafficRecord)
            and (record.tenant, record.principal, record.client_id, record.topic)
            == ("acme", principal, metered, topic_name)
        )

    wait_until(
        lambda: billed() > 20 * 100, what="the long client id's bytes billed", timeout=DEADLINE_S
    )
    assert lost_usage_records(stack) == 0


def test_undecodable_http_client_id_loses_no_usage(gateway_stack: GatewayStack) -> None:
    """An `X-Client-Id` of invalid UTF-8 (read by aiohttp as lone surrogates, which have no UTF-8
    encoding) once failed the usage writer's whole flush round: every tenant's window lost."""
    stack = gateway_stack
    creds = stack.credentials["bolt"]
    auth = base64.b64encode(f"{creds.key_id}:{creds.secret}".encode())
    port = int(str(stack.http_url).rsplit(":", 1)[1])  # type: ignore[attr-defined]
    cluster = json.loads(raw_get(port, "/v3/clusters", auth)[1])["data"][0]["cluster_id"]
    # Listing topics goes to the fleet through the policy stage: metered as one request.
    status, _body = raw_get(
        port, f"/v3/clusters/{cluster}/topics", auth, b"bad\xff\xfeid" + b"z" * 300
    )
    assert status == 200
    principal = creds.service_account

    def metered() -> list[TrafficRecord]:
        assert stack.broker is not None
        return [
            record
            for record in usage_records(stack.broker.bootstrap).values()
            if isinstance(record, TrafficRecord)
            and record.principal == principal
            and record.client_id.startswith("bad")
        ]

    wait_until(lambda: bool(metered()), what="the request metered for bolt", timeout=DEADLINE_S)
    assert {len(record.client_id) <= 255 for record in metered()} == {True}
    assert lost_usage_records(stack) == 0


def test_a_new_client_id_per_request_cannot_flood_usage(tmp_path: Path) -> None:
    """2500 HTTP requests, each with its own `X-Client-Id`, within one usage window (60 s here):
    the meter keeps at most 1000 keys of the tenant per window and counts the rest under
    `(overflow)`; every request is still billed (the gateway's SIGTERM flush writes the window)
    and no usage record is lost."""
    http_port = free_port()
    with GatewayStack(
        tmp_path,
        gateway_settings={"http.port": str(http_port), "usage.flush.interval.ms": "60000"},
        gateway_metrics_port=free_port(),
    ) as stack:
        stack.http_url = f"http://127.0.0.1:{http_port}"  # type: ignore[attr-defined]
        wait_http(stack)
        creds = stack.credentials["bolt"]
        auth = base64.b64encode(f"{creds.key_id}:{creds.secret}".encode())
        cluster = json.loads(raw_get(http_port, "/v3/clusters", auth)[1])["data"][0]["cluster_id"]
        sent = 2500  # at most two windows: one of them holds over 1000 client ids
        connection = http.client.HTTPConnection("127.0.0.1", http_port, timeout=10)
        try:
            for i in range(sent):  # one keep-alive connection: the flood is fast
                connection.putrequest("GET", f"/v3/clusters/{cluster}/topics")
                connection.putheader("Authorization", b"Basic " + auth)
                connection.putheader("X-Client-Id", f"flood-{i}")
                connection.endheaders()
                answer = connection.getresponse()
                answer.read()
                assert answer.status == 200
        finally:
            connection.close()
        assert lost_usage_records(stack) == 0
        assert stack.gateway is not None and stack.broker is not None
        assert stack.gateway.stop() == 0  # SIGTERM: the last window is cut and written
        records = [
            record
            for record in usage_records(stack.broker.bootstrap).values()
            if isinstance(record, TrafficRecord) and record.principal == creds.service_account
        ]
    flood = [r for r in records if r.client_id.startswith("flood-") or r.client_id == "(overflow)"]
    assert sum(r.requests for r in flood) == sent  # every request billed
    windows = {r.start_ms for r in flood}
    assert len(windows) <= 2
    for start in windows:
        assert len({r.client_id for r in flood if r.start_ms == start}) <= 1001
    assert any(r.client_id == "(overflow)" for r in flood)


def raw_get(port: int, path: str, auth: bytes, client_id: bytes | None = None) -> tuple[int, bytes]:
    """A GET with headers as raw bytes (`requests` would refuse to send invalid UTF-8)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.putrequest("GET", path)
        connection.putheader("Authorization", b"Basic " + auth)
        if client_id is not None:
            connection.putheader("X-Client-Id", client_id)
        connection.endheaders()
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()
