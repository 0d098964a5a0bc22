"""Attacks on the tenant boundary over the Kafka protocol that held (issue 21): kept as tests.

Tenant `bolt` owns topics `orders` (2 partitions), `secret_stuff` and `ledger` holding records
marked `BOLTSECRET`, groups `g` and `audit` with committed offsets, and a live member in group
`live`. Tenant `acme`, hostile, then tries, over raw frames after a real SASL login, to read,
change and disturb bolt's things by bolt's fleet names (`bolt_orders`: the gateway prefixes every
name, so acme only ever reaches `acme_bolt_orders`), by a name containing `_`, by a regex
subscription, by group ids and transactional ids with bolt's prefix; to reach the fleet's internal
topics (a forged usage record among them), broker and logger configs, and topic configs that would
harm the fleet; to learn broker addresses or link cluster ids; to log in naming another identity,
replay a recorded SCRAM login, confuse the SASL exchange or re-authenticate as someone else; to
avoid paying (acks=0) or escape its quota by rotating client ids. Tenant `cora`, whose accounts
need ACLs, has a reader allowed only READ on topic `orders` and group `readers`: it tries
everything else in its own tenant. Each test asserts the defended answer precisely (the error
code per partition or resource, a refused login and a closed connection, a throttle, a usage
record) and, where the attack would change something, that the victim's state (end offsets,
partitions, configs, committed offsets, members) is as before. The attacks covered elsewhere are
listed in docs/security.md. One stack for the module; blocking, pytest's main thread.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    ConfigResource,
    NewTopic,
)
from kio.schema.alter_configs.v2 import request as alter_configs_req
from kio.schema.alter_configs.v2 import response as alter_configs_res
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.create_partitions.v3 import request as create_partitions_req
from kio.schema.create_partitions.v3 import response as create_partitions_res
from kio.schema.create_topics.v7 import request as create_topics_req
from kio.schema.create_topics.v7.response import CreateTopicsResponse
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.delete_groups.v2.response import DeleteGroupsResponse
from kio.schema.delete_records.v2 import request as delete_records_req
from kio.schema.delete_records.v2 import response as delete_records_res
from kio.schema.delete_topics.v5.request import DeleteTopicsRequest
from kio.schema.delete_topics.v5.response import DeleteTopicsResponse
from kio.schema.describe_cluster.v0.request import DescribeClusterRequest
from kio.schema.describe_cluster.v0.response import DescribeClusterResponse
from kio.schema.describe_configs.v4 import request as describe_configs_req
from kio.schema.describe_configs.v4 import response as describe_configs_res
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.describe_groups.v5.response import DescribeGroupsResponse
from kio.schema.describe_producers.v0 import request as describe_producers_req
from kio.schema.describe_producers.v0 import response as describe_producers_res
from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
from kio.schema.describe_transactions.v0.response import DescribeTransactionsResponse
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.fetch.v12 import response as fetch_res
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.find_coordinator.v4.response import FindCoordinatorResponse
from kio.schema.incremental_alter_configs.v1 import request as inc_alter_req
from kio.schema.incremental_alter_configs.v1 import response as inc_alter_res
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.init_producer_id.v4.response import InitProducerIdResponse
from kio.schema.join_group.v7 import request as join_req
from kio.schema.join_group.v7.response import JoinGroupResponse
from kio.schema.leave_group.v4 import request as leave_req
from kio.schema.leave_group.v4.response import LeaveGroupResponse
from kio.schema.list_groups.v4.request import ListGroupsRequest
from kio.schema.list_groups.v4.response import ListGroupsResponse
from kio.schema.list_offsets.v7 import request as list_offsets_req
from kio.schema.list_offsets.v7 import response as list_offsets_res
from kio.schema.list_transactions.v0.request import ListTransactionsRequest
from kio.schema.list_transactions.v0.response import ListTransactionsResponse
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.offset_commit.v8 import request as commit_req
from kio.schema.offset_commit.v8 import response as commit_res
from kio.schema.offset_delete.v0 import request as offset_delete_req
from kio.schema.offset_delete.v0 import response as offset_delete_res
from kio.schema.offset_fetch.v8 import request as offset_fetch_req
from kio.schema.offset_fetch.v8 import response as offset_fetch_res
from kio.schema.offset_for_leader_epoch.v4 import request as epoch_req
from kio.schema.offset_for_leader_epoch.v4 import response as epoch_res
from kio.schema.produce.v9 import request as produce_req
from kio.schema.produce.v9.response import ProduceResponse
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
from kio.schema.sync_group.v5 import request as sync_req
from kio.schema.sync_group.v5.response import SyncGroupResponse
from kio.schema.types import TopicName, TransactionalId

from brokers.records.builder import build_batch
from brokers.wire.errors import ErrorCode
from gateway.auth.authenticator import FAILED_MESSAGE
from gateway.kafka.sasl_gate import CHANGED_IDENTITY
from tenancy.domain import DEFAULT_ENTITY, QuotaEntity
from tenancy.quota_chain import QUOTA_NAMES
from tenancy.usage import TrafficRecord, encode, traffic_id
from tests.e2e.gateway.broker_log import usage_records
from tests.e2e.gateway.sasl_wire import authenticate, login, open_raw
from tests.e2e.raw_wire import RawConnection, decode_response, frame, request_bytes
from tests.e2e.request_fuzz import plain_entity
from tests.gateway_stack import OPERATOR, Credentials, GatewayStack
from tests.polling import wait_until
from tests.unit.gateway.auth.scram_client import ScramClient

pytestmark = pytest.mark.e2e

TIMEOUT_S = 30.0
SECRET = "BOLTSECRET"
BOLT_TOPICS = {"orders": 2, "secret_stuff": 1, "ledger": 1}
BOLT_RECORDS = 6  # per partition
JOURNAL = "journal"  # bolt's transactions write here: not part of the state attacks must keep
BOLT_GROUPS = ("g", "audit")
LIVE_GROUP = "live"
INTERNAL = ("__consumer_offsets", "__transaction_state", "__usage")
# Bolt's topics by their fleet names: what a hostile acme would type after reading a log line.
BOLT_FLEET_TOPICS = ("bolt_orders", "bolt_secret_stuff")
# ConsumerProtocolSubscription v0: topics ["orders"], no user data.
SUBSCRIPTION = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x06orders" + b"\xff\xff\xff\xff"
UNKNOWN_TOPIC = ErrorCode.unknown_topic_or_partition
MS = datetime.timedelta(milliseconds=1)


def build(cls: Any, **fields: Any) -> Any:
    """A kio entity: plain values everywhere, `fields` set."""
    return dataclasses.replace(plain_entity(cls), **fields)


@dataclass(frozen=True)
class BoltState:
    """What an attack on bolt would change, as bolt's own clients see it."""

    partitions: dict[str, int]
    watermarks: dict[tuple[str, int], tuple[int, int]]
    retention: dict[str, str]
    committed: dict[str, dict[tuple[str, int], int]]


def bolt_state(stack: GatewayStack) -> BoltState:
    admin = AdminClient(stack.client_config("bolt"))
    topics = admin.list_topics(timeout=TIMEOUT_S).topics
    partitions = {name: len(t.partitions) for name, t in topics.items()}
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in BOLT_TOPICS]
    retention = {
        resource.name: str(future.result(TIMEOUT_S)["retention.ms"].value)
        for resource, future in admin.describe_configs(resources).items()
    }
    consumer = Consumer(stack.client_config("bolt", **{"group.id": "bolt-state-reader"}))
    try:
        watermarks = {
            (name, p): consumer.get_watermark_offsets(
                TopicPartition(name, p), timeout=TIMEOUT_S, cached=False
            )
            for name, count in BOLT_TOPICS.items()
            for p in range(count)
        }
    finally:
        consumer.close()
    committed = {}
    for group in BOLT_GROUPS:
        reader = Consumer(stack.client_config("bolt", **{"group.id": group}))
        try:
            wanted = [TopicPartition(n, p) for n, c in BOLT_TOPICS.items() for p in range(c)]
            committed[group] = {
                (tp.topic, tp.partition): tp.offset
                for tp in reader.committed(wanted, timeout=TIMEOUT_S)
            }
        finally:
            reader.close()
    return BoltState(partitions, watermarks, retention, committed)


