"""Attacks on the tenant HTTP API that held (issue 21), and changes made through the admin API
against both doors: kept as tests.

The routes come from the gateway's own OpenAPI document (`gateway/http/openapi.py`), so a route
added there is attacked here too without editing this file. Every route, called without
credentials, with a wrong secret, with an unknown key id or with a bearer token, is answered 401
(with `WWW-Authenticate: Basic`) and changes nothing. Every route that names a tenant's cluster id
or consumer instance, called with bolt's valid key and acme's ids, is answered 404 and changes
nothing of acme's; the only routes that name neither are listed (`UNSCOPED`) and answer bolt's own
things. The operator's routes take no tenant key. Fleet names (`bolt_orders`) and internal topics
reach nothing over HTTP. A revoked key is refused within the contract's second. Rotating
`X-Client-Id` escapes no quota.

With `pier admin-api` on the same store: once it has answered a change (`Pier-Propagation:
confirmed`), a DENY ACL refuses the next HTTP produce, a suspension the next HTTP request, a DENY
READ the next Fetch of an open Kafka connection and the next poll of an HTTP consumer instance,
`authorization` turned to `acls` the next produce on both doors, a deleted tenant its open
connection and HTTP, and a revoked key any new Kafka login. A key that expires loses its open
connection and HTTP at its expiry. An account of a tenant whose accounts need ACLs learns nothing
over HTTP of a topic it may not describe, and a revoked key's very next HTTP request is refused.
One gateway stack for the module; blocking, pytest's main thread.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from confluent_kafka import Consumer, TopicPartition
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.fetch.v12.response import FetchResponse
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.schema.produce.v9.response import ProduceResponse

from brokers.records.builder import build_batch
from brokers.wire.errors import ErrorCode
from gateway.http.openapi import openapi_document
from infra.admin_api import start_admin_api
from tenancy.domain import DEFAULT_ENTITY, QuotaEntity
from tenancy.usage import TrafficRecord
from tests.conftest import remember_log
from tests.e2e.gateway.broker_log import usage_records
from tests.e2e.gateway.http_stack import TenantHttp, http_gateway_stack, http_url, wait_http
from tests.e2e.gateway.sasl_wire import authenticate, open_raw
from tests.e2e.gateway.test_refusals import assert_refused, sasl_login
from tests.e2e.request_fuzz import plain_entity
from tests.gateway_stack import OPERATOR, Credentials, GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

V2 = "application/vnd.kafka.v2+json"
PUBLIC = {("get", "/"), ("get", "/openapi.json")}
ROUTES = sorted(
    (method, path)
    for path, operations in openapi_document("http://pier")["paths"].items()
    for method in operations
    if method in ("get", "post", "put", "delete") and (method, path) not in PUBLIC
)
# Routes naming neither a cluster id nor a consumer instance: they can only answer the caller's own.
UNSCOPED = {("get", "/v3/clusters"), ("post", "/consumers/{group_name}")}
REVOKE_WITHIN_S = 1.0  # the bound for a revocation to be in force on every gateway
REVOKE_MARGIN_S = 0.5  # this test's own overhead (the store write, 2 shared cores)
STRING = {"type": "STRING", "data": "intruder"}
OFFSETS = {"offsets": [{"topic": "orders", "partition": 0, "offset": 0}]}
PARTITIONS = {"partitions": [{"topic": "orders", "partition": 0}]}
BODIES: dict[tuple[str, str], Any] = {
    ("post", "/topics"): {"topic_name": "intruder", "partitions_count": 1, "replication_factor": 1},
    ("post", "/configs:alter"): {"data": [{"name": "retention.ms", "value": "1000"}]},
    ("put", "/configs/{name}"): {"value": "1000"},
    ("post", "/records"): {"value": STRING},
    ("post", "/consumers/{group_name}"): {"format": "binary"},
    ("post", "/subscription"): {"topics": ["orders"]},
    ("post", "/assignments"): PARTITIONS,
    ("post", "/offsets"): OFFSETS,
    ("post", "/positions"): OFFSETS,
    ("post", "/positions/beginning"): PARTITIONS,
    ("post", "/positions/end"): PARTITIONS,
}


@dataclass(frozen=True)
class AcmeThings:
    """acme's ids an attacker would put into the routes, and how to see they are intact."""

    acme: TenantHttp
    params: dict[str, str]
    instance: str

    def intact(self) -> None:
        topic = self.acme.get(self.acme.cluster + "/topics/orders")
        assert topic.status_code == 200, topic.text
        config = self.acme.get(self.acme.cluster + "/topics/orders/configs/retention.ms")
        assert config.json()["value"] != "1000", config.text
        subscription = self.acme.get(self.instance + "/subscription")
        assert subscription.status_code == 200 and subscription.json()["topics"] == ["orders"]
        topics = self.acme.get(self.acme.cluster + "/topics").json()["data"]
        assert "intruder" not in {t["topic_name"] for t in topics}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    settings = {
        "consumer.instance.timeout.ms": "600000",  # acme's instance lives all along
        # A quota window of 2 samples of 1 s: a throttle earned over HTTP is waited before the
        # answer, and stays short (the quota attack below).
        "quota.window.num": "2",
        "quota.window.size.seconds": "1",
    }
    with http_gateway_stack(Path(tmp_path_factory.mktemp("held-http")), settings) as running:
        wait_http(running)
        yield running


