"""`TenantPolicy`, the policy stage every tenant request passes: authorization with a real
`Authorizer` built from ACL rows, topic names, produce limits in Kafka's order, quota charges on an
injected clock with the real `GatewayThrottling`, and usage metered under contract-valid keys
whatever the client sent (a hypothesis property: no usage record is ever refused)."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry

from brokers.replication.errors import InvalidTopicError
from brokers.replication.topic_names import validate_topic_name
from brokers.wire.errors import ErrorCode
from gateway.kafka.authorizer import Authorizer
from gateway.kafka.filter import Caller
from gateway.kafka.namespace import TenantNamespace
from gateway.kafka.services import TenantState
from gateway.metering.meter import UsageMeter
from gateway.policy import Identity, Reason, TenantPolicy, valid_topic_name
from gateway.policy.names import usage_client_id, valid_instance_name
from gateway.quotas.quota_book import QuotaBook
from gateway.storage_ledger import StorageRefusal
from gateway.throttling import GatewayThrottling
from tenancy import usage
from tenancy.domain import DEFAULT_LIMITS, Acl, Principal, QuotaEntity, Tenant
from tests.unit.gateway.quotas.fakes import FakeSource

pytestmark = pytest.mark.unit

NOW = 1_764_072_000_000  # an hour boundary
ALICE = Principal("acme", "sa-0000000001", "KEY0000000000001")
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
_ids = itertools.count()


class Clock:
    def __init__(self) -> None:
        self.now_ms = NOW

    def __call__(self) -> int:
        return self.now_ms


class Storage:
    def __init__(self) -> None:
        self.stored = 0

    def stored_bytes(self, tenant_id: str) -> int:
        return self.stored

    def charge(self, tenant_id: str, request_bytes: int, limit: int) -> StorageRefusal | None:
        """The ledger's answer for a tenant that stores `stored` (tests of the ledger itself:
        tests/integration/tenancy/test_limit_ledgers.py)."""
        if self.stored + request_bytes <= limit:
            return None
        return StorageRefusal(True, f"storage limit reached: {self.stored} of {limit} bytes stored")

    async def lease(self, tenant_id: str, request_bytes: int, limit: int) -> None:
        return None


def allow(operation: str, resource_type: str, name: str, pattern: str = "literal") -> Acl:
    return Acl(
        f"acl-{next(_ids)}", "acme", resource_type, pattern, name, operation, "allow",
        "User:sa-0000000001", "*",
    )  # fmt: skip


def tenant(**limits: int) -> Tenant:
    return Tenant(
        "acme",
        "acme",
        "free",
        "active",
        dataclasses.replace(DEFAULT_LIMITS, **limits),
        EPOCH,
        EPOCH,
    )


class Stage:
    """A policy over a real authorizer, real throttling and a real meter, on a fake clock."""

    def __init__(
        self,
        acls: list[Acl],
        client_id: str = "app",
        quotas: dict[str, float] | None = None,
        **limits: int,
    ) -> None:
        self.clock = Clock()
        self.storage = Storage()
        self.meter = UsageMeter("gw-1", "inc1", self.clock)
        default_quotas = {"producer_byte_rate": 1_000_000, **(quotas or {})}
        source = FakeSource({"acme": {QuotaEntity("<default>", None): default_quotas}})
        self.quotas = GatewayThrottling(
            QuotaBook(source), samples=11, window_s=1, registry=CollectorRegistry()
        )
        asyncio.run(self.quotas.load("acme"))
        self.state = TenantState(tenant(**limits), TenantNamespace("acme"), Authorizer(acls))
        self.policy = TenantPolicy(
            Identity(ALICE, "10.0.0.1", client_id),
            lambda: self.state,
            quotas=self.quotas,
            storage=self.storage,
            meter=self.meter,
            clock_ms=self.clock,
        )


WRITE_ORDERS = [allow("WRITE", "TOPIC", "orders"), allow("WRITE", "TOPIC", "ok", "prefixed")]


def test_the_principal_string_is_built_once_for_every_edge() -> None:
    identity = Identity(ALICE, "10.0.0.1", "app")
    assert identity.kafka_principal == "User:sa-0000000001"
    assert Caller is Identity  # the kio filters' caller is the policy's identity


def test_produce_refusals_in_kafkas_order() -> None:
    stage = Stage(WRITE_ORDERS, max_request_bytes=1000)
    policy = stage.policy
    topics = ["orders", "nl\n", ".", "x" * 245, "ok" + "x" * 242, "secret", ""]
    refused = policy.produce_refusals(topics, 100)
    assert {name: r.error for name, r in refused.items()} == {
        "nl\n": ErrorCode.invalid_topic_exception,
        ".": ErrorCode.invalid_topic_exception,
        "x" * 245: ErrorCode.invalid_topic_exception,  # acme_ + 245 > 249
        "secret": ErrorCode.topic_authorization_failed,
        "": ErrorCode.invalid_topic_exception,
    }
    assert "244" in (refused["x" * 245].message or "")
    # Over the request limit: what is authorized is refused for its size, the rest as before.
    too_big = policy.produce_refusals(["orders", "secret"], 1001)
    assert too_big["orders"].reason is Reason.TOO_LARGE
    assert too_big["orders"].error == ErrorCode.message_too_large
    assert too_big["secret"].error == ErrorCode.topic_authorization_failed
    stage.storage.stored = DEFAULT_LIMITS.max_storage_bytes
    full = policy.produce_refusals(["orders"], 10)
    assert full["orders"].error == ErrorCode.policy_violation
    assert "storage limit reached" in (full["orders"].message or "")


def test_a_transactional_id_without_write_refuses_every_topic() -> None:
    stage = Stage(WRITE_ORDERS)
    refused = stage.policy.produce_refusals(["orders", "ok1"], 10, transactional_id="tx")
    assert {r.error for r in refused.values()} == {ErrorCode.transactional_id_authorization_failed}
    stage.state = dataclasses.replace(
        stage.state, access=Authorizer([*WRITE_ORDERS, allow("WRITE", "TRANSACTIONAL_ID", "tx")])
    )
    assert stage.policy.produce_refusals(["orders", "ok1"], 10, transactional_id="tx") == {}


def test_acl_changes_apply_to_a_policy_already_built() -> None:
    stage = Stage(WRITE_ORDERS)
    assert stage.policy.allowed("WRITE", "TOPIC", "orders")
    deny = dataclasses.replace(allow("WRITE", "TOPIC", "orders"), permission="deny")
    stage.state = dataclasses.replace(stage.state, access=Authorizer([*WRITE_ORDERS, deny]))
    assert not stage.policy.allowed("WRITE", "TOPIC", "orders")
    assert stage.policy.produce_refusals(["orders"], 10)["orders"].reason is Reason.NOT_AUTHORIZED


def test_charges_use_the_injected_clock_and_the_request_client_id() -> None:
    stage = Stage(WRITE_ORDERS)
    subject = stage.policy.subject("other-client")
    assert subject.client_id == "other-client" and stage.policy.subject().client_id == "app"
    throttles = []
    for step in range(30):  # 5 MB/s against a 1 MB/s producer quota
        stage.clock.now_ms = NOW + step * 100
        throttles.append(stage.policy.charge_produce(subject, 500_000))
    assert throttles[0] == 0 and max(throttles) > 0
    assert stage.policy.fetch_max_bytes(subject, 123) == 123  # no consumer quota: as asked


def test_a_long_client_id_is_kept_for_quotas_and_bounded_for_usage() -> None:
    long_id = "c" * 300
    stage = Stage(WRITE_ORDERS, client_id=long_id)
    assert stage.policy.subject().client_id == long_id  # Kafka's quota chain sees it as sent
    stage.policy.meter("orders", bytes_in=10, requests=1)
    (record,) = stage.meter.cut(NOW + 1000)
    assert record.client_id == "c" * 255
    assert usage.decode(*usage.encode(record)) == record


@settings(max_examples=300, deadline=None)
@given(
    client_ids=st.lists(st.one_of(st.none(), st.text(max_size=400)), min_size=1, max_size=4),
    topics=st.lists(st.one_of(st.none(), st.text(max_size=300)), min_size=1, max_size=4),
)
def test_no_usage_record_is_ever_refused(
    client_ids: list[str | None], topics: list[str | None]
) -> None:
    """Whatever client ids and topic names reach the meter — through the policy stage or straight
    from a session's raw key — every record cut satisfies the usage contract, and the bytes all
    arrive (attributed to no topic when the name is not one the contract takes)."""
    stage = Stage(WRITE_ORDERS)
    meter = stage.meter
    sent = 0
    for client_id in client_ids:
        policy = TenantPolicy(
            Identity(ALICE, "10.0.0.1", client_id or ""),
            lambda: stage.state,
            quotas=stage.quotas,
            storage=stage.storage,
            meter=meter,
            clock_ms=stage.clock,
        )
        for topic in topics:
            policy.meter(topic, bytes_in=7, requests=1)
            sent += 7
        raw = dataclasses.replace(policy.identity.usage_key(None), client_id=client_id or "")
        meter.connection_opened(raw)  # the session's connection key carries the raw client id
        meter.record(dataclasses.replace(raw, topic=topics[0]), bytes_out=3)
        sent += 3
    records = meter.cut(NOW + 5000)
    for record in records:
        assert usage.decode(*usage.encode(record)) == record
    assert sum(r.bytes_in + r.bytes_out for r in records) == sent


@given(st.text(max_size=260) | st.from_regex(r"[a-zA-Z0-9._-]{1,250}\n?", fullmatch=True))
def test_one_topic_name_rule_on_gateway_broker_and_usage_contract(name: str) -> None:
    try:
        validate_topic_name(name)
        broker = True
    except InvalidTopicError:
        broker = False
    assert valid_topic_name(name) == broker
    if broker:
        assert usage.is_topic_name(name)


def test_attack_1_a_trailing_newline_is_no_topic_name() -> None:
    assert not valid_topic_name("nl\n")
    with pytest.raises(InvalidTopicError):
        validate_topic_name("nl\n")
    assert not usage.is_topic_name("nl\n")


@pytest.mark.parametrize(
    ("sent", "metered"),
    [
        (None, ""),
        ("app", "app"),
        ("c" * 300, "c" * 255),
        ("a\x00b\n", "a\ufffdb\ufffd"),
        ("x\udcff", "x\ufffd"),
        ("ünï", "ünï"),
    ],
)
def test_usage_client_id(sent: str | None, metered: str) -> None:
    assert usage_client_id(sent) == metered


def test_only_partition_mutations_and_config_changes_get_a_mutation_budget() -> None:
    stage = Stage(WRITE_ORDERS)
    subject = stage.policy.subject()
    assert stage.policy.mutation_budget(subject, 0, 9) is None  # Produce
    for api_key, version in ((19, 6), (20, 5), (37, 3), (19, 2)):
        budget = stage.policy.mutation_budget(subject, api_key, version)
        assert budget is not None and not budget.exceeded()  # no quota configured
        budget.record(3)
    assert stage.policy.mutation_throttle(subject, 19) == 0
    changes = stage.policy.mutation_budget(subject, 44, 1)  # paced even with no quota set
    assert changes is not None and not changes.exceeded()
    changes.record(60)  # ten past the burst of 50, at 5 a second
    assert stage.policy.mutation_throttle(subject, 44) == 2000
    strict = stage.policy.mutation_budget(subject, 33, 2, strict=True)
    assert strict is not None and strict.exceeded(), "a strict caller is refused past the burst"


def test_a_strict_caller_is_refused_by_the_kip_599_quota_on_any_version() -> None:
    """The HTTP API (a caller that cannot be muted) sends CreateTopics v5, a version KIP-599
    only throttles: its budget refuses once the bucket is spent, as from v6, where a Kafka
    client's v5 request is still only throttled."""
    stage = Stage(WRITE_ORDERS, quotas={"controller_mutation_rate": 1.0})  # 11 tokens
    subject = stage.policy.subject()
    first = stage.policy.mutation_budget(subject, 19, 5, strict=True)
    assert first is not None and not first.exceeded()
    first.record(15)
    again = stage.policy.mutation_budget(subject, 19, 5, strict=True)
    assert again is not None and again.exceeded()
    kafka_client = stage.policy.mutation_budget(subject, 19, 5)
    assert kafka_client is not None and not kafka_client.exceeded()
    assert stage.policy.mutation_throttle(subject, 19) == 4000


