"""Attacks on the tenant's limits (issue 21, #10–#12): another service account's HTTP consumer
instance, concurrent creations racing past `max_partitions`, and HTTP consumer instances as
connections past `max_connections` (and as fleet connections the gateway opens).

One gateway stack with its HTTP API: tenant `acme` has two service accounts, `app` (A: every
topic and group) and `other` (B: only its own groups `b-*`); tenant `cora` (two accounts, every
resource) is #12's, so no other test's connections count against it. Each test sets the limits it
attacks and puts the defaults back. Real clients (confluent-kafka, `requests`), real broker and store.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tenancy.domain import DEFAULT_LIMITS
from tests.conftest import remember_log
from tests.e2e.gateway.http_stack import TenantHttp, http_gateway_stack, wait_http
from tests.e2e.gateway.sasl_wire import login
from tests.gateway_stack import OPERATOR, Credentials, GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

POLICY_VIOLATION = 44
CONSUMER_INSTANCE_NOT_FOUND = 40403
DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    root = tmp_path_factory.mktemp("adversarial-limits")
    # Instances live a minute unused: none may be closed by expiry instead of by what is tested.
    with http_gateway_stack(root, {"consumer.instance.timeout.ms": "60000"}) as stack:
        wait_http(stack)
        with stack.store() as store:
            b = GatewayStack.add_tenant(store, "acme", name="other")
            stack.credentials["acme-b"] = b
            _allow(store, stack.credentials["acme"].service_account, "*", "ALL", "literal")
            _allow(store, b.service_account, "b-", "ALL", "prefixed", resources=("GROUP",))
            _allow(store, b.service_account, "*", "DESCRIBE", "literal", resources=("TOPIC",))
            for name in ("app", "other"):  # cora: only #12's connections count against it
                creds = GatewayStack.add_tenant(store, "cora", name=name)
                stack.credentials["cora" if name == "app" else "cora-b"] = creds
                _allow(store, creds.service_account, "*", "ALL", "literal", tenant="cora")
        yield stack


def _allow(
    store: Any,
    account: str,
    name: str,
    operation: str,
    pattern: str,
    resources: tuple[str, ...] = ("TOPIC", "GROUP", "CLUSTER"),
    tenant: str = "acme",
) -> None:
    for resource in resources:
        store.create_acl(
            tenant,
            resource_type=resource,
            pattern_type=pattern,
            resource_name="kafka-cluster" if resource == "CLUSTER" else name,
            operation=operation,
            permission="allow",
            principal=f"User:{account}",
            actor=OPERATOR,
        )


@pytest.fixture(autouse=True)
def _logs(stack: GatewayStack, request: pytest.FixtureRequest) -> Iterator[None]:
    assert stack.gateway is not None
    remember_log(request.node, "gateway", stack.gateway.log_path)
    yield
    for tenant in ("acme", "cora"):
        set_limits(stack, tenant, max_partitions=DEFAULT_LIMITS.max_partitions, max_connections=100)


def set_limits(stack: GatewayStack, tenant: str = "acme", **limits: int) -> None:
    with stack.store() as store:
        current = store.get_tenant(tenant).limits
        store.update_tenant(tenant, limits=dataclasses.replace(current, **limits), actor=OPERATOR)


def logged_in(stack: GatewayStack, creds: Credentials) -> TenantHttp:
    """A client of `creds` once its first call is answered (a login the gateway refused while a
    change to the key's tenant was being applied is retried, as a client would)."""
    made: list[TenantHttp] = []

    def attempt() -> bool:
        try:
            made.append(TenantHttp(stack, creds))
        except AssertionError:
            return False
        return True

    wait_until(attempt, what=f"a login of {creds.key_id}", timeout=DEADLINE_S, interval=0.2)
    return made[-1]


def as_a(stack: GatewayStack) -> TenantHttp:
    return logged_in(stack, stack.credentials["acme"])


def as_b(stack: GatewayStack) -> TenantHttp:
    return logged_in(stack, stack.credentials["acme-b"])


def _a_acls_in_force(a: TenantHttp, b: TenantHttp) -> None:
    """B's calls are refused once the ACLs reached the gateway (open until then)."""
    wait_until(
        lambda: b.post("/consumers/a-group", {"format": "binary"}).status_code == 403,
        what="acme's ACLs in force at the gateway",
        timeout=DEADLINE_S,
    )


# -- #10: another service account's consumer instance ---------------------------------------------
INSTANCE_CALLS: list[tuple[str, str, Any]] = [
    ("post", "/subscription", {"topics": ["t10"]}),
    ("get", "/subscription", None),
    ("delete", "/subscription", None),
    ("post", "/assignments", {"partitions": [{"topic": "t10", "partition": 0}]}),
    ("get", "/assignments", None),
    ("post", "/offsets", {"offsets": [{"topic": "t10", "partition": 0, "offset": 0}]}),
    ("get", "/offsets", {"partitions": [{"topic": "t10", "partition": 0}]}),
    ("post", "/positions", {"offsets": [{"topic": "t10", "partition": 0, "offset": 0}]}),
    ("post", "/positions/beginning", {"partitions": [{"topic": "t10", "partition": 0}]}),
    ("post", "/positions/end", {"partitions": [{"topic": "t10", "partition": 0}]}),
    ("get", "/records?timeout=0", None),
    ("delete", "", None),
]


def _call(client: TenantHttp, method: str, path: str, body: Any) -> requests.Response:
    send: Callable[..., requests.Response] = getattr(client.session, method)
    headers = {"Accept": "application/vnd.kafka.binary.v2+json"}
    return send(client.base + path, json=body, headers=headers, timeout=30)


def test_attack_10_another_service_accounts_consumer_instance_is_not_found(
    stack: GatewayStack,
) -> None:
    a, b = as_a(stack), as_b(stack)
    _a_acls_in_force(a, b)
    a.create_topic("t10", 1)
    instance = a.consumer("a-group", format="binary", name="a-instance")
    for method, suffix, body in INSTANCE_CALLS:
        answer = _call(b, method, instance + suffix, body)
        assert answer.status_code == 404, (method, suffix, answer.status_code, answer.text)
        problem = answer.json()
        assert problem["error_code"] == CONSUMER_INSTANCE_NOT_FOUND, problem
        assert stack.credentials["acme"].service_account not in answer.text
    # A's instance is untouched and still A's: B's assign and delete did nothing.
    assigned = _call(a, "post", instance + "/assignments", INSTANCE_CALLS[3][2])
    assert assigned.status_code == 204, assigned.text
    shown = _call(a, "get", instance + "/assignments", None)
    assert shown.json() == {"partitions": [{"topic": "t10", "partition": 0}]}
    assert _call(a, "delete", instance, None).status_code == 204
    # B may use the same instance name in a group of its own: it is B's, not A's.
    own = b.consumer("b-group", format="binary", name="a-instance")
    assert _call(b, "delete", own, None).status_code == 204


# -- #11: concurrent creations against max_partitions ---------------------------------------------
RACERS = 10  # per path: 10 Kafka CreateTopics and 10 HTTP v3 topic creations at once


def _race(stack: GatewayStack, prefix: str) -> tuple[list[Any], list[requests.Response]]:
    """20 one-partition creations released together; the Kafka and the HTTP outcomes."""
    admins = []
    for _ in range(RACERS):  # connected and logged in, one after the other, before the race
        admins.append(AdminClient(stack.client_config("acme")))
        admins[-1].list_topics(timeout=30)
    https = [as_a(stack) for _ in range(RACERS)]
    start = threading.Barrier(2 * RACERS)
    kafka: list[Any] = [None] * RACERS
    http: list[Any] = [None] * RACERS

    def by_kafka(i: int) -> None:
        name = f"{prefix}-k{i}"
        start.wait()
        future = admins[i].create_topics([NewTopic(name, num_partitions=1)])[name]
        try:
            kafka[i] = future.result(30)
        except KafkaException as exc:
            kafka[i] = exc.args[0]

    def by_http(i: int) -> None:
        client = https[i]
        body = {"topic_name": f"{prefix}-h{i}", "partitions_count": 1, "replication_factor": 1}
        start.wait()
        http[i] = client.post(client.cluster + "/topics", body)

    threads = [threading.Thread(target=by_kafka, args=(i,)) for i in range(RACERS)]
    threads += [threading.Thread(target=by_http, args=(i,)) for i in range(RACERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return kafka, http


def _partitions(stack: GatewayStack, prefix: str) -> int:
    topics = AdminClient(stack.client_config("acme")).list_topics(timeout=30).topics
    return sum(len(t.partitions) for name, t in topics.items() if name.startswith(prefix))


def test_attack_11_concurrent_creations_never_pass_max_partitions(stack: GatewayStack) -> None:
    in_use = _partitions(stack, "")
    set_limits(stack, max_partitions=in_use + 5)
    admin = AdminClient(stack.client_config("acme"))

    def limit_in_force() -> bool:  # validate_only: a probe sent before the limit creates nothing
        probe = admin.create_topics([NewTopic("probe11", 6)], validate_only=True)["probe11"]
        try:
            probe.result(30)
        except KafkaException as exc:
            return bool(exc.args[0].code() == POLICY_VIOLATION)
        return False

    wait_until(limit_in_force, what="the new partition limit", timeout=DEADLINE_S)
    kafka, http = _race(stack, "race")
    created = sum(r is None for r in kafka) + sum(r.status_code == 201 for r in http)
    for error in (r for r in kafka if r is not None):
        assert error.code() == POLICY_VIOLATION, error
        assert f"partition limit {in_use + 5}" in error.str(), error.str()
    for answer in (r for r in http if r.status_code != 201):
        assert answer.status_code == 400, answer.text
        problem = answer.json()  # the problem document: error_code and message
        assert problem["error_code"] == 40002 and "partition limit" in problem["message"], problem
    assert created == 5, (kafka, [r.text for r in http])
    wait_until(
        lambda: _partitions(stack, "race") == 5,
        what="the created topics in the metadata",
        timeout=DEADLINE_S,
    )


def test_attack_11_refused_and_deleted_partitions_are_given_back(stack: GatewayStack) -> None:
    a = as_a(stack)
    a.create_topic("kept11", 1)
    in_use = _partitions(stack, "")
    set_limits(stack, max_partitions=in_use + 1)
    body = {"topic_name": "kept11", "partitions_count": 1, "replication_factor": 1}
    # Until the limit reaches the gateway the existing name is refused by the broker anyway;
    # either way the reservation made for it must be given back, or the next creation fails.
    for _ in range(3):
        answer = a.post(a.cluster + "/topics", body)
        assert answer.status_code in (400, 409), answer.text
    a.create_topic("last11", 1)  # fits only if the refused reservations were released
    over = a.post(
        a.cluster + "/topics",
        {"topic_name": "over11", "partitions_count": 1, "replication_factor": 1},
    )
    assert over.status_code == 400 and "partition limit" in over.json()["message"], over.text
    assert a.delete(a.cluster + "/topics/last11").status_code == 204

    def recreated() -> bool:
        again = a.post(
            a.cluster + "/topics",
            {"topic_name": "again11", "partitions_count": 1, "replication_factor": 1},
        )
        return again.status_code == 201

    wait_until(recreated, what="the deleted topic's partition given back", timeout=DEADLINE_S)


# -- #12: HTTP consumer instances as connections ---------------------------------------------------
def _broker_connections(stack: GatewayStack) -> int:
    """Established TCP connections from the gateway process to the broker's port."""
    assert stack.gateway is not None and stack.broker is not None
    port = int(stack.broker.bootstrap.rsplit(":", 1)[1])
    pid = stack.gateway.pid
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().name
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == port and fields[3] == "01" and fields[9] in inodes:
                count += 1
    return count


def _wait_connections_limit(stack: GatewayStack, a: TenantHttp, limit: int) -> None:
    set_limits(stack, "cora", max_connections=limit)

    def exactly_the_limit() -> bool:
        """`limit` instances are made and the next is refused (the limit has reached the gateway
        and the tenant's earlier Kafka connections are closed)."""
        made = [a.post("/consumers/a-probe", {"format": "binary"}) for _ in range(limit + 1)]
        for answer in made:
            if answer.status_code == 200:
                base = answer.json()["base_uri"][len(a.base) :]
                assert a.delete(base).status_code == 204
        codes = [answer.status_code for answer in made]
        return codes == [200] * limit + [429]

    wait_until(exactly_the_limit, what="the new connection limit", timeout=DEADLINE_S)


def test_attack_12_consumer_instances_count_as_connections(stack: GatewayStack) -> None:
    a = logged_in(stack, stack.credentials["cora"])
    b = logged_in(stack, stack.credentials["cora-b"])
    a.create_topic("t12", 1)
    baseline = _broker_connections(stack)
    _wait_connections_limit(stack, a, 5)
    instances = []
    for i in range(5):
        instance = a.consumer("a-12", format="binary", name=f"i{i}")
        instances.append(instance)
        assert a.post(instance + "/subscription", {"topics": ["t12"]}).status_code == 204
    for instance in instances:  # each joined its group and fetched: its fleet connections open
        assert a.get(instance + "/records?timeout=200").status_code == 200
    refused = [a.post("/consumers/a-12", {"format": "binary"}) for _ in range(55)]
    refused.append(b.post("/consumers/b-12", {"format": "binary"}))  # same tenant, other account
    for answer in refused:
        assert answer.status_code == 429, answer.text
        assert answer.headers["Retry-After"] == "1"
        problem = answer.json()
        assert problem["error_code"] == 42901, problem
        assert "connection limit of 5" in problem["message"], problem
    # 5 instances of one tenant: one group connection each and one shared fetch connection.
    assert _broker_connections(stack) <= baseline + 5 + 1 + 1
    # A Kafka connection takes a slot of the same count: freed by one instance, then taken.
    assert a.delete(instances.pop()).status_code == 204
    session = login(stack, "cora")
    try:
        answer = a.post("/consumers/a-12", {"format": "binary"})
        assert answer.status_code == 429, answer.text
    finally:
        session.close()
    for instance in instances:
        assert a.delete(instance).status_code == 204
    wait_until(
        lambda: _broker_connections(stack) <= baseline + 1,
        what="the instances' fleet connections closed",
        timeout=DEADLINE_S,
        interval=0.2,
    )


def test_attack_12_a_revoked_key_closes_its_consumer_instances(stack: GatewayStack) -> None:
    with stack.store() as store:
        victim: Credentials = GatewayStack.add_tenant(store, "acme", name="short-lived")
        _allow(store, victim.service_account, "*", "ALL", "literal")
        token = str(store.create_operator("limits-ops", actor=OPERATOR))
    client = logged_in(stack, victim)
    wait_until(
        lambda: (
            client.post("/consumers/v-12", {"format": "binary", "name": "v"}).status_code == 200
        ),
        what="the new key's ACLs",
        timeout=DEADLINE_S,
    )
    listing = client.base + "/operator/v1/tenants/acme/http-consumers"

    def names() -> set[str]:
        answer = requests.get(listing, headers={"Authorization": f"Bearer {token}"}, timeout=10)
        assert answer.status_code == 200, answer.text
        return {item["instance_id"] for item in answer.json()["items"]}

    assert "v" in names()
    with stack.store() as store:
        store.revoke_api_key(victim.key_id, actor=OPERATOR)
    # Closed with its key (its connection slot freed), as the key's Kafka sessions are.
    wait_until(
        lambda: "v" not in names(),
        what="the revoked key's consumer instance closed",
        timeout=1.5,  # far within the stack's idle expiry, which must not be what closes it
        interval=0.1,
    )