@pytest.fixture(autouse=True)
def _logs(stack: GatewayStack, request: pytest.FixtureRequest) -> None:
    """The gateway's and broker's log tails on a failing test's report."""
    if stack.gateway is not None:
        remember_log(request.node, "gateway", stack.gateway.log_path)
    if stack.broker is not None:
        remember_log(request.node, "broker", stack.broker.log_path)


@pytest.fixture(scope="module")
def things(stack: GatewayStack) -> AcmeThings:
    acme = TenantHttp(stack, stack.credentials["acme"])
    acme.create_topic("orders", 1)
    assert (
        acme.produce("orders", {"value": {"type": "STRING", "data": "acme-1"}}).status_code == 200
    )
    instance = acme.consumer("readers", name="first", format="binary")
    assert acme.post(instance + "/subscription", {"topics": ["orders"]}).status_code == 204
    params = {
        "cluster_id": acme.cluster_id,
        "topic_name": "orders",
        "consumer_group_id": "readers",
        "group_name": "readers",
        "instance": "first",
        "name": "retention.ms",
        "partition_id": "0",
        "invoice_id": "acme-2026-11",  # the form of acme's invoice ids
    }
    return AcmeThings(acme, params, instance)


def body_of(method: str, path: str) -> Any:
    for (body_method, suffix), body in BODIES.items():
        if method == body_method and path.endswith(suffix):
            return body
    return None


def send(
    stack: GatewayStack, method: str, path: str, params: dict[str, str], headers: dict[str, str]
) -> requests.Response:
    url = http_url(stack) + path.format(**params)
    body = body_of(method, path)
    content_type = V2 if path.startswith("/consumers") else "application/json"
    data = None if body is None else json.dumps(body).encode()
    return requests.request(
        method,
        url,
        data=data,
        headers={"Content-Type": content_type, "Accept": "application/json", **headers},
        timeout=30,
    )