@pytest.fixture(scope="module")
def gateway_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    # No auto-creation: a probe by name must never conjure an empty topic of acme's that a later
    # probe would then find. Joins here run at once, with short sessions allowed.
    with GatewayStack(
        Path(tmp_path_factory.mktemp("held-kafka")),
        broker_config={
            "auto.create.topics.enable": "false",
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "100",
        },
    ) as stack:
        yield stack


def assigned_after_a_poll(consumer: Consumer) -> bool:
    consumer.poll(0.2)
    return bool(consumer.assignment())


@pytest.fixture(scope="module")
def bolt(gateway_stack: GatewayStack) -> Iterator[BoltState]:
    """Bolt's topics, records, committed offsets and one live group member; its state before."""
    stack = gateway_stack
    admins = [AdminClient(stack.client_config(t)) for t in ("bolt", "acme")]  # kept referenced
    futures = [
        *admins[0]
        .create_topics(
            [NewTopic(n, num_partitions=c, replication_factor=1) for n, c in BOLT_TOPICS.items()]
            + [NewTopic(JOURNAL, num_partitions=1, replication_factor=1)]
        )
        .values(),
        *admins[1].create_topics([NewTopic("orders", 1, 1)]).values(),
    ]
    for future in futures:
        future.result(TIMEOUT_S)
    producer = Producer(stack.client_config("bolt", acks="all"))
    for name, count in BOLT_TOPICS.items():
        for p in range(count):
            for i in range(BOLT_RECORDS):
                producer.produce(name, f"{SECRET}-{name}-{i}".encode(), partition=p)
    assert producer.flush(TIMEOUT_S) == 0
    for group in BOLT_GROUPS:
        committer = Consumer(stack.client_config("bolt", **{"group.id": group}))
        try:
            committer.commit(
                offsets=[TopicPartition(n, p, 2) for n, c in BOLT_TOPICS.items() for p in range(c)],
                asynchronous=False,
            )
        finally:
            committer.close()
    member = Consumer(
        stack.client_config(
            "bolt",
            **{"group.id": LIVE_GROUP, "client.id": f"{SECRET}-member"},
            **{"enable.auto.commit": "false"},
        )
    )
    try:
        member.subscribe(["orders"])
        wait_until(
            functools.partial(assigned_after_a_poll, member),
            what="bolt's live member assigned",
            timeout=TIMEOUT_S,
            interval=0,
        )
        yield bolt_state(stack)
    finally:
        member.close()


def call(stack: GatewayStack, tenant: str, request: Any, response_cls: Any) -> Any:
    with login(stack, tenant) as connection:
        return connection.call(request, response_cls, timeout=TIMEOUT_S)


# ---------------------------------------------------------------- reads by bolt's fleet names


def fetch(topic: str) -> Any:
    partition = build(fetch_req.FetchPartition, partition=0, partition_max_bytes=1 << 20)
    return build(
        fetch_req.FetchRequest,
        replica_id=-1,
        max_wait=10 * MS,
        min_bytes=0,
        max_bytes=1 << 20,
        session_epoch=-1,
        topics=(build(fetch_req.FetchTopic, topic=topic, partitions=(partition,)),),
        forgotten_topics_data=(),
    )


def list_offsets(topic: str) -> Any:
    partition = build(list_offsets_req.ListOffsetsPartition, partition_index=0, timestamp=-1)
    return build(
        list_offsets_req.ListOffsetsRequest,
        replica_id=-1,
        topics=(build(list_offsets_req.ListOffsetsTopic, name=topic, partitions=(partition,)),),
    )


def leader_epoch(topic: str) -> Any:
    partition = build(epoch_req.OffsetForLeaderPartition, partition=0, leader_epoch=0)
    return build(
        epoch_req.OffsetForLeaderEpochRequest,
        replica_id=-1,
        topics=(build(epoch_req.OffsetForLeaderTopic, topic=topic, partitions=(partition,)),),
    )


def describe_producers(topic: str) -> Any:
    wanted = build(describe_producers_req.TopicRequest, name=topic, partition_indexes=(0,))
    return build(describe_producers_req.DescribeProducersRequest, topics=(wanted,))


def partition_codes(response: Any, topics: str, partitions: str) -> set[int]:
    return {int(p.error_code) for t in getattr(response, topics) for p in getattr(t, partitions)}


READS = {
    "Fetch": (fetch, fetch_res.FetchResponse, ("responses", "partitions")),
    "ListOffsets": (list_offsets, list_offsets_res.ListOffsetsResponse, ("topics", "partitions")),
    "OffsetForLeaderEpoch": (
        leader_epoch,
        epoch_res.OffsetForLeaderEpochResponse,
        ("topics", "partitions"),
    ),
    "DescribeProducers": (
        describe_producers,
        describe_producers_res.DescribeProducersResponse,
        ("topics", "partitions"),
    ),
}


@pytest.mark.parametrize("topic", [*BOLT_FLEET_TOPICS, *INTERNAL])
@pytest.mark.parametrize("api", sorted(READS))
def test_attack_read_bolts_or_internal_topic_by_its_fleet_name_finds_nothing(
    gateway_stack: GatewayStack, bolt: BoltState, api: str, topic: str
) -> None:
    """Fetch/ListOffsets/OffsetForLeaderEpoch/DescribeProducers of `bolt_orders` or
    `__consumer_offsets`: the gateway asks for `acme_<name>`, which does not exist."""
    make, response_cls, (topics, partitions) = READS[api]
    response = call(gateway_stack, "acme", make(topic), response_cls)
    assert partition_codes(response, topics, partitions) == {UNKNOWN_TOPIC}
    assert SECRET.encode() not in repr(response).encode()


@pytest.mark.parametrize("topic", [*BOLT_FLEET_TOPICS, *INTERNAL])
def test_attack_metadata_and_configs_of_bolts_or_internal_topic_find_nothing(
    gateway_stack: GatewayStack, bolt: BoltState, topic: str
) -> None:
    metadata = MetadataRequest(
        topics=(MetadataRequestTopic(name=TopicName(topic), topic_id=uuid.UUID(int=0)),),
        allow_auto_topic_creation=True,  # the broker's auto-creation is off; asked anyway
        include_topic_authorized_operations=True,
    )
    answer = call(gateway_stack, "acme", metadata, MetadataResponse)
    assert [(t.name, t.error_code, t.partitions) for t in answer.topics] == [
        (topic, UNKNOWN_TOPIC, ())
    ]
    resource = build(
        describe_configs_req.DescribeConfigsResource,
        resource_type=2,
        resource_name=topic,
        configuration_keys=None,
    )
    request = build(describe_configs_req.DescribeConfigsRequest, resources=(resource,))
    configs = call(gateway_stack, "acme", request, describe_configs_res.DescribeConfigsResponse)
    assert [(r.resource_name, r.error_code, r.configs) for r in configs.results] == [
        (topic, UNKNOWN_TOPIC, ())
    ]


# ---------------------------------------------------------------- writes by bolt's fleet names


def produce(topic: str, value: bytes = b"acme-was-here") -> Any:
    data = build(produce_req.PartitionProduceData, index=0, records=build_batch([(b"k", value)]))
    return build(
        produce_req.ProduceRequest,
        transactional_id=None,
        acks=-1,
        timeout=5000 * MS,
        topic_data=(build(produce_req.TopicProduceData, name=topic, partition_data=(data,)),),
    )


def delete_topics(topic: str) -> Any:
    return build(DeleteTopicsRequest, topic_names=(topic,), timeout=5000 * MS)


def delete_records(topic: str) -> Any:
    partition = build(delete_records_req.DeleteRecordsPartition, partition_index=0, offset=-1)
    return build(
        delete_records_req.DeleteRecordsRequest,
        topics=(build(delete_records_req.DeleteRecordsTopic, name=topic, partitions=(partition,)),),
        timeout=5000 * MS,
    )


