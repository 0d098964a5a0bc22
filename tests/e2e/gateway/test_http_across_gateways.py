"""HTTP v2 consumer instances across gateways (issue 24 item 3; docs/gateway-http.md): two real
gateways on one ZooKeeper, tenant store and broker, the first with two workers.

An instance made on gateway A is polled and committed through gateway B (B finds it in
ZooKeeper and proxies to A); another service account of the tenant gets 404 through B; the same
name made through B is 409 (one live instance per name in the fleet); deleted through B, it is 404
on both. An instance on B is 404 through A once B has stopped.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import pytest
import requests
from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from infra.gateway import GatewayProcess, start_gateway
from infra.probes import free_port
from infra.stack import ZooKeeperProcess
from tests.e2e.gateway.http_stack import TenantHttp
from tests.gateway_stack import TEST_GATEWAY_SETTINGS, GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"


@dataclass
class Pair:
    stack: GatewayStack
    a: str  # gateway A's HTTP URL (two workers)
    b: str  # gateway B's
    b_process: GatewayProcess


@pytest.fixture(scope="module")
def chroot(zookeeper: ZooKeeperProcess) -> str:
    path = f"/pier-http-{uuid.uuid4().hex[:12]}"

    def session() -> KazooClient:
        client = KazooClient(hosts=zookeeper.connect)
        try:
            client.start(5)
        except KazooTimeoutError:
            client.close()
            raise
        return client

    root = wait_until(session, what="a ZooKeeper session", retry_on=(KazooTimeoutError,))
    root.ensure_path(path)
    root.stop()
    root.close()
    return f"{zookeeper.connect}{path}"


def answers(url: str) -> bool:
    return requests.get(url + "/openapi.json", timeout=2).status_code == 200


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, chroot: str) -> Iterator[Pair]:
    root = Path(tmp_path_factory.mktemp("http-across"))
    a_port, b_port = free_port(), free_port()
    common = {"zookeeper.connect": chroot, "consumer.instance.timeout.ms": "60000"}
    settings = {**common, "http.port": str(a_port), "workers": "2"}
    with GatewayStack(root, gateway_settings=settings) as stack:
        assert stack.broker is not None
        b = start_gateway(
            root / "b",
            stack.broker.bootstrap,
            stack.db_url,
            node_ids=[stack.broker.node_id],
            properties={**TEST_GATEWAY_SETTINGS, **common, "http.port": str(b_port)},
        )
        try:
            urls = f"http://127.0.0.1:{a_port}", f"http://127.0.0.1:{b_port}"
            # TenantHttp's base URL
            stack.http_url = urls[0]  # type: ignore[attr-defined]
            for url in urls:
                wait_until(
                    partial(answers, url),
                    what=f"{url} answers",
                    timeout=60,
                    retry_on=(requests.ConnectionError,),
                )
            yield Pair(stack, urls[0], urls[1], b)
        finally:
            b.stop()


def session(key_id: str, secret: str) -> requests.Session:
    http = requests.Session()
    http.auth = (key_id, secret)
    http.headers["Connection"] = "close"  # A's requests spread over its workers
    return http


def test_instance_made_on_one_gateway_answers_on_the_other(pair: Pair, topic_name: str) -> None:
    creds = pair.stack.credentials["acme"]
    acme = TenantHttp(pair.stack, creds)
    acme.create_topic(topic_name)
    for i in range(10):
        value = base64.b64encode(f"v{i}".encode()).decode()
        produced = acme.produce(topic_name, {"value": {"type": "BINARY", "data": value}})
        assert produced.status_code == 200, produced.text
    http = session(creds.key_id, creds.secret)
    group = f"{topic_name}-g"
    made = http.post(
        f"{pair.a}/consumers/{group}",
        json={"name": "across", "format": "binary", "auto.offset.reset": "earliest"},
        headers={"Content-Type": V2},
        timeout=30,
    )
    assert made.status_code == 200, made.text
    on_a = made.json()["base_uri"]
    on_b = pair.b + on_a[len(pair.a) :]
    subscribed = http.post(
        on_b + "/subscription", json={"topics": [topic_name]}, headers={"Content-Type": V2}
    )
    assert subscribed.status_code == 204, subscribed.text
    values: list[str] = []
    for _ in range(10):
        polled = http.get(on_b + "/records?timeout=500", headers={"Accept": BINARY}, timeout=30)
        assert polled.status_code == 200, polled.text
        values += [base64.b64decode(r["value"]).decode() for r in polled.json()]
        committed = http.post(on_b + "/offsets", headers={"Content-Type": V2}, timeout=30)
        assert committed.status_code == 204, committed.text
    assert values == [f"v{i}" for i in range(10)]
    offsets = http.get(
        on_a + "/offsets",
        json={"partitions": [{"topic": topic_name, "partition": 0}]},
        headers={"Content-Type": V2},
        timeout=30,
    )
    assert offsets.status_code == 200, offsets.text
    assert offsets.json()["offsets"][0]["offset"] == 10  # committed through B, read on A

    with pair.stack.store() as store:
        other = GatewayStack.add_tenant(store, "acme", name=f"other-{topic_name[-8:]}")
    intruder = session(other.key_id, other.secret)
    for url in (on_a, on_b):
        refused = intruder.get(url + "/subscription", timeout=30)
        assert refused.status_code == 404, refused.text

    twin = http.post(
        f"{pair.b}/consumers/{group}",
        json={"name": "across"},
        headers={"Content-Type": V2},
        timeout=30,
    )
    assert twin.status_code == 409, twin.text

    assert http.delete(on_b, timeout=30).status_code == 204
    for url in (on_a, on_b):
        assert http.get(url + "/subscription", timeout=30).status_code == 404


def test_instance_of_a_stopped_gateway_is_404(pair: Pair, topic_name: str) -> None:
    creds = pair.stack.credentials["acme"]
    http = session(creds.key_id, creds.secret)
    group = f"{topic_name}-g"
    made = http.post(
        f"{pair.b}/consumers/{group}", json={}, headers={"Content-Type": V2}, timeout=30
    )
    assert made.status_code == 200, made.text
    on_a = pair.a + made.json()["base_uri"][len(pair.b) :]
    assert http.get(on_a + "/subscription", timeout=30).status_code == 200
    assert pair.b_process.stop() == 0
    gone = http.get(on_a + "/subscription", timeout=30)
    assert gone.status_code == 404, gone.text