def basic(key_id: str, secret: str) -> dict[str, str]:
    token = base64.b64encode(f"{key_id}:{secret}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def route_id(route: tuple[str, str]) -> str:
    return f"{route[0].upper()} {route[1]}"


@pytest.mark.parametrize("auth", ["none", "wrong-secret", "unknown-key", "bearer"])
@pytest.mark.parametrize("route", ROUTES, ids=route_id)
def test_attack_every_route_without_valid_credentials_is_401(
    stack: GatewayStack, things: AcmeThings, route: tuple[str, str], auth: str
) -> None:
    creds = stack.credentials["acme"]
    headers = {
        "none": {},
        # Another last character: a secret that already ends in the replacement would be the right one.
        "wrong-secret": basic(
            creds.key_id, creds.secret[:-1] + ("x" if creds.secret[-1] != "x" else "y")
        ),
        "unknown-key": basic("AAAAAAAAAAAAAAAA", creds.secret),
        "bearer": {"Authorization": f"Bearer {creds.secret}"},
    }[auth]
    method, path = route
    answer = send(stack, method, path, things.params, headers)
    assert answer.status_code == 401, answer.text
    assert answer.headers["WWW-Authenticate"].startswith("Basic")
    assert answer.json()["error_code"] == 401
    assert creds.secret not in answer.text and "acme" not in answer.text
    if method != "get":
        things.intact()


@pytest.mark.parametrize("route", ROUTES, ids=route_id)
def test_attack_every_route_with_another_tenants_key_and_ids_finds_nothing(
    stack: GatewayStack, things: AcmeThings, route: tuple[str, str]
) -> None:
    """bolt's valid key with acme's cluster id, topic, group and instance: 404, nothing changed."""
    method, path = route
    bolt = stack.credentials["bolt"]
    answer = send(stack, method, path, things.params, basic(bolt.key_id, bolt.secret))
    if route in UNSCOPED:
        assert answer.status_code == 200, answer.text
        assert things.params["cluster_id"] not in answer.text
        assert "first" not in answer.text
    else:
        assert answer.status_code == 404, answer.text
        assert answer.json()["error_code"] in (404, 40401, 40402, 40403, 40404)
    assert "acme" not in answer.text
    if method != "get":
        things.intact()


def test_attack_the_unscoped_routes_are_only_the_listed_ones() -> None:
    """A route naming no cluster id and no instance answers any key: each must be reviewed."""
    unscoped = {r for r in ROUTES if "{cluster_id}" not in r[1] and "{instance}" not in r[1]}
    assert unscoped == UNSCOPED


@pytest.mark.parametrize("tenant", ["acme", "bolt"])
def test_attack_operator_routes_refuse_tenant_keys(
    stack: GatewayStack, things: AcmeThings, tenant: str
) -> None:
    creds = stack.credentials[tenant]
    base = http_url(stack) + "/operator/v1/tenants/acme/http-consumers"
    for headers in (
        {},
        basic(creds.key_id, creds.secret),
        {"Authorization": f"Bearer {creds.secret}"},
        {"Authorization": f"Bearer {creds.key_id}:{creds.secret}"},
    ):
        listed = requests.get(base, headers=headers, timeout=30)
        assert listed.status_code == 401, listed.text
        assert "first" not in listed.text
        deleted = requests.delete(base + "/readers/first", headers=headers, timeout=30)
        assert deleted.status_code == 401, deleted.text
    things.intact()


@pytest.mark.parametrize(
    "name", ["bolt_orders", "__consumer_offsets", "__usage", "__transaction_state"]
)
def test_attack_fleet_and_internal_topic_names_over_http_reach_nothing(
    stack: GatewayStack, things: AcmeThings, name: str
) -> None:
    bolt = TenantHttp(stack, stack.credentials["bolt"])
    if bolt.get(bolt.cluster + "/topics/orders").status_code == 404:
        bolt.create_topic("orders", 1)
        assert (
            bolt.produce("orders", {"value": {"type": "STRING", "data": "bolt-1"}}).status_code
            == 200
        )
    acme = things.acme
    t = f"{acme.cluster}/topics/{name}"
    for answer in (
        acme.get(t),
        acme.get(t + "/partitions"),
        acme.get(t + "/configs"),
        acme.post(t + "/configs:alter", {"data": [{"name": "retention.ms", "value": "1"}]}),
        acme.produce(name, {"value": STRING}),
        acme.delete(t),
    ):
        assert answer.status_code == 404, answer.text
        unechoed = answer.text.replace(name, "")  # acme's own words may come back
        assert "bolt" not in unechoed and "__" not in unechoed
    instance = acme.consumer("intruders", format="binary")
    try:
        assigned = acme.session.post(
            acme.base + instance + "/assignments",
            data=json.dumps({"partitions": [{"topic": name, "partition": 0}]}),
            headers={"Content-Type": V2},
            timeout=30,
        )
        assert assigned.status_code in (204, 404), assigned.text
        if assigned.status_code == 204:  # accepted as a name: then its poll reads nothing
            polled = acme.get(
                instance + "/records?timeout=500",
                headers={"Accept": "application/vnd.kafka.binary.v2+json"},
            )
            assert (polled.status_code, polled.json()) in ((200, []), (404, polled.json()))
            assert "bolt" not in polled.text
    finally:
        acme.delete(instance)
    records = bolt.get(bolt.cluster + "/topics/orders/partitions/0")
    assert records.status_code == 200


def test_attack_a_revoked_key_is_refused_over_http_within_a_second(stack: GatewayStack) -> None:
    """A leaked key is revoked: its next requests get 401 within the bound, even though its last
    success was remembered (the gateway keeps HTTP logins for at most a second)."""
    with stack.store() as store:
        leaked = GatewayStack.add_tenant(store, "acme", name="leaked")
    headers = basic(leaked.key_id, leaked.secret)
    url = http_url(stack) + "/v3/clusters"
    # In use (and so remembered). A login racing the key's own creation through the change feed
    # can be refused once (reason=key_changed_during_check): wait until it is accepted.
    wait_until(
        lambda: requests.get(url, headers=headers, timeout=30).status_code == 200,
        what="the new key accepted over HTTP",
        timeout=10,
    )
    with stack.store() as store:
        store.revoke_api_key(leaked.key_id, actor=OPERATOR)
    revoked_at = time.monotonic()
    wait_until(
        lambda: requests.get(url, headers=headers, timeout=30).status_code == 401,
        what="the revoked key refused over HTTP",
        timeout=10,
        interval=0.02,
    )
    elapsed = time.monotonic() - revoked_at
    assert elapsed <= REVOKE_WITHIN_S + REVOKE_MARGIN_S, f"revoked key served for {elapsed:.2f}s"
    assert requests.get(url, headers=headers, timeout=30).status_code == 401


def test_attack_rotating_http_client_ids_does_not_escape_the_user_quota(
    stack: GatewayStack,
) -> None:
    """The HTTP door keeps the Kafka door's quota subject: a tenant whose default user quota is
    20 kB/s sends 10 kB records, each under a new `X-Client-Id`. The window (1 s) allows about
    20 kB; the later requests earn throttle time, which the usage records of their client ids
    show. Were the quota kept per client id, each id would stay under it and earn none."""
    tenant = f"h{uuid.uuid4().hex[:8]}"
    with stack.store() as store:
        creds = GatewayStack.add_tenant(store, tenant)
        store.set_quotas(
            tenant,
            QuotaEntity(DEFAULT_ENTITY, None),
            {"producer_byte_rate": 20_000.0},
            actor=OPERATOR,
        )
    # A login racing the key's creation through the change feed can be refused once.
    client = wait_until(
        lambda: TenantHttp(stack, creds),
        what="the new tenant's key accepted",
        timeout=10,
        retry_on=(AssertionError,),
    )
    client.create_topic("metered", 1)
    value = base64.b64encode(uuid.uuid4().bytes * 625).decode()  # 10 kB of record value
    client_ids = [f"rotating-{i}" for i in range(6)]
    for client_id in client_ids:
        answer = client.post(
            f"{client.cluster}/topics/metered/records",
            {"value": {"type": "BINARY", "data": value}},
            headers={"X-Client-Id": client_id},
        )
        assert answer.status_code == 200, answer.text
    assert stack.broker is not None
    bootstrap = stack.broker.bootstrap

    def throttled() -> dict[str, int] | None:
        records = [
            r
            for r in usage_records(bootstrap).values()
            if isinstance(r, TrafficRecord) and r.tenant == tenant and r.client_id in client_ids
        ]
        if {r.client_id for r in records} != set(client_ids):
            return None  # not all flushed yet
        sums: dict[str, int] = dict.fromkeys(client_ids, 0)
        for record in records:
            sums[record.client_id] += record.throttle_ms
        return sums

    sums = wait_until(throttled, what="usage records of every client id", timeout=30)
    assert sums is not None
    assert sum(1 for ms in sums.values() if ms > 0) >= 2, sums


@pytest.fixture(scope="module")
def admin_api(stack: GatewayStack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminApi]:
    with stack.store() as store:
        token = str(store.create_operator(f"held-{uuid.uuid4().hex[:6]}", actor=OPERATOR))
    log = tmp_path_factory.mktemp("held-admin-api") / "admin-api.log"
    process = start_admin_api(stack.db_url, log)
    try:
        yield AdminApi(process.url, token)
    finally:
        process.stop()


@dataclass(frozen=True)
class AdminApi:
    url: str
    token: str

    def call(self, method: str, path: str, body: Any = None) -> requests.Response:
        headers = {"Authorization": f"Bearer {self.token}"}
        return requests.request(method, self.url + path, json=body, headers=headers, timeout=30)

    def in_force(self, method: str, path: str, body: Any = None) -> None:
        """Call; the answer says every gateway has applied the change."""
        answer = self.call(method, path, body)
        assert answer.status_code in (200, 201, 204), answer.text
        assert answer.headers["Pier-Propagation"] == "confirmed", dict(answer.headers)


def test_attack_a_key_revoked_through_the_admin_api_is_refused_over_http_when_it_answers(
    stack: GatewayStack, admin_api: AdminApi
) -> None:
    """A leaked key, in use over HTTP, is revoked through the admin API; once the answer says
    every gateway has applied it (`Pier-Propagation: confirmed`), the key's very next request is
    401 — as its open Kafka connections are already closed then (test_access.py)."""
    with stack.store() as store:
        leaked = GatewayStack.add_tenant(store, "acme", name="leaked-admin")
    headers = basic(leaked.key_id, leaked.secret)
    url = http_url(stack) + "/v3/clusters"
    wait_until(
        lambda: requests.get(url, headers=headers, timeout=30).status_code == 200,
        what="the new key accepted over HTTP",
        timeout=10,
    )
    assert (
        requests.get(url, headers=headers, timeout=30).status_code == 200
    )  # in use right up to it
    answer = admin_api.call("DELETE", f"/v1/api-keys/{leaked.key_id}")
    assert answer.status_code == 200, answer.text
    assert answer.headers["Pier-Propagation"] == "confirmed", dict(answer.headers)
    assert requests.get(url, headers=headers, timeout=30).status_code == 401


def test_attack_a_deny_acl_and_a_suspension_are_in_force_over_http_when_the_admin_api_answers(
    stack: GatewayStack, admin_api: AdminApi
) -> None:
    """Over HTTP too, nothing passes between the admin API's answer and the new state: a DENY
    WRITE ACL refuses the very next produce (403), a suspension the very next request (401: the
    suspended tenant's keys no longer log in)."""
    tenant = f"d{uuid.uuid4().hex[:8]}"
    with stack.store() as store:
        store.create_tenant(
            display_name=tenant, plan="free", tenant_id=tenant, authorization="open", actor=OPERATOR
        )
        creds = GatewayStack.add_tenant(store, tenant)
    client = wait_until(
        lambda: TenantHttp(stack, creds),
        what="the new tenant's key accepted",
        timeout=10,
        retry_on=(AssertionError,),
    )
    client.create_topic("guarded", 1)
    assert client.produce("guarded", {"value": STRING}).status_code == 200
    deny = {
        "resource_type": "TOPIC",
        "pattern_type": "literal",
        "resource_name": "guarded",
        "operation": "WRITE",
        "permission": "deny",
        "principal": f"User:{creds.service_account}",
    }
    admin_api.in_force("POST", f"/v1/tenants/{tenant}/acls", deny)
    refused = client.produce("guarded", {"value": STRING})
    assert refused.status_code == 403 and refused.json()["error_code"] == 40301, refused.text
    admin_api.in_force("POST", f"/v1/tenants/{tenant}/suspend")
    suspended = client.get(client.cluster + "/topics")  # its keys no longer log in, as over Kafka
    assert suspended.status_code == 401, suspended.text


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_attack_a_key_revoked_through_the_admin_api_cannot_log_in_over_kafka_when_it_answers(
    stack: GatewayStack, admin_api: AdminApi, mechanism: str
) -> None:
    """The Kafka door, for comparison with N1: a key whose login is cached (verification cache)
    is refused a new login right after the admin API answered its revocation."""
    with stack.store() as store:
        leaked = GatewayStack.add_tenant(store, "acme", name=f"leaked-{mechanism.lower()}")

    def accepted() -> bool:
        login = sasl_login(stack, leaked.key_id, leaked.secret, mechanism)
        login.connection.close()
        return login.error_code == 0

    wait_until(accepted, what="the new key accepted over Kafka", timeout=10)
    admin_api.in_force("DELETE", f"/v1/api-keys/{leaked.key_id}")
    assert_refused(stack, leaked.key_id, leaked.secret, mechanism)


def fetch_request(topic: str) -> Any:
    partition = dataclasses.replace(
        plain_entity(FetchPartition), partition=0, fetch_offset=0, partition_max_bytes=1 << 20
    )
    return dataclasses.replace(
        plain_entity(FetchRequest),
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=10),
        min_bytes=0,
        max_bytes=1 << 20,
        session_epoch=-1,
        topics=(
            dataclasses.replace(plain_entity(FetchTopic), topic=topic, partitions=(partition,)),
        ),
        forgotten_topics_data=(),
    )