def create_partitions(topic: str) -> Any:
    wanted = build(
        create_partitions_req.CreatePartitionsTopic, name=topic, count=8, assignments=None
    )
    return build(
        create_partitions_req.CreatePartitionsRequest,
        topics=(wanted,),
        timeout=5000 * MS,
        validate_only=False,
    )


def alter_configs(topic: str) -> Any:
    config = build(alter_configs_req.AlterableConfig, name="retention.ms", value="1")
    resource = build(
        alter_configs_req.AlterConfigsResource,
        resource_type=2,
        resource_name=topic,
        configs=(config,),
    )
    return build(alter_configs_req.AlterConfigsRequest, resources=(resource,), validate_only=False)


def incremental_alter_configs(topic: str) -> Any:
    config = build(
        inc_alter_req.AlterableConfig, name="retention.ms", config_operation=0, value="1"
    )
    resource = build(
        inc_alter_req.AlterConfigsResource, resource_type=2, resource_name=topic, configs=(config,)
    )
    return build(
        inc_alter_req.IncrementalAlterConfigsRequest, resources=(resource,), validate_only=False
    )


def topic_level_codes(response: Any) -> set[int]:
    for field_name in ("responses", "results"):
        if hasattr(response, field_name):
            return {int(entry.error_code) for entry in getattr(response, field_name)}
    raise AssertionError(f"no per-topic results in {type(response).__name__}")


WRITES: dict[str, tuple[Callable[[str], Any], Any, Callable[[Any], set[int]]]] = {
    "Produce": (produce, ProduceResponse, lambda r: partition_codes(r, "responses", "partition_responses")),
    "DeleteTopics": (delete_topics, DeleteTopicsResponse, topic_level_codes),
    "DeleteRecords": (
        delete_records,
        delete_records_res.DeleteRecordsResponse,
        lambda r: partition_codes(r, "topics", "partitions"),
    ),
    "CreatePartitions": (
        create_partitions,
        create_partitions_res.CreatePartitionsResponse,
        topic_level_codes,
    ),
    "AlterConfigs": (alter_configs, alter_configs_res.AlterConfigsResponse, topic_level_codes),
    "IncrementalAlterConfigs": (
        incremental_alter_configs,
        inc_alter_res.IncrementalAlterConfigsResponse,
        lambda r: {int(x.error_code) for x in r.responses},
    ),
}  # fmt: skip


@pytest.mark.parametrize("topic", [*BOLT_FLEET_TOPICS, *INTERNAL])
@pytest.mark.parametrize("api", sorted(WRITES))
def test_attack_change_bolts_or_internal_topic_by_its_fleet_name_changes_nothing(
    gateway_stack: GatewayStack, bolt: BoltState, api: str, topic: str
) -> None:
    """Produce to, delete, truncate, grow or reconfigure `bolt_orders` or an internal topic."""
    make, response_cls, codes = WRITES[api]
    response = call(gateway_stack, "acme", make(topic), response_cls)
    assert codes(response) == {UNKNOWN_TOPIC}
    if topic.startswith("bolt_"):
        assert bolt_state(gateway_stack) == bolt


def test_attack_forged_usage_record_never_reaches_usage(
    gateway_stack: GatewayStack, bolt: BoltState
) -> None:
    """acme writes a well-formed usage record billing bolt to `__usage`: refused, never stored."""
    forged = TrafficRecord(
        id=traffic_id("gw-forged", uuid.uuid4().hex, 1),
        tenant="bolt",
        principal="sa-forged",
        client_id="forger",
        topic="orders",
        start_ms=0,
        end_ms=1000,
        bytes_in=10**12,
    )
    key, value = encode(forged)
    data = build(produce_req.PartitionProduceData, index=0, records=build_batch([(key, value)]))
    request = dataclasses.replace(
        produce("__usage"),
        topic_data=(build(produce_req.TopicProduceData, name="__usage", partition_data=(data,)),),
    )
    response = call(gateway_stack, "acme", request, ProduceResponse)
    assert partition_codes(response, "responses", "partition_responses") == {UNKNOWN_TOPIC}
    assert gateway_stack.broker is not None
    assert forged.id not in usage_records(gateway_stack.broker.bootstrap)


def test_attack_a_name_containing_bolts_prefix_is_acmes_own(
    gateway_stack: GatewayStack, bolt: BoltState
) -> None:
    """acme creates `bolt_ledger` and writes to it: a topic of acme's, next to bolt's `ledger`."""
    admin = AdminClient(gateway_stack.client_config("acme"))
    admin.create_topics([NewTopic("bolt_ledger", 3, 1)])["bolt_ledger"].result(TIMEOUT_S)
    response = call(gateway_stack, "acme", produce("bolt_ledger", b"acme-ledger"), ProduceResponse)
    assert partition_codes(response, "responses", "partition_responses") == {ErrorCode.none}
    acme_topics = admin.list_topics(timeout=TIMEOUT_S).topics
    assert len(acme_topics["bolt_ledger"].partitions) == 3
    assert "ledger" not in acme_topics
    bolt_admin = AdminClient(gateway_stack.client_config("bolt"))
    bolt_topics = bolt_admin.list_topics(timeout=TIMEOUT_S).topics
    assert set(bolt_topics) == {*BOLT_TOPICS, JOURNAL}
    assert bolt_state(gateway_stack) == bolt


def test_attack_regex_subscription_matches_only_own_topics(
    gateway_stack: GatewayStack, bolt: BoltState
) -> None:
    """A consumer of acme subscribed to `^.*` is assigned acme's topics only, reads no record of
    bolt's, and never a fleet or internal name."""
    marker = f"acme-marker-{uuid.uuid4().hex}".encode()
    producer = Producer(gateway_stack.client_config("acme", acks="all"))
    producer.produce("orders", marker)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer(
        gateway_stack.client_config(
            "acme",
            **{"group.id": f"regex-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"},
            **{"topic.metadata.refresh.interval.ms": "1000"},
        )
    )
    values: list[bytes] = []
    assigned: set[str] = set()
    try:
        consumer.subscribe(["^.*"])

        def marker_read() -> bool:
            message = consumer.poll(0.5)
            assigned.update(tp.topic for tp in consumer.assignment())
            if message is not None and message.error() is None:
                values.append(message.value() or b"")
            return marker in values

        wait_until(marker_read, what="acme's marker read", timeout=TIMEOUT_S, interval=0)
    finally:
        consumer.close()
    acme_topics = set(AdminClient(gateway_stack.client_config("acme")).list_topics().topics)
    assert "orders" in assigned and assigned <= acme_topics
    assert not {"secret_stuff", "ledger"} & assigned
    assert not any(name.startswith(("acme_", "__")) for name in assigned)
    assert not [v for v in values if SECRET.encode() in v]


# ---------------------------------------------------------------- groups


def offset_fetch_all(group: str) -> Any:
    wanted = build(offset_fetch_req.OffsetFetchRequestGroup, group_id=group, topics=None)
    return build(offset_fetch_req.OffsetFetchRequest, groups=(wanted,), require_stable=False)


def test_attack_read_bolts_group_by_its_fleet_name_finds_nothing(
    gateway_stack: GatewayStack, bolt: BoltState
) -> None:
    described = call(
        gateway_stack,
        "acme",
        build(
            DescribeGroupsRequest,
            groups=("bolt_g", "bolt_live"),
            include_authorized_operations=True,
        ),
        DescribeGroupsResponse,
    )
    # `bolt_live` may be acme's own by now (the join attack below uses the name), never bolt's.
    assert [(g.group_id, g.error_code, g.members) for g in described.groups] == [
        ("bolt_g", 0, ()),
        ("bolt_live", 0, ()),
    ]
    assert {g.group_state for g in described.groups} <= {"Dead", "Empty"}
    offsets = call(
        gateway_stack, "acme", offset_fetch_all("bolt_g"), offset_fetch_res.OffsetFetchResponse
    )
    assert [(g.group_id, g.error_code, g.topics) for g in offsets.groups] == [("bolt_g", 0, ())]
    listed = call(
        gateway_stack, "acme", build(ListGroupsRequest, states_filter=()), ListGroupsResponse
    )
    names = {g.group_id for g in listed.groups}
    assert not names & {"g", "audit", "bolt_g"}, names  # names acme never uses itself


