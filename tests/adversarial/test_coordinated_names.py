"""A tenant that names a new consumer group or transactional id with every request, each kept by a
coordinator for days (a group's offsets until `offsets.retention.minutes`, a transactional id
until `transactional.id.expiration.ms`, ~0.7 KB of memory each): Kafka bounds neither, so the
coordinators grew without bound.

Defended (`gateway/kafka/coordinated_names.py`, gateway settings `tenant.max.groups`,
`tenant.max.transactional.ids`): past the tenant's limit a request that would make one more is
refused (GROUP_AUTHORIZATION_FAILED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED) while the groups and
ids the tenant holds keep working, another tenant is not affected, and a deleted group frees its
place; over HTTP the refusal says it is the limit (the error code alone reads as an ACL refusal);
a tenant whose record (or plan) sets `max_transactional_ids` is held to its own number instead.
Real broker and `pier gateway` (limits of 3 groups and 2 ids), confluent-kafka, the HTTP API."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.e2e.gateway.http_stack import TenantHttp, http_gateway_stack, wait_http
from tests.gateway_stack import OPERATOR, GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
TOPIC = "orders"
TIMEOUT_S = 30.0
MAX_GROUPS, MAX_IDS = 3, 2


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    limits = {"tenant.max.groups": str(MAX_GROUPS), "tenant.max.transactional.ids": str(MAX_IDS)}
    with http_gateway_stack(Path(tmp_path_factory.mktemp("names")), limits) as s:
        for tenant in ("acme", "bolt"):
            admin = AdminClient(s.client_config(tenant))
            for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
                future.result(TIMEOUT_S)
        yield s


def commit(stack: GatewayStack, tenant: str, group: str) -> int:
    """The error code of committing offset 0 for `group` (0: committed)."""
    consumer = Consumer({**stack.client_config(tenant), "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, 0)], asynchronous=False)
    except KafkaException as exc:
        return int(exc.args[0].code())
    finally:
        consumer.close()
    return 0


def init_transactions(stack: GatewayStack, tenant: str, transactional_id: str) -> int:
    producer = Producer({**stack.client_config(tenant), "transactional.id": transactional_id})
    try:
        producer.init_transactions(TIMEOUT_S)
    except KafkaException as exc:
        return int(exc.args[0].code())
    return 0


def test_groups_past_the_limit_are_refused_and_a_deleted_one_frees_its_place(
    stack: GatewayStack,
) -> None:
    for i in range(MAX_GROUPS):
        assert commit(stack, "acme", f"g{i}") == 0
    assert commit(stack, "acme", "g-extra") == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert commit(stack, "acme", "g0") == 0, "a group the tenant holds still works"
    assert commit(stack, "bolt", "g-extra") == 0, "another tenant is not affected"
    admin = AdminClient(stack.client_config("acme"))
    for future in admin.delete_consumer_groups(["g1"]).values():
        future.result(TIMEOUT_S)
    assert commit(stack, "acme", "g-extra") == 0


def test_transactional_ids_past_the_limit_are_refused(stack: GatewayStack) -> None:
    for i in range(MAX_IDS):
        assert init_transactions(stack, "acme", f"tx{i}") == 0
    refused = KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert init_transactions(stack, "acme", "tx-extra") == refused
    assert init_transactions(stack, "acme", "tx0") == 0, "an id the tenant holds still works"
    assert init_transactions(stack, "bolt", "tx-extra") == 0


def test_over_http_a_group_past_the_limit_is_refused_saying_why(stack: GatewayStack) -> None:
    for i in range(MAX_GROUPS + 1):  # bolt at its limit, whatever the other tests left it
        if commit(stack, "bolt", f"h{i}") == KafkaError.GROUP_AUTHORIZATION_FAILED:
            break
    else:
        pytest.fail("bolt was never refused a group")
    wait_http(stack)
    http = TenantHttp(stack, stack.credentials["bolt"])
    instance = http.consumer("h-http", format="json")
    offsets = {"offsets": [{"topic": TOPIC, "partition": 0, "offset": 0}]}
    answer = http.post(f"{instance}/offsets", offsets)
    assert answer.status_code == 403, answer.text
    assert f"as many consumer groups as it may ({MAX_GROUPS})" in answer.json()["message"]


def set_own_limit(stack: GatewayStack, tenant: str, max_transactional_ids: int | None) -> None:
    with stack.store() as store:
        limits = store.get_tenant(tenant).limits
        own = dataclasses.replace(limits, max_transactional_ids=max_transactional_ids)
        store.update_tenant(tenant, limits=own, actor=OPERATOR)


def test_a_tenant_s_own_limit_replaces_the_gateway_s(stack: GatewayStack) -> None:
    """bolt's record allows 4 transactional ids where the gateway allows 2: the change reaches
    the gateway through the tenant store's change feed, and bolt is held to 4."""
    held = [f"own{i}" for i in range(MAX_IDS)]
    for transactional_id in held:  # bolt at the gateway's limit, whatever other tests left
        init_transactions(stack, "bolt", transactional_id)
    refused = KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert init_transactions(stack, "bolt", "own-extra") == refused
    set_own_limit(stack, "bolt", 4)
    try:
        wait_until(
            lambda: init_transactions(stack, "bolt", "own-extra") == 0,
            what="bolt's own limit in force",
            timeout=TIMEOUT_S,
        )
        extra = [init_transactions(stack, "bolt", f"own-more{i}") for i in range(3)]
        assert extra.count(refused) >= 1, "bolt is held to its own limit too"
        assert init_transactions(stack, "bolt", "own-extra") == 0, "an id it holds still works"
    finally:
        set_own_limit(stack, "bolt", None)