def test_attack_open_readers_are_cut_off_by_a_deny_read_acl_when_the_admin_api_answers(
    stack: GatewayStack, admin_api: AdminApi
) -> None:
    """A Kafka connection and an HTTP consumer instance, both reading a topic, both opened before
    a DENY READ ACL: once the admin API has answered, the connection's next Fetch is
    TOPIC_AUTHORIZATION_FAILED and the instance's next poll reads no record."""
    tenant = f"r{uuid.uuid4().hex[:8]}"
    with stack.store() as store:
        store.create_tenant(
            display_name=tenant, plan="free", tenant_id=tenant, authorization="open", actor=OPERATOR
        )
        creds = GatewayStack.add_tenant(store, tenant)
    client = wait_until(
        lambda: TenantHttp(stack, creds),
        what="the new tenant's key accepted",
        timeout=10,
        retry_on=(AssertionError,),
    )
    client.create_topic("guarded", 1)
    assert (
        client.produce("guarded", {"value": {"type": "STRING", "data": "secret"}}).status_code
        == 200
    )
    instance = client.consumer(
        "guarded-readers", format="string", **{"auto.offset.reset": "earliest"}
    )
    assigned = client.post(
        instance + "/assignments", {"partitions": [{"topic": "guarded", "partition": 0}]}
    )
    assert assigned.status_code == 204, assigned.text
    with open_raw(stack) as connection:
        connection.api_versions()
        authenticate(connection, creds)
        before = connection.call(fetch_request("guarded"), FetchResponse, timeout=30)
        assert [p.error_code for t in before.responses for p in t.partitions] == [0]
        deny = {
            "resource_type": "TOPIC",
            "pattern_type": "literal",
            "resource_name": "guarded",
            "operation": "READ",
            "permission": "deny",
            "principal": f"User:{creds.service_account}",
        }
        admin_api.in_force("POST", f"/v1/tenants/{tenant}/acls", deny)
        after = connection.call(fetch_request("guarded"), FetchResponse, timeout=30)
        codes = [p.error_code for t in after.responses for p in t.partitions]
        assert codes == [ErrorCode.topic_authorization_failed]
        assert b"secret" not in repr(after).encode()
    polled = client.get(
        instance + "/records?timeout=500",
        headers={"Accept": "application/vnd.kafka.string.v2+json"},
    )
    assert polled.status_code == 403 or polled.json() == [], polled.text
    assert "secret" not in polled.text


