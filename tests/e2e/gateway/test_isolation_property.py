"""Property: whatever tenant A sends, in any API the gateway advertises, nothing of tenant B (or of
the fleet) comes back, and B's state is untouched.

Tenant `bolt` (B) first builds a fleet of its own through its own connections: topics `t`,
`orders`, `bolt-only` with records, groups `g` (with a live member) and `bolt-private-group`
with committed offsets; its record values, commit metadata and client id carry the marker
`BOLTSECRET`. Tenant `acme` (A) has topics and a group of the same names. Then, over one raw
SASL/PLAIN connection as A, hypothesis sends random sequences of well-formed requests of every
advertised API and version (`tenant_requests`), named from a pool of A's names, B's local names,
B's fleet names (`bolt_t`, `bolt_g`), internal topics and B's topic ids. Each request must be
answered (correlation id matching) or the connection closed, within a deadline; a closed
connection is replaced by a new login; after each sequence the connection must still answer
ApiVersions or be closed (never hang). No answer may
contain (after removing the pool names A itself sent, which the gateway rightly echoes back as A's
own names) a fleet prefix `acme_` or `bolt_`, an internal topic, or B's marker. Afterwards B's
topics, record counts, groups and committed offsets are as before.
"""

from __future__ import annotations

import functools
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import TopicName

from tests.e2e.gateway.sasl_wire import advertised_ranges, exchange, login, shut
from tests.e2e.gateway.tenant_requests import NamePool, tenant_requests
from tests.e2e.raw_wire import RawConnection, request_bytes
from tests.e2e.request_fuzz import has_schema
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

TIMEOUT_S = 30.0
ANSWER_DEADLINE_S = 15.0  # generous: the longest legitimate wait drawn is well under 1 s
EXAMPLES = 150
SECRET = "BOLTSECRET"
TOPICS = ("t", "orders")
GROUPS = ("g",)
B_ONLY_TOPIC, B_ONLY_GROUP = "bolt-only", "bolt-private-group"
PARTITIONS = 2
B_RECORDS = 25
INTERNAL = ("__consumer_offsets", "__usage", "__transaction_state")
FORBIDDEN = (b"acme_", b"bolt_", SECRET.encode(), *(name.encode() for name in INTERNAL))
# Names A uses that contain a forbidden token: A's own (prefixed) names, echoed back to A.
ATTACK_NAMES = ("bolt_t", "bolt_g", "bolt_bolt-only", *INTERNAL)
POOL_NAMES = (*TOPICS, *GROUPS, "acme-only", B_ONLY_TOPIC, B_ONLY_GROUP, *ATTACK_NAMES)


@dataclass
class Snapshot:
    topics: dict[str, int]
    ends: dict[tuple[str, int], int]
    groups: set[str]
    committed: dict[str, dict[tuple[str, int], tuple[int, str]]]


@dataclass
class Traffic:
    sent: Counter[int] = field(default_factory=Counter)
    answered: Counter[int] = field(default_factory=Counter)
    closed: Counter[int] = field(default_factory=Counter)
    advertised: set[int] = field(default_factory=set)


@pytest.fixture(scope="module")
def gateway_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    # Random JoinGroups must not park: no initial delay, and session timeouts of 100 ms allowed.
    with GatewayStack(
        Path(tmp_path_factory.mktemp("isolation-property")),
        broker_config={
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "100",
        },
    ) as stack:
        yield stack


def build_fleet(stack: GatewayStack, tenant: str, value: str) -> None:
    """Topics, records and committed offsets of `tenant`, through its own clients."""
    own_topic = B_ONLY_TOPIC if tenant == "bolt" else "acme-only"
    admin = AdminClient(stack.client_config(tenant))
    names = (*TOPICS, own_topic)
    futures = admin.create_topics(
        [NewTopic(n, num_partitions=PARTITIONS, replication_factor=1) for n in names],
        operation_timeout=TIMEOUT_S,
    )
    for future in futures.values():
        future.result(timeout=TIMEOUT_S)
    producer = Producer(stack.client_config(tenant, acks="all"))
    for name in names:
        for i in range(B_RECORDS):
            producer.produce(name, f"{value}-{i}".encode(), partition=i % PARTITIONS)
    assert producer.flush(TIMEOUT_S) == 0
    for group in (*GROUPS, B_ONLY_GROUP if tenant == "bolt" else "acme-only-group"):
        consumer = Consumer(stack.client_config(tenant, **{"group.id": group}))
        try:
            offsets = [
                TopicPartition(name, p, 3 + p, metadata=f"{value}-meta")
                for name in names
                for p in range(PARTITIONS)
            ]
            consumer.commit(offsets=offsets, asynchronous=False)
        finally:
            consumer.close()


