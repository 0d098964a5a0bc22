"""Attacks by topic id through the gateway (issue 27 item 4, KIP-516): a tenant that learned another
tenant's topic id must not reach that topic with it.

Defended (docs/gateway.md, "Topic ids"): a tenant sees the brokers' ids of its own topics
(Metadata v10+); an id in a request resolves to the fleet topic with that id and is used only when
that topic is in the caller's namespace, else the answer is UNKNOWN_TOPIC_ID, exactly as for an id
nobody has, with no name. Tenant `bolt` sends `acme`'s topic id in Metadata v12 and DeleteTopics
v6: UNKNOWN_TOPIC_ID, nothing named, and acme's topic still there with its records. `acme` itself
looks its topic up and deletes it by id. Produce v13 and Fetch v13–18 name topics only by id and
are advertised through the gateway: bolt producing to and fetching from acme's id (every Fetch
version) gets UNKNOWN_TOPIC_ID, writes nothing and reads nothing, while acme produces and fetches
by the same id. Real broker and `pier gateway`, hand-made frames and confluent-kafka (librdkafka
2.16 itself fetches with v16 once it knows the ids: `tests/e2e/gateway/test_clients.py`)."""

from __future__ import annotations

import datetime
import logging
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.delete_topics.v6.response import DeleteTopicsResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import TopicName
from kio.static.primitive import i32Timedelta

from brokers.records.builder import simple_batch
from brokers.wire.entities import make, request_module, response_module
from tests.e2e.gateway.sasl_wire import advertised_ranges, login
from tests.e2e.raw_wire import RawConnection, decode_response, frame, request_bytes
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
TOPIC = "ledger"
SECRET = b"acme-only"
UNKNOWN_TOPIC_ID = 100
TIMEOUT_S = 30.0
FETCH, PRODUCE = 1, 0
FETCH_BY_ID = range(13, 19)
VAULT = "vault"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with GatewayStack(Path(tmp_path_factory.mktemp("topic-ids"))) as s:
        yield s


def create(stack: GatewayStack, tenant: str, topic: str) -> None:
    admin = AdminClient(stack.client_config(tenant))
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(TIMEOUT_S)
    producer = Producer(stack.client_config(tenant))
    producer.produce(topic, SECRET)
    assert producer.flush(TIMEOUT_S) == 0