def test_attack_commit_delete_and_drop_bolts_group_by_its_fleet_name_changes_nothing(
    gateway_stack: GatewayStack, bolt: BoltState
) -> None:
    partition = build(
        commit_req.OffsetCommitRequestPartition, partition_index=0, committed_offset=0
    )
    commit = build(
        commit_req.OffsetCommitRequest,
        group_id="bolt_audit",
        generation_id_or_member_epoch=-1,
        member_id="",
        group_instance_id=None,
        topics=(
            build(commit_req.OffsetCommitRequestTopic, name="bolt_orders", partitions=(partition,)),
        ),
    )
    committed = call(gateway_stack, "acme", commit, commit_res.OffsetCommitResponse)
    assert partition_codes(committed, "topics", "partitions") == {UNKNOWN_TOPIC}
    delete = build(
        offset_delete_req.OffsetDeleteRequest,
        group_id="bolt_audit",
        topics=(
            build(
                offset_delete_req.OffsetDeleteRequestTopic,
                name="bolt_orders",
                partitions=(
                    build(offset_delete_req.OffsetDeleteRequestPartition, partition_index=0),
                ),
            ),
        ),
    )
    deleted = call(gateway_stack, "acme", delete, offset_delete_res.OffsetDeleteResponse)
    assert deleted.error_code == ErrorCode.group_id_not_found
    dropped = call(
        gateway_stack,
        "acme",
        build(DeleteGroupsRequest, groups_names=("bolt_audit", "bolt_g")),
        DeleteGroupsResponse,
    )
    assert {(r.group_id, r.error_code) for r in dropped.results} == {
        ("bolt_audit", ErrorCode.group_id_not_found),
        ("bolt_g", ErrorCode.group_id_not_found),
    }
    assert bolt_state(gateway_stack) == bolt


def join(group: str, member_id: str) -> Any:
    protocol = build(join_req.JoinGroupRequestProtocol, name="range", metadata=SUBSCRIPTION)
    return build(
        join_req.JoinGroupRequest,
        group_id=group,
        session_timeout=10_000 * MS,
        rebalance_timeout=1_000 * MS,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(protocol,),
    )


@pytest.mark.parametrize("group", [LIVE_GROUP, f"bolt_{LIVE_GROUP}"])
def test_attack_join_bolts_live_group_as_a_new_member_lands_in_acmes_own(
    gateway_stack: GatewayStack, bolt: BoltState, group: str
) -> None:
    """JoinGroup `live` (bolt's group's name) or `bolt_live` with an empty member id, then with
    the id given, SyncGroup, LeaveGroup: acme is alone in a group of its own; bolt's member stays."""
    with login(gateway_stack, "acme") as connection:
        first = connection.call(join(group, ""), JoinGroupResponse, timeout=TIMEOUT_S)
        assert first.error_code == ErrorCode.member_id_required and first.member_id
        joined = connection.call(join(group, first.member_id), JoinGroupResponse, timeout=TIMEOUT_S)
        assert joined.error_code == 0
        assert joined.leader == joined.member_id == first.member_id
        assert [m.member_id for m in joined.members] == [first.member_id]
        sync = build(
            sync_req.SyncGroupRequest,
            group_id=group,
            generation_id=joined.generation_id,
            member_id=joined.member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=(
                build(
                    sync_req.SyncGroupRequestAssignment, member_id=joined.member_id, assignment=b""
                ),
            ),
        )
        synced = connection.call(sync, SyncGroupResponse, timeout=TIMEOUT_S)
        assert synced.error_code == 0
        leave = build(
            leave_req.LeaveGroupRequest,
            group_id=group,
            members=(
                build(leave_req.MemberIdentity, member_id=joined.member_id, group_instance_id=None),
            ),
        )
        left = connection.call(leave, LeaveGroupResponse, timeout=TIMEOUT_S)
        assert left.error_code == 0
    view = AdminClient(gateway_stack.client_config("bolt"))
    described = view.describe_consumer_groups([LIVE_GROUP])[LIVE_GROUP].result(TIMEOUT_S)
    assert [m.client_id for m in described.members] == [f"{SECRET}-member"]
    assert str(described.state).split(".")[-1] == "STABLE"


# ---------------------------------------------------------------- transactional ids


def test_attack_transactional_ids_of_bolt_are_neither_seen_nor_fenced(
    gateway_stack: GatewayStack, bolt: BoltState
) -> None:
    """bolt runs transactions as `tx`. acme describes and lists transactions by `tx` and
    `bolt_tx` (nothing of bolt's), then InitProducerId with both ids: each is acme's own id,
    and bolt's producer, which a fenced epoch would kill, still commits."""
    producer = Producer(
        gateway_stack.client_config("bolt", **{"transactional.id": "tx", "acks": "all"})
    )
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce(JOURNAL, f"{SECRET}-tx-1".encode())
    producer.commit_transaction(TIMEOUT_S)
    described = call(
        gateway_stack,
        "acme",
        DescribeTransactionsRequest(
            transactional_ids=(TransactionalId("tx"), TransactionalId("bolt_tx"))
        ),
        DescribeTransactionsResponse,
    )
    assert [(t.transactional_id, t.error_code, t.topics) for t in described.transaction_states] == [
        ("tx", ErrorCode.transactional_id_not_found, ()),
        ("bolt_tx", ErrorCode.transactional_id_not_found, ()),
    ]
    listed = call(
        gateway_stack,
        "acme",
        ListTransactionsRequest(state_filters=(), producer_id_filters=()),
        ListTransactionsResponse,
    )
    assert listed.error_code == 0 and listed.transaction_states == ()
    producer_ids = set()
    for transactional_id in ("tx", "bolt_tx"):
        init = build(
            InitProducerIdRequest,
            transactional_id=transactional_id,
            transaction_timeout=60_000 * MS,
            producer_id=-1,
            producer_epoch=-1,
        )
        answer = call(gateway_stack, "acme", init, InitProducerIdResponse)
        assert answer.error_code == 0 and answer.producer_epoch == 0, answer
        producer_ids.add(answer.producer_id)
    bolt_view = call(
        gateway_stack,
        "bolt",
        DescribeTransactionsRequest(transactional_ids=(TransactionalId("tx"),)),
        DescribeTransactionsResponse,
    )
    (bolt_tx,) = bolt_view.transaction_states
    assert bolt_tx.error_code == 0 and bolt_tx.producer_id not in producer_ids
    producer.begin_transaction()  # a fenced producer fails here or at the commit
    producer.produce(JOURNAL, f"{SECRET}-tx-2".encode())
    producer.commit_transaction(TIMEOUT_S)


# ---------------------------------------------------------------- error messages


def create_topic(name: str, partitions: int, **configs: str) -> Any:
    topic = build(
        create_topics_req.CreatableTopic,
        name=name,
        num_partitions=partitions,
        replication_factor=1,
        assignments=(),
        configs=tuple(
            build(create_topics_req.CreatableTopicConfig, name=k, value=v)
            for k, v in configs.items()
        ),
    )
    return build(
        create_topics_req.CreateTopicsRequest,
        topics=(topic,),
        timeout=5000 * MS,
        validate_only=False,
    )