def assigned_after_a_poll(consumer: Consumer) -> bool:
    consumer.poll(0.2)  # runs the group protocol
    return bool(consumer.assignment())


@pytest.fixture(scope="module")
def live_members(gateway_stack: GatewayStack) -> Iterator[None]:
    """A member in each tenant's group `g` while A probes: DescribeGroups and JoinGroup answers
    then carry member metadata naming topics (B's client id is B's secret)."""
    consumers = []
    try:
        for tenant, client_id in (("bolt", f"{SECRET}-client"), ("acme", "acme-client")):
            consumer = Consumer(
                gateway_stack.client_config(
                    tenant,
                    **{"group.id": "g", "client.id": client_id, "enable.auto.commit": "false"},
                )
            )
            consumers.append(consumer)
            consumer.subscribe(list(TOPICS))
            wait_until(
                functools.partial(assigned_after_a_poll, consumer),
                what=f"an assignment of {tenant}'s live member",
                timeout=TIMEOUT_S,
                interval=0,
            )
        yield
    finally:
        for consumer in consumers:
            consumer.close()


def snapshot(stack: GatewayStack, tenant: str) -> Snapshot:
    admin = AdminClient(stack.client_config(tenant))
    metadata = admin.list_topics(timeout=TIMEOUT_S)
    topics = {name: len(t.partitions) for name, t in metadata.topics.items()}
    consumer = Consumer(stack.client_config(tenant, **{"group.id": "snapshot-reader"}))
    try:
        ends = {
            (name, p): consumer.get_watermark_offsets(
                TopicPartition(name, p), timeout=TIMEOUT_S, cached=False
            )[1]
            for name, count in topics.items()
            for p in range(count)
        }
    finally:
        consumer.close()
    listed = admin.list_consumer_groups().result(timeout=TIMEOUT_S)
    groups = {g.group_id for g in listed.valid}
    committed = {}
    for group in (*GROUPS, B_ONLY_GROUP):
        reader = Consumer(stack.client_config(tenant, **{"group.id": group}))
        try:
            parts = [TopicPartition(n, p) for n, count in topics.items() for p in range(count)]
            committed[group] = {
                (tp.topic, tp.partition): (tp.offset, tp.metadata or "")
                for tp in reader.committed(parts, timeout=TIMEOUT_S)
                if tp.offset >= 0
            }
        finally:
            reader.close()
    return Snapshot(topics, ends, groups, committed)