def by_id(wire: RawConnection, topic_id: uuid.UUID | None, name: str | None = None) -> object:
    request = MetadataRequest(
        topics=(
            MetadataRequestTopic(topic_id=topic_id, name=None if name is None else TopicName(name)),
        ),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    (topic,) = wire.call(request, MetadataResponse).topics
    return topic


def delete_by_id(wire: RawConnection, topic_id: uuid.UUID) -> object:
    request = DeleteTopicsRequest(
        topics=(DeleteTopicState(topic_id=topic_id),),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
    )
    (result,) = wire.call(request, DeleteTopicsResponse).responses
    return result


def test_another_tenants_topic_id_is_unknown(stack: GatewayStack) -> None:
    create(stack, "acme", TOPIC)
    acme, bolt = login(stack, "acme"), login(stack, "bolt")
    try:
        own = by_id(acme, None, TOPIC)
        assert own.error_code == 0 and own.topic_id is not None  # type: ignore[attr-defined]
        acme_id = own.topic_id  # type: ignore[attr-defined]
        # acme looks its own topic up by id: found, named as acme knows it.
        again = by_id(acme, acme_id)
        assert (again.error_code, again.name) == (0, TOPIC)  # type: ignore[attr-defined]

        # bolt, holding acme's id: as unknown as an id nobody has, and nothing named.
        for probe in (acme_id, uuid.uuid4()):
            seen = by_id(bolt, probe)
            assert seen.error_code == UNKNOWN_TOPIC_ID, seen  # type: ignore[attr-defined]
            assert seen.name is None and seen.partitions == ()  # type: ignore[attr-defined]
            refused = delete_by_id(bolt, probe)
            assert refused.error_code == UNKNOWN_TOPIC_ID, refused  # type: ignore[attr-defined]
            assert refused.name is None  # type: ignore[attr-defined]
            assert TOPIC not in repr(seen) + repr(refused)

        # acme's topic is untouched; acme deletes it by id.
        assert by_id(acme, acme_id).error_code == 0  # type: ignore[attr-defined]
        deleted = delete_by_id(acme, acme_id)
        assert (deleted.error_code, deleted.name) == (0, TOPIC)  # type: ignore[attr-defined]
    finally:
        acme.close()
        bolt.close()


def fetch_by_id(version: int, topic_id: uuid.UUID) -> Any:
    module = request_module(FETCH, version)
    partition = make(
        module, "FetchPartition", partition=0, fetch_offset=0, partition_max_bytes=1 << 20
    )
    return make(
        module,
        "FetchRequest",
        max_wait=datetime.timedelta(milliseconds=10),
        min_bytes=1,
        topics=(make(module, "FetchTopic", topic_id=topic_id, partitions=(partition,)),),
        forgotten_topics_data=(),
    )


def fetched(wire: RawConnection, version: int, topic_id: uuid.UUID) -> tuple[int, int, bytes]:
    """(error code, high watermark, raw answer) of partition 0 of `topic_id`, fetched from 0."""
    wire.send(frame(request_bytes(fetch_by_id(version, topic_id), wire.correlation_id())))
    raw = wire.read_frame(TIMEOUT_S)
    _, response = decode_response(response_module(FETCH, version).FetchResponse, raw)
    (topic,) = response.responses
    assert topic.topic_id == topic_id, topic
    (partition,) = topic.partitions
    # empty, never null, even when refused: librdkafka fails the whole answer on a null record
    # set ("invalid MessageSetSize -1"), as Kafka never sends one
    assert partition.records is not None, partition
    return partition.error_code, partition.high_watermark, raw


def produce_by_id(wire: RawConnection, topic_id: uuid.UUID, value: bytes) -> tuple[int, int]:
    """(error code, base offset) of one record produced to partition 0 by id (Produce v13)."""
    module = request_module(PRODUCE, 13)
    data = make(module, "PartitionProduceData", index=0, records=simple_batch([value]))
    request = make(
        module,
        "ProduceRequest",
        acks=-1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(make(module, "TopicProduceData", topic_id=topic_id, partition_data=(data,)),),
    )
    (topic,) = wire.call(request, response_module(PRODUCE, 13).ProduceResponse).responses
    assert topic.topic_id == topic_id, topic
    (partition,) = topic.partition_responses
    return partition.error_code, partition.base_offset


def test_produce_and_fetch_by_another_tenants_id_are_refused(stack: GatewayStack) -> None:
    create(stack, "acme", VAULT)
    with login(stack, "acme") as acme, login(stack, "bolt") as bolt:
        vault_id = by_id(acme, None, VAULT).topic_id  # type: ignore[attr-defined]
        ranges = advertised_ranges(bolt)
        assert ranges[PRODUCE][1] == 13 and ranges[FETCH][1] == 18  # by id, through the gateway
        # acme by id: its own record is read back, and a record produced by id lands after it.
        assert produce_by_id(acme, vault_id, b"by-id") == (0, 1)
        for version in FETCH_BY_ID:
            code, high_watermark, raw = fetched(acme, version, vault_id)
            assert (code, high_watermark) == (0, 2) and SECRET in raw and b"by-id" in raw

        # bolt with acme's id (and with an id nobody has): refused, nothing read, nothing written.
        for probe in (vault_id, uuid.uuid4()):
            assert produce_by_id(bolt, probe, b"intruder") == (UNKNOWN_TOPIC_ID, -1)
            for version in FETCH_BY_ID:
                code, high_watermark, raw = fetched(bolt, version, probe)
                assert (code, high_watermark) == (UNKNOWN_TOPIC_ID, -1), version
                assert SECRET not in raw and b"by-id" not in raw
        code, high_watermark, raw = fetched(acme, 18, vault_id)
        assert (code, high_watermark) == (0, 2) and b"intruder" not in raw


class _Sent(logging.Handler):
    """librdkafka's protocol debug lines ("Sent FetchRequest (v16, …)"): the versions it sent."""

    def __init__(self) -> None:
        super().__init__()
        self.fetch_versions: set[int] = set()

    def emit(self, record: logging.LogRecord) -> None:
        found = _SENT_FETCH.search(record.getMessage())
        if found:
            self.fetch_versions.add(int(found.group(1)))


_SENT_FETCH = re.compile(r"Sent FetchRequest \(v(\d+)")


def test_librdkafka_fetches_by_id_through_the_gateway(stack: GatewayStack) -> None:
    """A real client on the by-id versions: librdkafka 2.16 reads acme's records through the
    gateway with Fetch v13+ (v16: its highest), so the raw path's id mapping carries them."""
    create(stack, "acme", "ids-client")
    sent = _Sent()
    logger = logging.getLogger("tests.adversarial.librdkafka")
    logger.addHandler(sent)
    logger.setLevel(logging.DEBUG)
    config = stack.client_config(
        "acme",
        **{"group.id": "ids-client", "auto.offset.reset": "earliest", "debug": "protocol"},
    )
    consumer = Consumer(config, logger=logger)
    try:
        consumer.subscribe(["ids-client"])
        read: list[bytes | None] = []

        def got_secret() -> bool:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                read.append(message.value())
            return SECRET in read

        wait_until(got_secret, timeout=TIMEOUT_S, what="acme's record read through the gateway")
    finally:
        consumer.close()
        logger.removeHandler(sent)
    assert sent.fetch_versions and min(sent.fetch_versions) >= 13, sent.fetch_versions
