"""The tenant HTTP API keeps the Kafka path's rules (issue 15, acceptance): two tenants with the
same topic and group names never see each other; a wrong key gets 401; a key without WRITE gets
403; an idle consumer instance expires and its group membership ends; usage records for HTTP
traffic equal the bytes sent and received (the client id being the User-Agent).
"""

from __future__ import annotations

import base64
import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tenancy.usage import TrafficRecord
from tests.e2e.gateway.broker_log import usage_records
from tests.e2e.gateway.http_stack import (
    INSTANCE_TIMEOUT_MS,
    TenantHttp,
    http_gateway_stack,
    http_url,
    wait_http,
)
from tests.gateway_stack import OPERATOR, GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with http_gateway_stack(Path(tmp_path_factory.mktemp("http-tenancy"))) as running:
        wait_http(running)
        yield running


def string(text: str) -> dict[str, str]:
    return {"type": "STRING", "data": text}


def test_two_tenants_with_the_same_names_never_see_each_other(stack: GatewayStack) -> None:
    acme = TenantHttp(stack, stack.credentials["acme"])
    bolt = TenantHttp(stack, stack.credentials["bolt"])
    assert acme.cluster_id != bolt.cluster_id
    for tenant in (acme, bolt):
        tenant.create_topic("orders", 1)
    acme.create_topic("acme-only", 1)
    for i in range(3):
        assert acme.produce("orders", {"value": string(f"acme-{i}")}).status_code == 200
        assert bolt.produce("orders", {"value": string(f"bolt-{i}")}).status_code == 200

    def names(tenant: TenantHttp) -> set[str]:
        return {t["topic_name"] for t in tenant.get(tenant.cluster + "/topics").json()["data"]}

    assert "acme-only" in names(acme) and "acme-only" not in names(bolt)
    assert all(not n.startswith(("acme_", "bolt_", "_")) for n in names(acme) | names(bolt))
    assert bolt.get(bolt.cluster + "/topics/acme-only").status_code == 404
    assert bolt.produce("acme-only", {"value": string("x")}).status_code == 404
    # Each tenant's cluster id is its own: the other's is not found.
    assert bolt.get(acme.cluster + "/topics").status_code == 404
    for tenant, mine in ((acme, "acme"), (bolt, "bolt")):
        instance = tenant.consumer("readers", format="string", **{"auto.offset.reset": "earliest"})
        assert tenant.post(instance + "/subscription", {"topics": ["orders"]}).status_code == 204
        got: list[str] = []

        def more(
            tenant: TenantHttp = tenant, instance: str = instance, got: list[str] = got
        ) -> bool:
            got.extend(r["value"] for r in tenant.poll(instance, "string", 1000))
            return len(got) >= 3

        wait_until(more, what=f"{mine} reads its records", timeout=30)
        assert sorted(got) == [f"{mine}-{i}" for i in range(3)]
        tenant.delete(instance)
    # The same group name, two groups: neither tenant sees the other's members or offsets.
    for tenant in (acme, bolt):
        groups = tenant.get(tenant.cluster + "/consumer-groups").json()["data"]
        assert [g["consumer_group_id"] for g in groups] == ["readers"]
    # An instance of one tenant is not found by the other, even under the same group.
    instance = acme.consumer("readers", name="acme-instance")
    assert bolt.get(instance + "/subscription").status_code == 404
    assert bolt.delete(instance).status_code == 404
    assert acme.delete(instance).status_code == 204


@pytest.mark.parametrize(
    "auth",
    ["wrong-secret", "unknown-key", "missing", "not-basic", "not-base64"],
)
def test_a_wrong_key_gets_401(stack: GatewayStack, auth: str) -> None:
    creds = stack.credentials["acme"]
    headers: dict[str, str] = {}
    if auth == "wrong-secret":
        headers["Authorization"] = (
            "Basic " + base64.b64encode(f"{creds.key_id}:nope".encode()).decode()
        )
    elif auth == "unknown-key":
        headers["Authorization"] = (
            "Basic " + base64.b64encode(f"AAAAAAAAAAAAAAAA:{creds.secret}".encode()).decode()
        )
    elif auth == "not-basic":
        headers["Authorization"] = f"Bearer {creds.secret}"
    elif auth == "not-base64":
        headers["Authorization"] = "Basic %%%"
    answer = requests.get(http_url(stack) + "/v3/clusters", headers=headers, timeout=10)
    assert answer.status_code == 401, answer.text
    assert answer.json()["error_code"] == 401
    assert answer.headers["WWW-Authenticate"].startswith("Basic")
    assert creds.secret not in answer.text


