"""Property: whatever tenant A sends, in any API the gateway advertises, nothing of tenant B (or of
the fleet) comes back, and B's state is untouched.

Tenant `bolt` (B) first builds a fleet of its own through its own connections: topics `t`,
`orders`, `bolt-only` with records, groups `g` (with a live member) and `bolt-private-group`
with committed offsets; its record values, commit metadata and client id carry the marker
`BOLTSECRET`. Tenant `acme` (A) has topics and a group of the same names. Then, over one raw
SASL/PLAIN connection as A, hypothesis sends random sequences of well-formed requests of every
advertised API and version (`tenant_requests`), named from a pool of A's names, B's local names,
B's fleet names (`bolt_t`, `bolt_g`), internal topics and B's topic ids, mixed with group sessions
in which A joins a group as a NEW member (`JoinSession`: JoinGroup with an empty member id, again
with the id MEMBER_ID_REQUIRED gave it, SyncGroup assigning as leader, Heartbeat, LeaveGroup, at
random advertised versions) — among them `g`, the name of B's group with a live member, and
`bolt_g`, its fleet name. A joining member must land in a group of A's own: every member its
JoinGroup answer lists is one of A's (its own raw members, A's live consumer), never B's. Each
request must be
answered (correlation id matching) or the connection closed, within a deadline; a closed
connection is replaced by a new login; after each sequence the connection must still answer
ApiVersions or be closed (never hang). No answer may
contain (after removing the pool names A itself sent, which the gateway rightly echoes back as A's
own names) a fleet prefix `acme_` or `bolt_`, an internal topic, or B's marker. Afterwards B's
topics, record counts, groups and committed offsets are as before, and B's live member is still
the only member of B's `g`.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import struct
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.types import TopicName
from kio.serial._introspect import EntityTupleField, classify_field

from brokers.wire.errors import ErrorCode
from tests.e2e.gateway.sasl_wire import advertised_ranges, exchange, login, shut
from tests.e2e.gateway.tenant_requests import NamePool, tenant_requests
from tests.e2e.raw_wire import CLIENT_ID, RawConnection, decode_response, request_bytes
from tests.e2e.request_fuzz import has_schema, plain_entity
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
# Groups A joins as a new member: B's live group's name and fleet name, B's private group, A's own.
JOIN_GROUPS = ("g", "bolt_g", B_ONLY_GROUP, "acme-only-group")
JOIN, SYNC, HEARTBEAT, LEAVE = 11, 14, 12, 13
# The lowest versions of a new member's session: JoinGroup v4 brought MEMBER_ID_REQUIRED (KIP-394),
# LeaveGroup v3 the batch of members.
SESSION_MIN_VERSIONS = {JOIN: 4, SYNC: 0, HEARTBEAT: 0, LEAVE: 3}
A_MEMBER_PREFIXES = (CLIENT_ID, "acme-client")  # member ids start with the client id


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
    joined: Counter[str] = field(default_factory=Counter)  # group sessions that got a generation


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


LIVE_MEMBER_SETTINGS = {
    "enable.auto.commit": "false",
    # A's new members rebalance A's `g`: its live member rejoins within a heartbeat, and a
    # rebalance waits at most max.poll.interval.ms (the group's rebalance timeout) for a member.
    "heartbeat.interval.ms": "300",
    "session.timeout.ms": "6000",
    "max.poll.interval.ms": "10000",
}


def pump(consumers: list[Consumer], stop: threading.Event) -> None:
    """Serve the live members' rebalances (confluent-kafka runs them in `poll`) until `stop`."""
    while not stop.is_set():
        for consumer in consumers:
            consumer.poll(0.05)