def test_a_request_naming_its_own_client_id_gets_its_own_identity() -> None:
    identity = Identity(ALICE, "10.0.0.1", "app")
    assert identity.with_client_id("app") is identity
    other = identity.with_client_id("x" * 300)
    assert other.client_id == "x" * 300 and other.usage_client_id == "x" * 255
    assert other.kafka_principal == identity.kafka_principal


@pytest.mark.parametrize(
    ("name", "valid"),
    [("rest-1.a_b", True), ("a" * 200, True), ("a" * 201, False), ("", False), ("ünï", False),
     ("١٢", False), ("nl\n", False), ("a b", False)],
)  # fmt: skip
def test_http_consumer_instance_names_are_ascii(name: str, valid: bool) -> None:
    assert valid_instance_name(name) is valid


def test_a_name_that_is_no_topic_is_metered_as_no_topic_at_once() -> None:
    """The meter's keys never hold what a request merely named (up to 32 KiB a name)."""
    stage = Stage(WRITE_ORDERS)
    stage.policy.meter("x" * 30_000, requests=1)
    stage.policy.meter("nl\n", requests=1)
    stage.policy.meter("orders", requests=1)
    keys = set(stage.meter._counters)  # the window's keys before any cut
    assert {key.topic for key in keys} == {None, "orders"}