def test_attack_error_messages_never_name_fleet_or_internal_names(
    gateway_stack: GatewayStack, bolt: BoltState
) -> None:
    """Refusals the brokers word with fleet names (`Topic 'acme_orders' already exists.`) come
    back in acme's words or without a message: never `acme_`, `bolt_` or an internal topic."""
    messages: dict[str, str | None] = {}
    exists = call(gateway_stack, "acme", create_topic("orders", 1), CreateTopicsResponse)
    (result,) = exists.topics
    assert result.error_code == ErrorCode.topic_already_exists
    messages["create existing"] = result.error_message
    bad = call(
        gateway_stack,
        "acme",
        create_topic("fresh", 1, **{"cleanup.policy": "nonsense"}),
        CreateTopicsResponse,
    )
    (result,) = bad.topics
    assert result.error_code == ErrorCode.invalid_config
    messages["create invalid config"] = result.error_message
    shrink = call(
        gateway_stack,
        "acme",
        dataclasses.replace(
            create_partitions("orders"),
            topics=(
                build(
                    create_partitions_req.CreatePartitionsTopic,
                    name="orders",
                    count=1,
                    assignments=None,
                ),
            ),
        ),
        create_partitions_res.CreatePartitionsResponse,
    )
    (result,) = shrink.results
    assert result.error_code == ErrorCode.invalid_partitions
    messages["shrink"] = result.error_message
    for topic in ("bolt_orders", "__consumer_offsets"):
        gone = call(gateway_stack, "acme", delete_topics(topic), DeleteTopicsResponse)
        message = gone.responses[0].error_message
        # acme's own word for its own (absent) topic may come back; nothing else may.
        messages[f"delete {topic}"] = None if message is None else message.replace(topic, "")
    for what, text in messages.items():
        assert text is None or not any(token in text for token in ("acme_", "bolt", "__")), (
            f"{what}: {text!r}"
        )
    assert messages["create existing"] is not None and "orders" in messages["create existing"]


# ---------------------------------------------------------------- topic configs that harm the fleet

HARMFUL_CONFIGS = [
    # (name, value, code): a file per few records, a frame per message, settings of the fleet
    ("segment.bytes", "1024", ErrorCode.invalid_config),
    ("segment.ms", "1", ErrorCode.invalid_config),
    # a compaction pass rewriting the whole log for every few bytes written
    ("min.cleanable.dirty.ratio", "0.001", ErrorCode.invalid_config),
    ("max.compaction.lag.ms", "1", ErrorCode.invalid_config),
    ("max.message.bytes", "104857600", ErrorCode.invalid_config),
    ("unclean.leader.election.enable", "true", ErrorCode.policy_violation),
    ("leader.replication.throttled.replicas", "*", ErrorCode.policy_violation),
    ("remote.storage.enable", "true", ErrorCode.policy_violation),
]


def broker_topic_config(stack: GatewayStack, fleet_topic: str) -> dict[str, tuple[str, int]]:
    """(value, source) of every config of a fleet topic, straight from the broker."""
    assert stack.broker is not None
    direct = AdminClient({"bootstrap.servers": stack.broker.bootstrap})
    resource = ConfigResource(ConfigResource.Type.TOPIC, fleet_topic)
    entries = direct.describe_configs([resource])[resource].result(TIMEOUT_S)
    return {k: (str(v.value), int(v.source)) for k, v in entries.items()}


@pytest.mark.parametrize(("name", "value", "code"), HARMFUL_CONFIGS, ids=str)
def test_attack_topic_configs_that_harm_the_fleet_are_refused(
    gateway_stack: GatewayStack, bolt: BoltState, name: str, value: str, code: ErrorCode
) -> None:
    """CreateTopics, AlterConfigs and IncrementalAlterConfigs with a config outside the allowlist
    (POLICY_VIOLATION) or past its bound (INVALID_CONFIG): refused, no topic created, acme's
    `orders` unchanged on the broker."""
    before = broker_topic_config(gateway_stack, "acme_orders")
    created = call(
        gateway_stack, "acme", create_topic("harmful", 1, **{name: value}), CreateTopicsResponse
    )
    assert [t.error_code for t in created.topics] == [code]
    config = build(alter_configs_req.AlterableConfig, name=name, value=value)
    resource = build(
        alter_configs_req.AlterConfigsResource,
        resource_type=2,
        resource_name="orders",
        configs=(config,),
    )
    alter = build(alter_configs_req.AlterConfigsRequest, resources=(resource,), validate_only=False)
    altered = call(gateway_stack, "acme", alter, alter_configs_res.AlterConfigsResponse)
    assert topic_level_codes(altered) == {code}
    incremental = incremental_alter_configs("orders")
    incremental = dataclasses.replace(
        incremental,
        resources=(
            dataclasses.replace(
                incremental.resources[0],
                configs=(
                    build(
                        inc_alter_req.AlterableConfig, name=name, config_operation=0, value=value
                    ),
                ),
            ),
        ),
    )
    answered = call(
        gateway_stack, "acme", incremental, inc_alter_res.IncrementalAlterConfigsResponse
    )
    assert {r.error_code for r in answered.responses} == {code}
    assert broker_topic_config(gateway_stack, "acme_orders") == before
    assert gateway_stack.broker is not None
    fleet = AdminClient({"bootstrap.servers": gateway_stack.broker.bootstrap})
    assert "acme_harmful" not in fleet.list_topics(timeout=TIMEOUT_S).topics


# ---------------------------------------------------------------- the fleet's own things


@pytest.mark.parametrize("resource_type,name", [(4, "0"), (4, ""), (8, "0")])
def test_attack_broker_and_logger_configs_are_refused(
    gateway_stack: GatewayStack, resource_type: int, name: str
) -> None:
    """DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on BROKER (4) or BROKER_LOGGER
    (8): CLUSTER_AUTHORIZATION_FAILED from the gateway; the broker's settings are unchanged."""
    assert gateway_stack.broker is not None
    direct = AdminClient({"bootstrap.servers": gateway_stack.broker.bootstrap})
    broker_resource = ConfigResource(ConfigResource.Type.BROKER, str(gateway_stack.broker.node_id))
    before = {
        k: v.value
        for k, v in direct.describe_configs([broker_resource])[broker_resource]
        .result(TIMEOUT_S)
        .items()
    }
    described = call(
        gateway_stack,
        "acme",
        build(
            describe_configs_req.DescribeConfigsRequest,
            resources=(
                build(
                    describe_configs_req.DescribeConfigsResource,
                    resource_type=resource_type,
                    resource_name=name,
                    configuration_keys=None,
                ),
            ),
        ),
        describe_configs_res.DescribeConfigsResponse,
    )
    assert [(r.error_code, r.configs) for r in described.results] == [
        (ErrorCode.cluster_authorization_failed, ())
    ]
    setting = "log.retention.ms" if resource_type == 4 else "root"
    value = "1" if resource_type == 4 else "DEBUG"
    alter = build(
        alter_configs_req.AlterConfigsRequest,
        resources=(
            build(
                alter_configs_req.AlterConfigsResource,
                resource_type=resource_type,
                resource_name=name,
                configs=(build(alter_configs_req.AlterableConfig, name=setting, value=value),),
            ),
        ),
        validate_only=False,
    )
    altered = call(gateway_stack, "acme", alter, alter_configs_res.AlterConfigsResponse)
    assert topic_level_codes(altered) == {ErrorCode.cluster_authorization_failed}
    incremental = build(
        inc_alter_req.IncrementalAlterConfigsRequest,
        resources=(
            build(
                inc_alter_req.AlterConfigsResource,
                resource_type=resource_type,
                resource_name=name,
                configs=(
                    build(
                        inc_alter_req.AlterableConfig, name=setting, config_operation=0, value=value
                    ),
                ),
            ),
        ),
        validate_only=False,
    )
    answered = call(
        gateway_stack, "acme", incremental, inc_alter_res.IncrementalAlterConfigsResponse
    )
    assert {r.error_code for r in answered.responses} == {ErrorCode.cluster_authorization_failed}
    after = {
        k: v.value
        for k, v in direct.describe_configs([broker_resource])[broker_resource]
        .result(TIMEOUT_S)
        .items()
    }
    assert after == before