def produce_request(topic: str) -> Any:
    data = dataclasses.replace(
        plain_entity(PartitionProduceData), index=0, records=build_batch([(b"k", b"v")])
    )
    return dataclasses.replace(
        plain_entity(ProduceRequest),
        transactional_id=None,
        acks=-1,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(
            dataclasses.replace(plain_entity(TopicProduceData), name=topic, partition_data=(data,)),
        ),
    )


def produce_codes(connection: Any, topic: str) -> list[int]:
    answer = connection.call(produce_request(topic), ProduceResponse, timeout=30)
    return [p.error_code for t in answer.responses for p in t.partition_responses]


def test_attack_an_open_tenant_made_acls_and_a_deleted_tenant_are_in_force_when_answered(
    stack: GatewayStack, admin_api: AdminApi
) -> None:
    """A tenant's authorization changed from `open` to `acls` (its account has no ACL): the next
    produce on an already open Kafka connection and over HTTP is refused. The tenant deleted: its
    open connection is closed and HTTP refuses it, when the admin API answers."""
    tenant = f"o{uuid.uuid4().hex[:8]}"
    with stack.store() as store:
        store.create_tenant(
            display_name=tenant, plan="free", tenant_id=tenant, authorization="open", actor=OPERATOR
        )
        creds = GatewayStack.add_tenant(store, tenant)
    client = wait_until(
        lambda: TenantHttp(stack, creds),
        what="the new tenant's key accepted",
        timeout=10,
        retry_on=(AssertionError,),
    )
    client.create_topic("orders", 1)
    with open_raw(stack) as connection:
        connection.api_versions()
        authenticate(connection, creds)
        assert produce_codes(connection, "orders") == [0]
        admin_api.in_force("PATCH", f"/v1/tenants/{tenant}", {"authorization": "acls"})
        assert produce_codes(connection, "orders") == [ErrorCode.topic_authorization_failed]
        refused = client.produce("orders", {"value": STRING})
        assert refused.status_code == 403, refused.text
        admin_api.in_force("DELETE", f"/v1/tenants/{tenant}")
        assert connection.closed_by_peer(1.0), "a deleted tenant's connection outlived the answer"
    gone = client.get(client.cluster + "/topics")
    assert gone.status_code in (401, 403), gone.text