@pytest.fixture(scope="module")
def live_members(gateway_stack: GatewayStack) -> Iterator[None]:
    """A member in each tenant's group `g` while A probes: DescribeGroups and JoinGroup answers
    then carry member metadata naming topics (B's client id is B's secret). A thread polls them,
    so that they take part in rebalances (A's join sessions rebalance A's `g`)."""
    consumers: list[Consumer] = []
    stop = threading.Event()
    pumping = threading.Thread(target=pump, args=(consumers, stop), daemon=True)
    try:
        for tenant, client_id in (("bolt", f"{SECRET}-client"), ("acme", "acme-client")):
            consumer = Consumer(
                gateway_stack.client_config(
                    tenant, **{"group.id": "g", "client.id": client_id}, **LIVE_MEMBER_SETTINGS
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
        pumping.start()
        yield
    finally:
        stop.set()
        if pumping.is_alive():
            pumping.join(timeout=TIMEOUT_S)
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


def consumer_bytes(topics: tuple[str, ...], *, subscription: bool) -> bytes:
    """ConsumerProtocolSubscription v0 (topics, no user data) or Assignment v0 (partition 0 of
    each topic, no user data)."""

    def string(text: str) -> bytes:
        return struct.pack(">h", len(text.encode())) + text.encode()

    if subscription:
        body = struct.pack(">i", len(topics)) + b"".join(string(t) for t in topics)
    else:
        body = struct.pack(">i", len(topics)) + b"".join(
            string(t) + struct.pack(">ii", 1, 0) for t in topics
        )
    return struct.pack(">h", 0) + body + struct.pack(">i", -1)


def session_entity(cls: Any, **values: Any) -> Any:
    """A kio entity of any version from the values that version has (nested lists as dicts)."""
    fields = {f.name: f for f in dataclasses.fields(cls) if not f.name.startswith("__")}
    kwargs: dict[str, Any] = {}
    for name, value in values.items():
        if name not in fields:
            continue
        kind = classify_field(fields[name])
        if isinstance(kind, EntityTupleField):
            kwargs[name] = tuple(session_entity(kind.type_, **item) for item in value)
        else:
            kwargs[name] = value
    return dataclasses.replace(plain_entity(cls), **kwargs)


@dataclass(frozen=True)
class JoinSession:
    """A joins `group` as a new member subscribed to `topics`, at these versions."""

    group: str
    topics: tuple[str, ...]
    versions: dict[int, int]

    def request(self, api_key: int, **values: Any) -> tuple[int, int, Any]:
        version = self.versions[api_key]
        common = {"group_id": self.group, "group_instance_id": None, "reason": None}
        return (
            api_key,
            version,
            session_entity(load_request_schema(api_key, version), **common, **values),
        )

    def join(self, member_id: str) -> tuple[int, int, Any]:
        metadata = consumer_bytes(self.topics, subscription=True)
        return self.request(
            JOIN,
            session_timeout=datetime.timedelta(milliseconds=3000),
            rebalance_timeout=datetime.timedelta(milliseconds=1000),
            member_id=member_id,
            protocol_type="consumer",
            protocols=({"name": "range", "metadata": metadata},),
        )


Answer = Callable[[int, int, Any], Any]


def run_session(session: JoinSession, answer: Answer, traffic: Traffic) -> None:
    """JoinGroup with no member id, again with the one given, SyncGroup (assigning as the leader
    does), Heartbeat, LeaveGroup. Stops at a closed connection or an error a new member can
    meet in a random sequence (a group another request left rebalancing); B's members and names
    never appear (the leak check of every answer, and the member ids checked here)."""
    first = answer(*session.join(""))
    if first is None or first.error_code != ErrorCode.member_id_required:
        return
    assert first.member_id.startswith(CLIENT_ID), first
    joined = answer(*session.join(first.member_id))
    if joined is None or joined.error_code != ErrorCode.none:
        return
    members = [m.member_id for m in joined.members]
    assert joined.member_id == first.member_id, joined
    assert all(m.startswith(A_MEMBER_PREFIXES) for m in [joined.leader, *members]), joined
    assert not members or joined.leader == joined.member_id, joined  # members go to the leader
    traffic.joined[session.group] += 1
    mine = consumer_bytes(session.topics, subscription=False)
    assignments = [
        {
            "member_id": m,
            "assignment": mine if m == joined.member_id else consumer_bytes((), subscription=False),
        }
        for m in members
    ]
    generation = {"generation_id": joined.generation_id, "member_id": joined.member_id}
    synced = answer(
        *session.request(
            SYNC,
            **generation,
            protocol_type="consumer",
            protocol_name=joined.protocol_name,
            assignments=tuple(assignments),
        )
    )
    if synced is None:
        return
    answer(*session.request(HEARTBEAT, **generation))
    answer(
        *session.request(
            LEAVE,
            member_id=joined.member_id,
            members=({"member_id": joined.member_id, "group_instance_id": None, "reason": None},),
        )
    )


Step = tuple[int, int, Any] | JoinSession


class TenantA:
    """The one raw connection of tenant A, replaced by a fresh login when the gateway closes it;
    every answer it reads is checked for leaks and counted in `traffic`."""

    def __init__(self, stack: GatewayStack, traffic: Traffic) -> None:
        self.stack = stack
        self.traffic = traffic
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

    def send(self, api_key: int, version: int, request: Any) -> bytes | None:
        """The answer's payload, checked; None when the gateway closed (then a new login)."""
        correlation_id = self.next_id()
        self.echoable |= {n for n in strings_in(request) if n in ATTACK_NAMES}
        self.traffic.sent[api_key] += 1
        outcome = exchange(
            self.connection, request_bytes(request, correlation_id), ANSWER_DEADLINE_S
        )
        if outcome.payload is None:
            self.traffic.closed[api_key] += 1
            self.reconnect()
            return None
        self.traffic.answered[api_key] += 1
        assert outcome.payload[:4] == correlation_id.to_bytes(4, "big", signed=True), (
            f"api {api_key} v{version}: answer out of order"
        )
        found = leaks(outcome.payload, self.echoable)
        assert not found, f"api {api_key} v{version} {request!r} leaked {found}"
        return outcome.payload

    def answer(self, api_key: int, version: int, request: Any) -> Any:
        """The decoded answer (checked as `send` does), or None when the gateway closed."""
        payload = self.send(api_key, version, request)
        if payload is None:
            return None
        return decode_response(load_response_schema(api_key, version), payload)[1]

    def step(self, item: Step) -> None:
        if isinstance(item, JoinSession):
            # Names inside the subscription bytes are A's own words too.
            self.echoable |= {n for n in (*item.topics, item.group) if n in ATTACK_NAMES}
            run_session(item, self.answer, self.traffic)
        else:
            self.send(*item)

    def still_usable(self) -> None:
        try:
            self.connection.api_versions()  # still usable after the sequence…
        except ConnectionError:  # … or closed cleanly (a failed re-authentication closes)
            self.traffic.closed[-1] += 1
            self.reconnect()


def run_property(stack: GatewayStack, pool: NamePool, traffic: Traffic) -> None:
    tenant = TenantA(stack, traffic)
    apis: dict[int, list[int]] = {}
    for key, (low, high) in sorted(advertised_ranges(tenant.connection).items()):
        versions = [v for v in range(low, high + 1) if has_schema(key, v)]
        if versions:
            apis[key] = versions
    assert set(apis) >= {0, 1, 3, 8, 9, 11, 15, 16, 19}, apis
    traffic.advertised = set(apis)

    session_versions = {
        key: [v for v in apis.get(key, []) if v >= low] for key, low in SESSION_MIN_VERSIONS.items()
    }
    assert all(session_versions.values()), session_versions

    @st.composite
    def join_sessions(draw: st.DrawFn, group: str | None = None) -> JoinSession:
        topics = draw(st.lists(st.sampled_from(pool.names), max_size=3, unique=True))
        return JoinSession(
            group if group is not None else draw(st.sampled_from(JOIN_GROUPS)),
            tuple(topics),
            {key: draw(st.sampled_from(versions)) for key, versions in session_versions.items()},
        )

    @st.composite
    def sequences(draw: st.DrawFn) -> list[Step]:
        steps: list[Step] = []
        for _ in range(draw(st.integers(1, 4))):
            if draw(st.integers(0, 7)) == 0:  # one step in eight: a new member's group session
                steps.append(draw(join_sessions()))
                continue
            key = draw(st.sampled_from(sorted(apis)))
            version = draw(st.sampled_from(apis[key]))
            steps.append((key, version, draw(tenant_requests(key, version, pool))))
        return steps

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
            tenant.send(api_key, version, data.draw(tenant_requests(api_key, version, pool)))
            tenant.still_usable()
        for group in JOIN_GROUPS:  # and one new member's session in each group of the pool
            tenant.step(data.draw(join_sessions(group)))
            tenant.still_usable()

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=checks)
    @given(sequence=sequences())
    def property_nothing_of_b_comes_back(
        sequence: list[Step],
    ) -> None:
        for item in sequence:
            tenant.step(item)
        tenant.still_usable()

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
    # New members joined every group of the pool, B's live group's name and fleet name among them.
    assert set(traffic.joined) == set(JOIN_GROUPS), traffic
    after = snapshot(gateway_stack, "bolt")
    assert after.topics == before.topics
    assert after.ends == before.ends
    assert after.committed == before.committed
    assert {"g", B_ONLY_GROUP} <= after.groups
    assert not any(name.startswith(("acme", "bolt_")) for name in after.groups)
    admin = AdminClient(gateway_stack.client_config("bolt"))  # referenced while its future runs
    members = admin.describe_consumer_groups(["g"])["g"].result(timeout=TIMEOUT_S).members
    assert [m.client_id for m in members] == [f"{SECRET}-client"]  # B's live member, alone


def test_leak_check_would_see_a_leak() -> None:
    """The leak check itself: fleet names and B's marker are found; A's echoed names are not."""
    assert leaks(b"..\x00\x06bolt_t..", {"bolt_t"}) == []
    assert leaks(b"..acme_bolt_t..", {"bolt_t"}) == [b"acme_"]
    assert leaks(b"..bolt_orders..", {"bolt_t"}) == [b"bolt_"]
    assert leaks(b"..BOLTSECRET-3..", set()) == [SECRET.encode()]
    assert leaks(b"..__consumer_offsets..", set()) == [b"__consumer_offsets"]