def test_a_key_without_write_acl_gets_403(stack: GatewayStack) -> None:
    with stack.store() as store:
        writer = GatewayStack.add_tenant(store, "cora", name="writer")
        reader = GatewayStack.add_tenant(store, "cora", name="reader")
        for account, operation in (
            (writer.service_account, "ALL"),
            (reader.service_account, "READ"),
        ):
            for resource in ("TOPIC", "GROUP"):
                store.create_acl(
                    "cora",
                    resource_type=resource,
                    pattern_type="literal",
                    resource_name="*",
                    operation=operation,
                    permission="allow",
                    principal=f"User:{account}",
                    actor=OPERATOR,
                )
    as_writer = TenantHttp(stack, writer)
    as_reader = TenantHttp(stack, reader)
    # ACLs reach the gateway through the store's change feed; until they have, "cora" has no ACL
    # and is open to its accounts. Wait until the reader's WRITE is refused on a topic that does
    # not exist (404 while open, 403 once the ACLs are in force; nothing is written either way).
    wait_until(
        lambda: as_reader.produce("absent", {"value": string("x")}).status_code == 403,
        what="the reader's ACLs in force at the gateway",
        timeout=30,
    )
    as_writer.create_topic("guarded", 1)
    assert as_writer.produce("guarded", {"value": string("by-writer")}).status_code == 200
    refused = as_reader.produce("guarded", {"value": string("by-reader")})
    assert refused.status_code == 403, refused.text
    assert refused.json()["error_code"] == 40301
    assert "cora_" not in refused.text
    instance = as_reader.consumer(
        "guarded-readers", format="string", **{"auto.offset.reset": "earliest"}
    )
    assert as_reader.post(instance + "/subscription", {"topics": ["guarded"]}).status_code == 204
    got: list[str] = []

    def more() -> bool:
        got.extend(r["value"] for r in as_reader.poll(instance, "string", 1000))
        return bool(got)

    wait_until(more, what="the reader reads what the writer wrote", timeout=30)
    assert got == ["by-writer"]
    denied = as_reader.delete(as_reader.cluster + "/topics/guarded")
    assert denied.status_code == 403, denied.text
    as_reader.delete(instance)


def test_an_idle_consumer_instance_expires_and_leaves_its_group(stack: GatewayStack) -> None:
    acme = TenantHttp(stack, stack.credentials["acme"])
    acme.create_topic("idle-topic", 2)
    instance = acme.consumer("idle-group")
    assert acme.post(instance + "/subscription", {"topics": ["idle-topic"]}).status_code == 204

    def assigned() -> bool:
        acme.poll(instance, "binary", 500)
        answer = acme.get(instance + "/assignments").json()
        return len(answer["partitions"]) == 2

    wait_until(assigned, what="the instance is assigned both partitions", timeout=30)
    consumers = acme.cluster + "/consumer-groups/idle-group/consumers"
    assert len(acme.get(consumers).json()["data"]) == 1
    # Left alone (the v3 group view does not touch the instance), it expires and leaves.
    wait_until(
        lambda: acme.get(consumers).json()["data"] == [],
        what=f"the idle instance leaves its group (timeout {INSTANCE_TIMEOUT_MS} ms)",
        timeout=INSTANCE_TIMEOUT_MS / 1000 + 15,
    )
    gone = acme.get(instance + "/subscription")
    assert gone.status_code == 404 and gone.json()["error_code"] == 40403


def test_usage_records_equal_the_http_bytes_sent_and_received(stack: GatewayStack) -> None:
    creds = stack.credentials["bolt"]
    agent = "usage-probe/1.0"
    bolt = TenantHttp(stack, creds, user_agent=agent)
    bolt.create_topic("metered", 1)
    url = f"{bolt.base}{bolt.cluster}/topics/metered/records"
    sent = 0
    for i in range(5):
        body = json.dumps({"key": string(f"k{i}"), "value": string("v" * (10 + i * 7))}).encode()
        answer = bolt.session.post(
            url, data=body, headers={"Content-Type": "application/json"}, timeout=10
        )
        assert answer.status_code == 200, answer.text
        sent += len(body)
    stream = b"".join(json.dumps({"value": string(f"s{i}")}).encode() + b"\n" for i in range(4))
    streamed = bolt.session.post(
        url, data=iter([stream]), headers={"Content-Type": "application/json"}, timeout=10
    )
    assert streamed.status_code == 200 and streamed.text.count('"error_code":200') == 4
    sent += len(stream)
    instance = bolt.consumer("metered-readers", **{"auto.offset.reset": "earliest"})
    bolt.post(instance + "/assignments", {"partitions": [{"topic": "metered", "partition": 0}]})
    received = 0
    count = 0

    def read_all() -> bool:
        nonlocal received, count
        answer = bolt.get(
            instance + "/records?timeout=500",
            headers={"Accept": "application/vnd.kafka.binary.v2+json"},
        )
        assert answer.status_code == 200
        received += len(answer.content)
        count += len(answer.json())
        return count >= 9

    wait_until(read_all, what="the HTTP consumer reads 9 records", timeout=30)
    bolt.delete(instance)
    assert stack.broker is not None

    def metered() -> tuple[int, int]:
        sums: dict[str, int] = defaultdict(int)
        for record in usage_records(stack.broker.bootstrap).values():  # type: ignore[union-attr]
            if (
                isinstance(record, TrafficRecord)
                and record.tenant == "bolt"
                and record.client_id == agent
            ):
                assert record.principal == creds.service_account
                sums["in"] += record.bytes_in
                sums["out"] += record.bytes_out
        return sums["in"], sums["out"]

    wait_until(
        lambda: metered() == (sent, received),
        what=f"usage shows {sent} bytes in and {received} out for {agent}",
        timeout=30,
    )
