"""The operator's view of HTTP consumer instances (issue 15): with an admin-API operator token,
the gateway lists a tenant's instances and deletes one, which then leaves its group; a tenant's
API key gets nothing there.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.e2e.gateway.http_stack import TenantHttp, http_gateway_stack, http_url, wait_http
from tests.gateway_stack import OPERATOR, GatewayStack
from tests.polling import wait_until
from tests.unit.tenancy_api.harness import ServedApi

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with http_gateway_stack(Path(tmp_path_factory.mktemp("http-operator"))) as running:
        wait_http(running)
        yield running


def test_an_operator_lists_and_deletes_a_tenants_consumer_instances(stack: GatewayStack) -> None:
    with stack.store() as store:
        token = str(store.create_operator("http-ops", actor=OPERATOR))
    acme = TenantHttp(stack, stack.credentials["acme"])
    bolt = TenantHttp(stack, stack.credentials["bolt"])
    acme.create_topic("watched", 1)
    first = acme.consumer("watchers", name="one", format="json")
    assert acme.post(first + "/subscription", {"topics": ["watched"]}).status_code == 204
    wait_until(
        lambda: (
            acme.poll(first, "json", 300) == []
            and acme.get(first + "/assignments").json()["partitions"]
        ),
        what="instance one is assigned",
        timeout=30,
    )
    # Created only now: an instance left idle for the stack's short timeout would expire.
    acme.consumer("watchers", name="two")
    bolt.consumer("watchers", name="bolts-own")
    base = http_url(stack) + "/operator/v1/tenants/acme/http-consumers"
    operator = {"Authorization": f"Bearer {token}"}
    listed = requests.get(base, headers=operator, timeout=10)
    assert listed.status_code == 200, listed.text
    items = listed.json()["items"]
    assert [(i["group"], i["instance_id"]) for i in items] == [
        ("watchers", "one"),
        ("watchers", "two"),
    ]
    assert items[0]["subscription"] == ["watched"] and items[0]["format"] == "json"
    assert items[0]["assignment"] == [{"topic": "watched", "partition": 0}]
    assert items[0]["principal"] == stack.credentials["acme"].service_account
    consumers = acme.cluster + "/consumer-groups/watchers/consumers"
    assert len(acme.get(consumers).json()["data"]) == 1
    assert requests.delete(base + "/watchers/one", headers=operator, timeout=10).status_code == 204
    assert acme.get(first + "/subscription").status_code == 404
    wait_until(
        lambda: acme.get(consumers).json()["data"] == [],
        what="instance one left its group",
        timeout=15,
    )
    assert requests.delete(base + "/watchers/one", headers=operator, timeout=10).status_code == 404
    # A tenant's API key, or no token, gets nothing from the operator view.
    creds = stack.credentials["acme"]
    assert requests.get(base, auth=(creds.key_id, creds.secret), timeout=10).status_code == 401
    assert (
        requests.get(base, headers={"Authorization": "Bearer pier_op_nope"}, timeout=10).status_code
        == 401
    )
    left = requests.get(base, headers=operator, timeout=10).json()["items"]
    assert [i["instance_id"] for i in left] == ["two"]


def test_the_admin_api_lists_and_deletes_across_gateways(stack: GatewayStack) -> None:
    with stack.store() as store:
        token = str(store.create_operator("http-admin", actor=OPERATOR))
    acme = TenantHttp(stack, stack.credentials["acme"])
    instance = acme.consumer("admin-view", name="via-admin")
    dead_gateway = "http://127.0.0.1:9"  # nothing listens: reported as unreachable
    store = stack.store()
    api = ServedApi(store, token=token, gateway_http=(http_url(stack), dead_gateway)).start()
    try:
        listed = api.get("/v1/tenants/acme/http-consumers")
        assert listed.status == 200, listed.body
        mine = [i for i in listed.json["items"] if i["group"] == "admin-view"]
        assert [(i["gateway"], i["instance_id"]) for i in mine] == [(http_url(stack), "via-admin")]
        assert listed.json["unreachable"] == [dead_gateway]
        assert api.delete("/v1/tenants/acme/http-consumers/admin-view/via-admin").status == 204
        assert acme.get(instance + "/subscription").status_code == 404
        assert api.delete("/v1/tenants/acme/http-consumers/admin-view/via-admin").status == 404
    finally:
        api.stop()
        store.close()