def test_attack_addresses_handed_out_are_the_gateways_never_a_brokers(
    gateway_stack: GatewayStack, bolt: BoltState
) -> None:
    """Metadata, FindCoordinator and DescribeCluster name only the gateway's ports: a tenant is
    never told where a broker listens (it could go round the gateway), nor the fleet's id."""
    assert gateway_stack.gateway is not None and gateway_stack.broker is not None
    broker_port = int(gateway_stack.broker.bootstrap.rsplit(":", 1)[1])
    metadata = call(
        gateway_stack,
        "acme",
        MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        ),
        MetadataResponse,
    )
    coordinator = call(
        gateway_stack,
        "acme",
        build(FindCoordinatorRequest, key_type=0, coordinator_keys=("g", "bolt_g")),
        FindCoordinatorResponse,
    )
    cluster = call(
        gateway_stack,
        "acme",
        build(DescribeClusterRequest, include_cluster_authorized_operations=False),
        DescribeClusterResponse,
    )
    ports = {b.port for b in metadata.brokers} | {b.port for b in cluster.brokers}
    ports |= {c.port for c in coordinator.coordinators}
    assert broker_port not in ports
    gateway = gateway_stack.gateway
    node_port = gateway.broker_port_base + gateway_stack.broker.node_id
    assert ports == {node_port}, ports  # the gateway's port for broker 0, as clients dial it
    assert {b.host for b in metadata.brokers} == {gateway.host}
    fleet = AdminClient({"bootstrap.servers": gateway_stack.broker.bootstrap}).list_topics(
        timeout=TIMEOUT_S
    )
    assert metadata.cluster_id != fleet.cluster_id and cluster.cluster_id != fleet.cluster_id


# ---------------------------------------------------------------- a tenant's own accounts


@dataclass(frozen=True)
class Cora:
    """A tenant whose accounts need ACLs: `admin` may do anything, `reader` may only READ topic
    `orders` and group `readers`."""

    admin: Credentials
    reader: Credentials

    def config(self, stack: GatewayStack, creds: Credentials, **extra: str) -> dict[str, Any]:
        return {
            **stack.client_config("acme"),
            "sasl.username": creds.key_id,
            "sasl.password": creds.secret,
            **extra,
        }

    def state(self, stack: GatewayStack) -> dict[str, Any]:
        """What the reader might change, as the admin sees it."""
        admin = AdminClient(self.config(stack, self.admin))
        topics = admin.list_topics(timeout=TIMEOUT_S).topics
        resources = [ConfigResource(ConfigResource.Type.TOPIC, n) for n in CORA_TOPICS]
        configs = {
            r.name: str(f.result(TIMEOUT_S)["retention.ms"].value)
            for r, f in admin.describe_configs(resources).items()
        }
        consumer = Consumer(self.config(stack, self.admin, **{"group.id": "readers"}))
        try:
            marks = {
                n: consumer.get_watermark_offsets(TopicPartition(n, 0), TIMEOUT_S, cached=False)
                for n in CORA_TOPICS
            }
            committed = consumer.committed(
                [TopicPartition(n, 0) for n in CORA_TOPICS], timeout=TIMEOUT_S
            )
        finally:
            consumer.close()
        return {
            "partitions": {n: len(t.partitions) for n, t in topics.items()},
            "configs": configs,
            "marks": marks,
            "committed": {(tp.topic, tp.offset) for tp in committed},
        }


CORA_TOPICS = ("orders", "secret")


def allow(store: Any, account: str, resource: str, name: str, operation: str) -> None:
    store.create_acl(
        "cora",
        resource_type=resource,
        pattern_type="literal",
        resource_name=name,
        operation=operation,
        permission="allow",
        principal=f"User:{account}",
        actor=OPERATOR,
    )


@pytest.fixture(scope="module")
def cora(gateway_stack: GatewayStack) -> Cora:
    with gateway_stack.store() as store:
        store.create_tenant(
            display_name="cora", plan="free", tenant_id="cora", authorization="acls", actor=OPERATOR
        )
        store.set_quotas(
            "cora", QuotaEntity(DEFAULT_ENTITY, None), dict.fromkeys(QUOTA_NAMES), actor=OPERATOR
        )
        tenant = Cora(
            GatewayStack.add_tenant(store, "cora", name="admin"),
            GatewayStack.add_tenant(store, "cora", name="reader"),
        )
        for resource in ("TOPIC", "GROUP", "TRANSACTIONAL_ID"):
            allow(store, tenant.admin.service_account, resource, "*", "ALL")
        allow(store, tenant.admin.service_account, "CLUSTER", "kafka-cluster", "ALL")
        allow(store, tenant.reader.service_account, "TOPIC", "orders", "READ")
        allow(store, tenant.reader.service_account, "GROUP", "readers", "READ")
    admin = AdminClient(tenant.config(gateway_stack, tenant.admin))

    def created() -> bool:  # once the ACLs are in force at the gateway (refused until then)
        futures = admin.create_topics([NewTopic(n, 1, 1) for n in CORA_TOPICS])
        for future in futures.values():
            try:
                future.result(TIMEOUT_S)
            except Exception as error:
                if "already exists" not in str(error):
                    return False
        return True

    wait_until(created, what="cora's admin creates its topics", timeout=TIMEOUT_S)
    producer = Producer(tenant.config(gateway_stack, tenant.admin, acks="all"))
    for name in CORA_TOPICS:
        producer.produce(name, b"cora-record")
    assert producer.flush(TIMEOUT_S) == 0
    for group in ("readers", "private"):
        committer = Consumer(tenant.config(gateway_stack, tenant.admin, **{"group.id": group}))
        try:
            offsets = [TopicPartition(n, 0, 1) for n in CORA_TOPICS]
            committer.commit(offsets=offsets, asynchronous=False)
        finally:
            committer.close()
    return tenant


def reader_call(stack: GatewayStack, cora: Cora, request: Any, response_cls: Any) -> Any:
    with open_raw(stack) as connection:
        connection.api_versions()
        authenticate(connection, cora.reader)
        return connection.call(request, response_cls, timeout=TIMEOUT_S)


TOPIC_DENIED = ErrorCode.topic_authorization_failed
GROUP_DENIED = ErrorCode.group_authorization_failed


def group_request(api: str) -> tuple[Any, Any, Callable[[Any], set[int]]]:
    if api == "OffsetCommit":
        partition = build(
            commit_req.OffsetCommitRequestPartition, partition_index=0, committed_offset=0
        )
        topic = build(commit_req.OffsetCommitRequestTopic, name="orders", partitions=(partition,))
        request = build(
            commit_req.OffsetCommitRequest,
            group_id="private",
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            topics=(topic,),
        )
        return (
            request,
            commit_res.OffsetCommitResponse,
            lambda r: partition_codes(r, "topics", "partitions"),
        )
    if api == "OffsetFetch":
        return (
            offset_fetch_all("private"),
            offset_fetch_res.OffsetFetchResponse,
            lambda r: {g.error_code for g in r.groups},
        )
    if api == "DescribeGroups":
        request = build(
            DescribeGroupsRequest, groups=("private",), include_authorized_operations=False
        )
        return request, DescribeGroupsResponse, lambda r: {g.error_code for g in r.groups}
    if api == "DeleteGroups":
        return (
            build(DeleteGroupsRequest, groups_names=("readers", "private")),
            DeleteGroupsResponse,
            lambda r: {x.error_code for x in r.results},
        )
    if api == "JoinGroup":
        return join("private", ""), JoinGroupResponse, lambda r: {r.error_code}
    assert api == "OffsetDelete"
    delete = build(
        offset_delete_req.OffsetDeleteRequest,
        group_id="readers",
        topics=(
            build(
                offset_delete_req.OffsetDeleteRequestTopic,
                name="orders",
                partitions=(
                    build(offset_delete_req.OffsetDeleteRequestPartition, partition_index=0),
                ),
            ),
        ),
    )
    return delete, offset_delete_res.OffsetDeleteResponse, lambda r: {r.error_code}


@pytest.mark.parametrize(
    "api,topic",
    [
        *[(api, "orders") for api in sorted(WRITES)],
        *[(api, "secret") for api in sorted(READS)],
    ],
)
def test_attack_an_account_without_acls_is_refused_on_its_own_tenants_topics(
    gateway_stack: GatewayStack, cora: Cora, api: str, topic: str
) -> None:
    """cora's reader may only READ `orders`: writing, deleting, truncating, growing or
    reconfiguring `orders`, and reading `secret`, are TOPIC_AUTHORIZATION_FAILED."""
    before = cora.state(gateway_stack)
    if api in WRITES:
        make, response_cls, codes = WRITES[api]
        found = codes(reader_call(gateway_stack, cora, make(topic), response_cls))
    else:
        make, response_cls, (topics, partitions) = READS[api]
        response = reader_call(gateway_stack, cora, make(topic), response_cls)
        found = partition_codes(response, topics, partitions)
    assert found == {TOPIC_DENIED}
    assert cora.state(gateway_stack) == before