def topic_ids(stack: GatewayStack, tenant: str) -> tuple[uuid.UUID, ...]:
    """The ids of the tenant's topics (Metadata v12 through its own raw connection)."""
    names = (*TOPICS, B_ONLY_TOPIC if tenant == "bolt" else "acme-only")
    request = MetadataRequest(
        topics=tuple(
            MetadataRequestTopic(name=TopicName(n), topic_id=uuid.UUID(int=0)) for n in names
        ),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    with login(stack, tenant) as connection:
        response = connection.call(request, MetadataResponse)
    ids = tuple(t.topic_id for t in response.topics if t.error_code == 0)
    assert len(ids) == len(names), response
    return ids


@pytest.fixture(scope="module")
def fleets(gateway_stack: GatewayStack) -> NamePool:
    build_fleet(gateway_stack, "bolt", SECRET)
    build_fleet(gateway_stack, "acme", "acme-data")
    ids = topic_ids(gateway_stack, "bolt") + topic_ids(gateway_stack, "acme")
    return NamePool(POOL_NAMES, ids, b"acme-data")


def leaks(payload: bytes, sent_names: set[str]) -> list[bytes]:
    """Forbidden tokens left in an answer once the names A sent itself are taken out."""
    for name in sorted(sent_names, key=len, reverse=True):
        payload = payload.replace(name.encode(), b"")
    return [token for token in FORBIDDEN if token in payload]


def strings_in(entity: Any) -> set[str]:
    """Every string value inside a kio entity (the names A sent)."""
    found: set[str] = set()
    stack: list[Any] = [entity]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            found.add(value)
        elif isinstance(value, tuple | list):
            stack.extend(value)
        elif hasattr(value, "__dataclass_fields__"):
            stack.extend(getattr(value, name) for name in value.__dataclass_fields__)
    return found


class TenantA:
    """The one raw connection of tenant A, replaced by a fresh login when the gateway closes it."""

    def __init__(self, stack: GatewayStack) -> None:
        self.stack = stack
        self.connection: RawConnection = login(stack, "acme")
        self.correlation_id = 100
        self.echoable: set[str] = set()  # attack names A has used: echoed back as A's names

    def next_id(self) -> int:
        self.correlation_id += 1
        return self.correlation_id

    def reconnect(self) -> None:
        shut(self.connection)
        self.connection = login(self.stack, "acme")

    def close(self) -> None:
        shut(self.connection)


def run_property(stack: GatewayStack, pool: NamePool, traffic: Traffic) -> None:
    tenant = TenantA(stack)
    apis: dict[int, list[int]] = {}
    for key, (low, high) in sorted(advertised_ranges(tenant.connection).items()):
        versions = [v for v in range(low, high + 1) if has_schema(key, v)]
        if versions:
            apis[key] = versions
    assert set(apis) >= {0, 1, 3, 8, 9, 11, 15, 16, 19}, apis
    traffic.advertised = set(apis)

    @st.composite
    def sequences(draw: st.DrawFn) -> list[tuple[int, int, Any]]:
        keys = draw(st.lists(st.sampled_from(sorted(apis)), min_size=1, max_size=4))
        picks = [(k, draw(st.sampled_from(apis[k]))) for k in keys]
        return [(k, v, draw(tenant_requests(k, v, pool))) for k, v in picks]

    def send(api_key: int, version: int, request: Any) -> None:
        correlation_id = tenant.next_id()
        tenant.echoable |= {n for n in strings_in(request) if n in ATTACK_NAMES}
        traffic.sent[api_key] += 1
        outcome = exchange(
            tenant.connection, request_bytes(request, correlation_id), ANSWER_DEADLINE_S
        )
        if outcome.payload is None:
            traffic.closed[api_key] += 1
            tenant.reconnect()
            return
        traffic.answered[api_key] += 1
        assert outcome.payload[:4] == correlation_id.to_bytes(4, "big", signed=True), (
            f"api {api_key} v{version}: answer out of order"
        )
        found = leaks(outcome.payload, tenant.echoable)
        assert not found, f"api {api_key} v{version} {request!r} leaked {found}"

    def still_usable() -> None:
        try:
            tenant.connection.api_versions()  # still usable after the sequence…
        except ConnectionError:  # … or closed cleanly (a failed re-authentication closes)
            traffic.closed[-1] += 1
            tenant.reconnect()

    checks = [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ]

    @settings(max_examples=1, deadline=None, suppress_health_check=checks, database=None)
    @given(data=st.data())
    def property_every_api_once(data: st.DataObject) -> None:
        """One request of every advertised API, so the coverage below never rests on luck."""
        for api_key in sorted(apis):
            version = data.draw(st.sampled_from(apis[api_key]))
            send(api_key, version, data.draw(tenant_requests(api_key, version, pool)))
            still_usable()

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=checks)
    @given(sequence=sequences())
    def property_nothing_of_b_comes_back(sequence: list[tuple[int, int, Any]]) -> None:
        for api_key, version, request in sequence:
            send(api_key, version, request)
        still_usable()

    try:
        property_every_api_once()
        property_nothing_of_b_comes_back()
    finally:
        tenant.close()


def test_tenant_a_never_sees_or_reaches_tenant_b(
    gateway_stack: GatewayStack, fleets: NamePool, live_members: None
) -> None:
    before = snapshot(gateway_stack, "bolt")
    assert set(before.topics) == {*TOPICS, B_ONLY_TOPIC}
    assert {"g", B_ONLY_GROUP} <= before.groups
    assert sum(before.ends.values()) == 3 * B_RECORDS
    traffic = Traffic()
    run_property(gateway_stack, fleets, traffic)
    # The run exercised the APIs: most requests were answered, not refused.
    assert sum(traffic.answered.values()) >= 0.8 * sum(traffic.sent.values()), traffic
    assert len(traffic.answered) >= 0.9 * len(traffic.advertised), traffic
    after = snapshot(gateway_stack, "bolt")
    assert after.topics == before.topics
    assert after.ends == before.ends
    assert after.committed == before.committed
    assert {"g", B_ONLY_GROUP} <= after.groups
    assert not any(name.startswith(("acme", "bolt_")) for name in after.groups)


def test_leak_check_would_see_a_leak() -> None:
    """The leak check itself: fleet names and B's marker are found; A's echoed names are not."""
    assert leaks(b"..\x00\x06bolt_t..", {"bolt_t"}) == []
    assert leaks(b"..acme_bolt_t..", {"bolt_t"}) == [b"acme_"]
    assert leaks(b"..bolt_orders..", {"bolt_t"}) == [b"bolt_"]
    assert leaks(b"..BOLTSECRET-3..", set()) == [SECRET.encode()]
    assert leaks(b"..__consumer_offsets..", set()) == [b"__consumer_offsets"]
