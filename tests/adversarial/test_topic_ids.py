"""Attacks by topic id through the gateway (issue 27 item 4, KIP-516): a tenant that learned another
tenant's topic id must not reach that topic with it.

Defended (docs/gateway.md, "Topic ids"): a tenant sees the brokers' ids of its own topics
(Metadata v10+); an id in a request resolves to the fleet topic with that id and is used only when
that topic is in the caller's namespace, else the answer is UNKNOWN_TOPIC_ID, exactly as for an id
nobody has, with no name. Tenant `bolt` sends `acme`'s topic id in Metadata v12 and DeleteTopics
v6: UNKNOWN_TOPIC_ID, nothing named, and acme's topic still there with its records; Fetch v13+
(by id) is not advertised, and a Fetch v13 naming the id is refused before any broker sees it.
`acme` itself looks its topic up and deletes it by id. Real broker and `pier gateway`, hand-made
frames and confluent-kafka."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.delete_topics.v6.response import DeleteTopicsResponse
from kio.schema.fetch.v13.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import TopicName
from kio.static.primitive import i32, i32Timedelta, i64

from tests.e2e.gateway.sasl_wire import advertised_ranges, exchange, login
from tests.e2e.raw_wire import RawConnection, request_bytes
from tests.gateway_stack import GatewayStack

pytestmark = pytest.mark.e2e
TOPIC = "ledger"
SECRET = b"acme-only"
UNKNOWN_TOPIC_ID = 100
TIMEOUT_S = 30.0
FETCH = 1


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

        # Fetch by id (v13+) is not advertised, and a v13 request is refused, never forwarded.
        assert advertised_ranges(bolt)[FETCH][1] < 13
        with login(stack, "bolt") as fetcher:
            request = request_bytes(fetch_by_id(acme_id), fetcher.correlation_id())
            outcome = exchange(fetcher, request, TIMEOUT_S)
            assert outcome.closed or SECRET not in (outcome.payload or b"")

        # acme's topic is untouched; acme deletes it by id.
        assert by_id(acme, acme_id).error_code == 0  # type: ignore[attr-defined]
        deleted = delete_by_id(acme, acme_id)
        assert (deleted.error_code, deleted.name) == (0, TOPIC)  # type: ignore[attr-defined]
    finally:
        acme.close()
        bolt.close()


def fetch_by_id(topic_id: uuid.UUID) -> FetchRequest:
    partition = FetchPartition(
        partition=i32(0),
        fetch_offset=i64(0),
        log_start_offset=i64(-1),
        partition_max_bytes=i32(1 << 20),
    )
    return FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=10)),
        min_bytes=i32(1),
        topics=(FetchTopic(topic_id=topic_id, partitions=(partition,)),),
        forgotten_topics_data=(),
    )