@pytest.mark.parametrize(
    "api",
    ["OffsetCommit", "OffsetFetch", "DescribeGroups", "DeleteGroups", "JoinGroup", "OffsetDelete"],
)
def test_attack_an_account_without_acls_is_refused_on_its_own_tenants_groups(
    gateway_stack: GatewayStack, cora: Cora, api: str
) -> None:
    """The reader may READ group `readers` only: group `private`, and deleting anything, are
    GROUP_AUTHORIZATION_FAILED."""
    before = cora.state(gateway_stack)
    request, response_cls, codes = group_request(api)
    response = reader_call(gateway_stack, cora, request, response_cls)
    assert codes(response) == {GROUP_DENIED}
    assert cora.state(gateway_stack) == before


def test_attack_an_account_without_acls_sees_and_creates_nothing_else(
    gateway_stack: GatewayStack, cora: Cora
) -> None:
    """Metadata lists only what the reader may describe; CreateTopics, a transactional id and
    DescribeConfigs of `orders` (READ does not imply DESCRIBE_CONFIGS) are refused."""
    metadata = reader_call(
        gateway_stack,
        cora,
        MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        ),
        MetadataResponse,
    )
    assert [t.name for t in metadata.topics] == ["orders"]
    created = reader_call(gateway_stack, cora, create_topic("mine", 1), CreateTopicsResponse)
    assert [t.error_code for t in created.topics] == [TOPIC_DENIED]
    init = build(
        InitProducerIdRequest,
        transactional_id="tx",
        transaction_timeout=60_000 * MS,
        producer_id=-1,
        producer_epoch=-1,
    )
    answer = reader_call(gateway_stack, cora, init, InitProducerIdResponse)
    assert answer.error_code == ErrorCode.transactional_id_authorization_failed
    resource = build(
        describe_configs_req.DescribeConfigsResource,
        resource_type=2,
        resource_name="orders",
        configuration_keys=None,
    )
    configs = reader_call(
        gateway_stack,
        cora,
        build(describe_configs_req.DescribeConfigsRequest, resources=(resource,)),
        describe_configs_res.DescribeConfigsResponse,
    )
    assert [(r.error_code, r.configs) for r in configs.results] == [(TOPIC_DENIED, ())]
    topics = AdminClient(cora.config(gateway_stack, cora.admin)).list_topics(timeout=TIMEOUT_S)
    assert set(topics.topics) == set(CORA_TOPICS)


def test_attack_an_account_reads_no_committed_offset_of_a_topic_it_may_not_describe(
    gateway_stack: GatewayStack, cora: Cora
) -> None:
    """The reader may READ group `readers`, which holds offsets of `orders` and `secret`: as in
    Kafka, OffsetFetch of all topics answers only the topics the reader may describe, and naming
    `secret` is TOPIC_AUTHORIZATION_FAILED."""
    every = call_as_reader(gateway_stack, cora, offset_fetch_all("readers"))
    (group,) = every.groups
    assert group.error_code == 0
    assert [t.name for t in group.topics] == ["orders"]
    wanted = build(offset_fetch_req.OffsetFetchRequestTopics, name="secret", partition_indexes=(0,))
    named = build(
        offset_fetch_req.OffsetFetchRequest,
        groups=(
            build(offset_fetch_req.OffsetFetchRequestGroup, group_id="readers", topics=(wanted,)),
        ),
        require_stable=False,
    )
    (group,) = call_as_reader(gateway_stack, cora, named).groups
    assert [(t.name, [p.error_code for p in t.partitions]) for t in group.topics] == [
        ("secret", [TOPIC_DENIED])
    ]
    assert all(p.committed_offset == -1 for t in group.topics for p in t.partitions)


def test_attack_an_account_lists_only_the_groups_and_transactions_it_may_describe(
    gateway_stack: GatewayStack, cora: Cora
) -> None:
    """ListGroups shows the reader `readers` (READ implies DESCRIBE), never `private`; the admin's
    transactional id is not in the reader's ListTransactions, and DescribeTransactions of it is
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED."""
    producer = Producer(
        cora.config(gateway_stack, cora.admin, **{"transactional.id": "cora-tx", "acks": "all"})
    )
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce("orders", b"in a transaction")
    producer.abort_transaction(TIMEOUT_S)
    listed = reader_call(
        gateway_stack, cora, build(ListGroupsRequest, states_filter=()), ListGroupsResponse
    )
    names = {g.group_id for g in listed.groups}
    assert "private" not in names and names <= {"readers"}, names
    transactions = reader_call(
        gateway_stack,
        cora,
        ListTransactionsRequest(state_filters=(), producer_id_filters=()),
        ListTransactionsResponse,
    )
    assert transactions.error_code == 0 and transactions.transaction_states == ()
    described = reader_call(
        gateway_stack,
        cora,
        DescribeTransactionsRequest(transactional_ids=(TransactionalId("cora-tx"),)),
        DescribeTransactionsResponse,
    )
    assert [(t.error_code, t.topics) for t in described.transaction_states] == [
        (ErrorCode.transactional_id_authorization_failed, ())
    ]


def call_as_reader(stack: GatewayStack, cora: Cora, request: Any) -> Any:
    return reader_call(stack, cora, request, offset_fetch_res.OffsetFetchResponse)


# ---------------------------------------------------------------- logins


def test_attack_plain_login_naming_another_identity_as_authzid_is_refused(
    gateway_stack: GatewayStack,
) -> None:
    """PLAIN `bolt's key \\0 acme's key \\0 acme's secret`: asking to act as bolt is refused."""
    acme, bolt_creds = gateway_stack.credentials["acme"], gateway_stack.credentials["bolt"]
    for authzid in (bolt_creds.key_id, bolt_creds.service_account, "bolt"):
        with open_raw(gateway_stack) as connection:
            handshake = connection.call(
                SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse
            )
            assert handshake.error_code == 0
            token = b"\0".join((authzid.encode(), acme.key_id.encode(), acme.secret.encode()))
            answer = connection.call(
                SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse
            )
            assert answer.error_code == ErrorCode.sasl_authentication_failed
            assert answer.error_message == FAILED_MESSAGE
            assert connection.closed_by_peer(5.0)


@pytest.mark.parametrize("as_whom", ["bolt", "cora-admin"])
def test_attack_reauthenticate_as_another_principal_on_an_open_connection_is_refused(
    gateway_stack: GatewayStack, bolt: BoltState, cora: Cora, as_whom: str
) -> None:
    """KIP-368 re-authentication must keep the principal: acme's connection switching to bolt's
    key, or cora's reader switching to cora's admin (a privilege escalation inside one tenant),
    is refused and the connection closed, before any request runs as the other."""
    first, then = (
        (gateway_stack.credentials["acme"], gateway_stack.credentials["bolt"])
        if as_whom == "bolt"
        else (cora.reader, cora.admin)
    )
    with open_raw(gateway_stack) as connection:
        connection.api_versions()
        authenticate(connection, first)
        handshake = connection.call(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse)
        assert handshake.error_code == 0
        token = b"\0" + then.key_id.encode() + b"\0" + then.secret.encode()
        answer = connection.call(
            SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse
        )
        assert answer.error_code == ErrorCode.sasl_authentication_failed
        assert answer.error_message == CHANGED_IDENTITY
        assert connection.closed_by_peer(5.0)


def scram_call(connection: RawConnection, token: bytes) -> Any:
    return connection.call(SaslAuthenticateRequest(auth_bytes=token), SaslAuthenticateResponse)


