"""Two tenants through one gateway, same topic and group names, working at the same time.

`acme` and `bolt` each create topics `t` and `orders` plus one topic and one group only they have,
then concurrently produce to `t` (different record counts and values), consume `t` in their own
group `g` with commits, and list and describe. Each must get exactly its own records and its own
committed offsets, and every listing (Metadata, ListGroups, DescribeGroups, OffsetFetch of all
topics, ListOffsets, DescribeConfigs) must show only its own names: never the other tenant's
private topic or group, never a fleet name (`acme_…`, `bolt_…`), never an internal topic.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic  # type: ignore[attr-defined]

from tests.gateway_stack import TENANTS, GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

TIMEOUT_S = 30.0
SHARED_TOPICS = ("t", "orders")
GROUP = "g"
RECORDS = {"acme": 120, "bolt": 70}  # different, so offsets and counts tell the tenants apart
PARTITIONS = {"acme": 2, "bolt": 3}
FORBIDDEN = ("acme_", "bolt_", "__consumer_offsets", "__usage", "__transaction_state")


def private_topic(tenant: str) -> str:
    return f"{tenant}-private"


def private_group(tenant: str) -> str:
    return f"{tenant}-private-group"


@dataclass
class TenantRun:
    tenant: str
    consumed: list[bytes]
    committed: dict[int, int]
    members: list[tuple[str, list[tuple[str, int]]]]  # DescribeGroups while consuming


@pytest.fixture(scope="module")
def gateway_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    # No 3 s initial rebalance delay: the groups here join once and start at once.
    with GatewayStack(
        Path(tmp_path_factory.mktemp("isolation")),
        broker_config={"group.initial.rebalance.delay.ms": "0"},
    ) as stack:
        yield stack


def admin(stack: GatewayStack, tenant: str) -> AdminClient:
    return AdminClient(stack.client_config(tenant))


def create_topics(stack: GatewayStack, tenant: str) -> None:
    names = (*SHARED_TOPICS, private_topic(tenant))
    client = admin(stack, tenant)  # kept referenced: a destroyed client fails its futures
    futures = client.create_topics(
        [NewTopic(name, num_partitions=PARTITIONS[tenant], replication_factor=1) for name in names],
        operation_timeout=TIMEOUT_S,
    )
    for future in futures.values():
        future.result(timeout=TIMEOUT_S)


def work(stack: GatewayStack, tenant: str) -> TenantRun:
    """Produce to `t`, consume it in group `g` committing, and commit in the private group."""
    producer = Producer(stack.client_config(tenant, acks="all", **{"client.id": f"{tenant}-p"}))
    for i in range(RECORDS[tenant]):
        producer.produce("t", f"{tenant}-{i}".encode(), key=str(i).encode())
    producer.produce(private_topic(tenant), b"private")
    assert producer.flush(TIMEOUT_S) == 0
    consumer = Consumer(
        stack.client_config(
            tenant,
            **{"group.id": GROUP, "client.id": f"{tenant}-c", "auto.offset.reset": "earliest"},
            **{"enable.auto.commit": "false"},
        )
    )
    consumed: list[bytes] = []
    try:
        consumer.subscribe(["t"])

        def all_consumed() -> bool:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                value = message.value()
                assert value is not None
                consumed.append(value)
            return len(consumed) >= RECORDS[tenant]

        wait_until(all_consumed, what=f"{tenant}'s records consumed", timeout=TIMEOUT_S, interval=0)
        consumer.commit(asynchronous=False)
        client = admin(stack, tenant)
        group = client.describe_consumer_groups([GROUP])[GROUP].result(timeout=TIMEOUT_S)
        members = [
            (m.client_id, sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions))
            for m in group.members
        ]
        committed = {
            tp.partition: tp.offset
            for tp in consumer.committed(
                [TopicPartition("t", p) for p in range(PARTITIONS[tenant])], timeout=TIMEOUT_S
            )
        }
    finally:
        consumer.close()
    other = Consumer(stack.client_config(tenant, **{"group.id": private_group(tenant)}))
    try:
        other.commit(offsets=[TopicPartition(private_topic(tenant), 0, 1)], asynchronous=False)
    finally:
        other.close()
    return TenantRun(tenant, consumed, committed, members)


@pytest.fixture(scope="module")
def runs(gateway_stack: GatewayStack) -> dict[str, TenantRun]:
    with ThreadPoolExecutor(len(TENANTS)) as pool:
        list(pool.map(lambda t: create_topics(gateway_stack, t), TENANTS))
        return dict(zip(TENANTS, pool.map(lambda t: work(gateway_stack, t), TENANTS), strict=True))


def other(tenant: str) -> str:
    return next(t for t in TENANTS if t != tenant)


def assert_no_foreign_name(tenant: str, names: list[str]) -> None:
    for name in names:
        assert not any(marker in name for marker in FORBIDDEN), f"{tenant} sees {name!r}"
        assert other(tenant) not in name, f"{tenant} sees {other(tenant)}'s {name!r}"


@pytest.mark.parametrize("tenant", TENANTS)
def test_each_group_gets_its_own_records_and_offsets(
    runs: dict[str, TenantRun], tenant: str
) -> None:
    run = runs[tenant]
    assert sorted(run.consumed) == sorted(f"{tenant}-{i}".encode() for i in range(RECORDS[tenant]))
    assert set(run.committed) == set(range(PARTITIONS[tenant]))
    assert sum(run.committed.values()) == RECORDS[tenant]


@pytest.mark.parametrize("tenant", TENANTS)
def test_metadata_shows_only_own_topics(
    gateway_stack: GatewayStack, runs: dict[str, TenantRun], tenant: str
) -> None:
    client = admin(gateway_stack, tenant)
    metadata = client.list_topics(timeout=TIMEOUT_S)
    assert set(metadata.topics) == {*SHARED_TOPICS, private_topic(tenant)}
    for name in SHARED_TOPICS:
        assert len(metadata.topics[name].partitions) == PARTITIONS[tenant]
    # Asking for the other tenant's private topic by name does not reach it.
    consumer = Consumer(gateway_stack.client_config(tenant, **{"group.id": "probe"}))
    try:
        probe = consumer.list_topics(private_topic(other(tenant)), timeout=TIMEOUT_S)
        topic = probe.topics[private_topic(other(tenant))]
        assert topic.error is not None and not topic.partitions
        assert "acme_" not in str(topic.error) and "bolt_" not in str(topic.error)
    finally:
        consumer.close()


@pytest.mark.parametrize("tenant", TENANTS)
def test_watermarks_are_own(
    gateway_stack: GatewayStack, runs: dict[str, TenantRun], tenant: str
) -> None:
    consumer = Consumer(gateway_stack.client_config(tenant, **{"group.id": "probe"}))
    try:
        ends = [
            consumer.get_watermark_offsets(TopicPartition("t", p), timeout=TIMEOUT_S, cached=False)
            for p in range(PARTITIONS[tenant])
        ]
    finally:
        consumer.close()
    assert sum(high for _low, high in ends) == RECORDS[tenant]


@pytest.mark.parametrize("tenant", TENANTS)
def test_list_groups_shows_only_own_groups(
    gateway_stack: GatewayStack, runs: dict[str, TenantRun], tenant: str
) -> None:
    client = admin(gateway_stack, tenant)

    def listed() -> set[str] | None:
        result = client.list_consumer_groups().result(timeout=TIMEOUT_S)
        names = {g.group_id for g in result.valid}
        assert not result.errors, result.errors
        return names if {GROUP, private_group(tenant)} <= names else None

    names = wait_until(listed, what=f"{tenant}'s groups listed", timeout=TIMEOUT_S)
    assert names == {GROUP, private_group(tenant)}


@pytest.mark.parametrize("tenant", TENANTS)
def test_describe_groups_shows_only_own(
    gateway_stack: GatewayStack, runs: dict[str, TenantRun], tenant: str
) -> None:
    client = admin(gateway_stack, tenant)
    futures = client.describe_consumer_groups([GROUP, private_group(other(tenant))])
    group = futures[GROUP].result(timeout=TIMEOUT_S)
    assert group.group_id == GROUP
    assert not group.is_simple_consumer_group
    # While it consumed, the group held only the tenant's member, assigned its own partitions.
    assert runs[tenant].members == [(f"{tenant}-c", [("t", p) for p in range(PARTITIONS[tenant])])]
    foreign = futures[private_group(other(tenant))].result(timeout=TIMEOUT_S)
    # The other tenant's private group does not exist in this tenant's namespace.
    assert not foreign.members
    assert str(foreign.state).split(".")[-1] in ("DEAD", "UNKNOWN", "EMPTY")


@pytest.mark.parametrize("tenant", TENANTS)
def test_offset_fetch_of_all_topics_shows_only_own(
    gateway_stack: GatewayStack, runs: dict[str, TenantRun], tenant: str
) -> None:
    client = admin(gateway_stack, tenant)
    for group, expected in (
        (GROUP, {("t", p): o for p, o in runs[tenant].committed.items()}),
        (private_group(tenant), {(private_topic(tenant), 0): 1}),
        (private_group(other(tenant)), {}),
    ):
        futures = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
        answer = futures[group].result(timeout=TIMEOUT_S)
        got = {(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions}
        assert got == expected, f"{tenant} group {group}"


@pytest.mark.parametrize("tenant", TENANTS)
def test_describe_configs_of_shared_name_is_own(
    gateway_stack: GatewayStack, runs: dict[str, TenantRun], tenant: str
) -> None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, "t")
    client = admin(gateway_stack, tenant)
    configs = client.describe_configs([resource])[resource].result(timeout=TIMEOUT_S)
    assert configs
    for entry in configs.values():
        assert_no_foreign_name(tenant, [entry.name, str(entry.value)])