EXPIRES_IN_S = 3.0
EXPIRY_MARGIN_S = 1.0  # the contract's second for a change to reach open connections


def test_attack_an_expired_key_loses_its_open_connection_and_http(stack: GatewayStack) -> None:
    """A key issued with an expiry (a leaked key dies by itself): its open Kafka connection is
    closed at the expiry (KIP-368 session lifetime), HTTP answers 401 and a new login is refused,
    with nothing done by an operator."""
    with stack.store() as store:
        account = store.create_service_account("acme", name="expiring", actor=OPERATOR)
        expires_at = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=EXPIRES_IN_S)
        key, secret = store.create_api_key(
            "acme", service_account_id=account.id, expires_at=expires_at, actor=OPERATOR
        )
    deadline = time.monotonic() + EXPIRES_IN_S
    creds = Credentials("acme", account.id, key.key_id, str(secret))
    headers = basic(creds.key_id, creds.secret)
    url = http_url(stack) + "/v3/clusters"
    wait_until(
        lambda: requests.get(url, headers=headers, timeout=30).status_code == 200,
        what="the expiring key accepted over HTTP",
        timeout=EXPIRES_IN_S,
    )
    with open_raw(stack) as connection:
        connection.api_versions()
        authenticate(connection, creds)
        assert produce_codes(connection, "unknown-topic") == [ErrorCode.unknown_topic_or_partition]
        assert connection.closed_by_peer(EXPIRES_IN_S + EXPIRY_MARGIN_S + 5.0)
        closed_at = time.monotonic()
    assert closed_at <= deadline + EXPIRY_MARGIN_S, f"closed {closed_at - deadline:.2f}s late"
    assert requests.get(url, headers=headers, timeout=30).status_code == 401
    assert_refused(stack, creds.key_id, creds.secret, "PLAIN")