def test_attack_a_replayed_scram_exchange_is_refused(gateway_stack: GatewayStack) -> None:
    """Someone who recorded acme's SCRAM-SHA-256 login replays its client messages on a new
    connection: the gateway's nonce differs, so the recorded proof is refused."""
    acme = gateway_stack.credentials["acme"]
    client = ScramClient("SCRAM-SHA-256", acme.key_id, acme.secret, nonce=uuid.uuid4().hex)
    recorded = []
    with open_raw(gateway_stack) as connection:
        handshake = connection.call(
            SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), SaslHandshakeResponse
        )
        assert handshake.error_code == 0
        recorded.append(client.first())
        server_first = scram_call(connection, recorded[0])
        recorded.append(client.final(bytes(server_first.auth_bytes)))
        assert scram_call(connection, recorded[1]).error_code == 0  # the genuine login
    with open_raw(gateway_stack) as connection:
        connection.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-256"), SaslHandshakeResponse)
        assert scram_call(connection, recorded[0]).error_code == 0  # a fresh server nonce
        replayed = scram_call(connection, recorded[1])
        assert replayed.error_code == ErrorCode.sasl_authentication_failed
        assert replayed.error_message == FAILED_MESSAGE
        assert connection.closed_by_peer(5.0)


@pytest.mark.parametrize("attempt", ["unknown-mechanism", "authenticate-first", "two-handshakes"])
def test_attack_a_confused_sasl_exchange_is_refused_and_closed(
    gateway_stack: GatewayStack, attempt: str
) -> None:
    """GSSAPI (not offered), SaslAuthenticate before any handshake, a second handshake in the
    middle of an exchange: each refused with Kafka's code and the connection closed, no login."""
    acme = gateway_stack.credentials["acme"]
    token = b"\0" + acme.key_id.encode() + b"\0" + acme.secret.encode()
    with open_raw(gateway_stack) as connection:
        if attempt == "unknown-mechanism":
            answer = connection.call(
                SaslHandshakeRequest(mechanism="GSSAPI"), SaslHandshakeResponse
            )
            assert answer.error_code == ErrorCode.unsupported_sasl_mechanism
            assert "PLAIN" in answer.mechanisms
        elif attempt == "authenticate-first":
            answer = scram_call(connection, token)
            assert answer.error_code == ErrorCode.illegal_sasl_state
        else:
            connection.call(SaslHandshakeRequest(mechanism="SCRAM-SHA-512"), SaslHandshakeResponse)
            answer = connection.call(SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse)
            assert answer.error_code == ErrorCode.illegal_sasl_state
        assert connection.closed_by_peer(5.0)


def test_attack_cluster_ids_do_not_link_tenants(gateway_stack: GatewayStack) -> None:
    """Each tenant sees a virtual cluster id of its own: nothing tells acme that bolt shares
    its fleet."""
    request = build(DescribeClusterRequest, include_cluster_authorized_operations=False)
    ids = {
        t: call(gateway_stack, t, request, DescribeClusterResponse).cluster_id
        for t in ("acme", "bolt")
    }
    assert ids["acme"] != ids["bolt"]


# ---------------------------------------------------------------- metering


def test_attack_acks_0_produce_is_still_billed(
    gateway_stack: GatewayStack, bolt: BoltState
) -> None:
    """Produce with acks=0 gets no answer, so nothing about it ever comes back: its bytes are
    metered anyway (a request that is never answered is not a request never billed)."""
    client_id = f"acks0-{uuid.uuid4().hex[:8]}"
    value = uuid.uuid4().bytes * 4096  # 64 KiB
    request = dataclasses.replace(produce("orders", value), acks=0)
    with login_as_client(gateway_stack, gateway_stack.credentials["acme"], client_id) as connection:
        connection.send(frame(request_bytes(request, connection.correlation_id(), client_id)))
        ping = MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        call_as_client(connection, ping, MetadataResponse, client_id)  # served after the produce
    assert gateway_stack.broker is not None
    bootstrap = gateway_stack.broker.bootstrap

    def billed() -> int:
        return sum(
            r.bytes_in
            for r in usage_records(bootstrap).values()
            if isinstance(r, TrafficRecord) and r.client_id == client_id and r.topic == "orders"
        )

    assert wait_until(billed, what=f"usage of {client_id}", timeout=TIMEOUT_S) >= len(value)


def test_attack_a_refused_acks_0_produce_closes_instead_of_answering(
    gateway_stack: GatewayStack,
) -> None:
    """acks=0 is never answered. A produce the gateway refuses (here an illegal topic name) used
    to get a ProduceResponse anyway, which the client then read as the answer to its next request.
    As in Kafka, the refusal closes the connection instead: no frame comes back, the peer closes."""
    client_id = f"acks0-refused-{uuid.uuid4().hex[:8]}"
    request = dataclasses.replace(produce("no spaces allowed"), acks=0)
    with login_as_client(gateway_stack, gateway_stack.credentials["acme"], client_id) as connection:
        connection.send(frame(request_bytes(request, connection.correlation_id(), client_id)))
        assert connection.closed_by_peer(TIMEOUT_S)


# ---------------------------------------------------------------- quotas


def test_attack_rotating_client_ids_does_not_escape_the_default_user_quota(
    gateway_stack: GatewayStack,
) -> None:
    """A tenant whose default user quota is 50 kB/s sends 100 kB produce requests, each on a new
    connection under a new client id. Kafka's quota is per (user, client id) only where one is set
    for that client id; here every client id shares the user's: the requests past the window's
    allowance are answered with throttle_time_ms > 0. Were the quota kept per client id, each
    fresh id would start a fresh window and never be throttled."""
    tenant = f"q{uuid.uuid4().hex[:8]}"
    with gateway_stack.store() as store:
        creds = GatewayStack.add_tenant(store, tenant)
        store.set_quotas(
            tenant,
            QuotaEntity(DEFAULT_ENTITY, None),
            {"producer_byte_rate": 50_000.0},
            actor=OPERATOR,
        )
    config = {
        **gateway_stack.client_config("acme"),
        "sasl.username": creds.key_id,
        "sasl.password": creds.secret,
    }
    admin = AdminClient(config)  # kept referenced: a destroyed client fails its futures
    admin.create_topics([NewTopic("metered", 1, 1)])["metered"].result(TIMEOUT_S)
    payload = uuid.uuid4().bytes * 6_250  # 100 kB
    throttles = []
    for i in range(12):
        client_id = f"rotating-{i}"  # the connection's every request, its login included
        with login_as_client(gateway_stack, creds, client_id) as connection:
            answer = call_as_client(
                connection, produce("metered", payload), ProduceResponse, client_id
            )
        assert partition_codes(answer, "responses", "partition_responses") == {ErrorCode.none}
        throttles.append(answer.throttle_time.total_seconds())
    # 11 samples of 1 s: a young window counts as 10 s, so 500 kB pass; by the 7th request the
    # user's rate is over its quota whatever the client id.
    assert all(t > 0 for t in throttles[7:]), throttles


def call_as_client(
    connection: RawConnection, request: Any, response_cls: Any, client_id: str
) -> Any:
    correlation_id = connection.correlation_id()
    connection.send(frame(request_bytes(request, correlation_id, client_id=client_id)))
    answered, response = decode_response(response_cls, connection.read_frame(TIMEOUT_S))
    assert answered == correlation_id
    return response


def login_as_client(stack: GatewayStack, creds: Credentials, client_id: str) -> RawConnection:
    """A raw connection logged in with SASL/PLAIN, every request (the login's too) sent with
    `client_id`, as a real client sends its own."""
    connection = open_raw(stack)
    call_as_client(connection, build(ApiVersionsRequest), ApiVersionsResponse, client_id)
    handshake = call_as_client(
        connection, SaslHandshakeRequest(mechanism="PLAIN"), SaslHandshakeResponse, client_id
    )
    assert handshake.error_code == 0
    token = b"\0" + creds.key_id.encode() + b"\0" + creds.secret.encode()
    request = SaslAuthenticateRequest(auth_bytes=token)
    answer = call_as_client(connection, request, SaslAuthenticateResponse, client_id)
    assert answer.error_code == 0, answer
    return connection