def allow(store: Any, tenant: str, account: str, resource: str, name: str, operation: str) -> None:
    store.create_acl(
        tenant,
        resource_type=resource,
        pattern_type="literal",
        resource_name=name,
        operation=operation,
        permission="allow",
        principal=f"User:{account}",
        actor=OPERATOR,
    )


def test_attack_an_account_learns_nothing_over_http_of_a_topic_it_may_not_describe(
    stack: GatewayStack,
) -> None:
    """In a tenant whose accounts need ACLs, a reader may READ topic `orders` and group
    `readers`; the group also holds offsets of `secret`. Over HTTP the reader lists only `orders`,
    finds neither `secret` nor its partitions or configs, and the group's lags either leave
    `secret` out or are refused without naming it."""
    tenant = f"a{uuid.uuid4().hex[:8]}"
    with stack.store() as store:
        store.create_tenant(
            display_name=tenant, plan="free", tenant_id=tenant, authorization="acls", actor=OPERATOR
        )
        admin = GatewayStack.add_tenant(store, tenant, name="admin")
        reader = GatewayStack.add_tenant(store, tenant, name="reader")
        for resource, name in (("TOPIC", "*"), ("GROUP", "*"), ("CLUSTER", "kafka-cluster")):
            allow(store, tenant, admin.service_account, resource, name, "ALL")
        allow(store, tenant, reader.service_account, "TOPIC", "orders", "READ")
        allow(store, tenant, reader.service_account, "GROUP", "readers", "READ")
    as_admin = wait_until(
        lambda: TenantHttp(stack, admin), what="admin's key", timeout=10, retry_on=(AssertionError,)
    )
    wait_until(  # the ACLs in force: refused until then
        lambda: (
            as_admin.post(
                as_admin.cluster + "/topics",
                {"topic_name": "orders", "partitions_count": 1, "replication_factor": 1},
            ).status_code
            in (201, 400, 409)
        ),
        what="admin's ACLs in force",
        timeout=30,
    )
    as_admin.create_topic("secret", 1)
    for topic in ("orders", "secret"):
        assert as_admin.produce(topic, {"value": STRING}).status_code == 200
    config = {
        **stack.client_config("acme"),
        "sasl.username": admin.key_id,
        "sasl.password": admin.secret,
        "group.id": "readers",
    }
    committer = Consumer(config)
    try:
        offsets = [TopicPartition(t, 0, 1) for t in ("orders", "secret")]
        committer.commit(offsets=offsets, asynchronous=False)
    finally:
        committer.close()
    as_reader = wait_until(
        lambda: TenantHttp(stack, reader),
        what="reader's key",
        timeout=10,
        retry_on=(AssertionError,),
    )
    c = as_reader.cluster
    listed = as_reader.get(c + "/topics")
    assert [t["topic_name"] for t in listed.json()["data"]] == ["orders"], listed.text
    for path in ("/topics/secret", "/topics/secret/partitions", "/topics/secret/configs"):
        answer = as_reader.get(c + path)
        assert answer.status_code in (403, 404), answer.text
    for path in ("/consumer-groups/readers/lags", "/consumer-groups/readers/lag-summary"):
        answer = as_reader.get(c + path)
        assert answer.status_code in (200, 403), answer.text
        assert "secret" not in answer.text, f"{path}: {answer.text}"
        if path.endswith("/lags") and answer.status_code == 200:
            assert [lag["topic_name"] for lag in answer.json()["data"]] == ["orders"]


def test_attack_a_pattern_subscription_over_http_reads_nothing_of_bolt(
    stack: GatewayStack, things: AcmeThings
) -> None:
    """Confluent's v2 API lets a consumer subscribe by `topic_pattern`: acme asks for `.*` and
    `bolt_.*`. Either refused (4xx), or its polls read only acme's records."""
    bolt = TenantHttp(stack, stack.credentials["bolt"])
    bolt.create_topic(f"pattern-{uuid.uuid4().hex[:6]}", 1)
    acme = things.acme
    for pattern in (".*", "bolt_.*"):
        instance = acme.consumer(
            f"pattern-{uuid.uuid4().hex[:6]}", format="string", **{"auto.offset.reset": "earliest"}
        )
        try:
            answer = acme.post(instance + "/subscription", {"topic_pattern": pattern})
            assert answer.status_code in (204, 400, 404, 422), answer.text
            if answer.status_code == 204:
                polled = acme.get(
                    instance + "/records?timeout=500",
                    headers={"Accept": "application/vnd.kafka.string.v2+json"},
                )
                assert all(r["topic"] == "orders" for r in polled.json()), polled.text
            subscription = acme.get(instance + "/subscription")
            assert "bolt" not in subscription.text and "pattern-" not in subscription.text
        finally:
            acme.delete(instance)
