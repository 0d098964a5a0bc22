"""A gateway stack with its tenant HTTP API on, and small HTTP helpers for the tests.

`http_gateway_stack(root, **settings)` is a `GatewayStack` whose gateway also serves the HTTP
API (`http.port` in its properties) with a short consumer-instance timeout; `TenantHttp` is a
thin `requests` session for one tenant (HTTP Basic with its API key) that knows the tenant's
cluster id. Blocking; used from pytest's main thread.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import requests

from infra.probes import free_port
from tests.gateway_stack import Credentials, GatewayStack
from tests.polling import wait_until

INSTANCE_TIMEOUT_MS = 3000


def http_gateway_stack(root: Path, settings: Mapping[str, str] | None = None) -> GatewayStack:
    port = free_port()
    stack = GatewayStack(
        root,
        gateway_settings={
            "http.port": str(port),
            "consumer.instance.timeout.ms": str(INSTANCE_TIMEOUT_MS),
            **(settings or {}),
        },
    )
    stack.http_url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
    return stack


def http_url(stack: GatewayStack) -> str:
    return str(stack.http_url)  # type: ignore[attr-defined]


def wait_http(stack: GatewayStack) -> None:
    wait_until(
        lambda: requests.get(http_url(stack) + "/openapi.json", timeout=2).status_code == 200,
        what="the gateway's HTTP API answers",
        timeout=20,
        retry_on=(requests.ConnectionError,),
    )


class TenantHttp:
    def __init__(
        self, stack: GatewayStack, creds: Credentials, user_agent: str = "pier-tests"
    ) -> None:
        self.base = http_url(stack)
        self.creds = creds
        self.session = requests.Session()
        self.session.auth = (creds.key_id, creds.secret)
        self.session.headers["User-Agent"] = user_agent
        clusters = self.get("/v3/clusters")
        assert clusters.status_code == 200, clusters.text
        self.cluster_id: str = clusters.json()["data"][0]["cluster_id"]

    @property
    def cluster(self) -> str:
        return f"/v3/clusters/{self.cluster_id}"

    def get(self, path: str, **kw: Any) -> requests.Response:
        return self.session.get(self.base + path, timeout=30, **kw)

    def post(self, path: str, body: Any = None, **kw: Any) -> requests.Response:
        return self.session.post(self.base + path, json=body, timeout=30, **kw)

    def delete(self, path: str, **kw: Any) -> requests.Response:
        return self.session.delete(self.base + path, timeout=30, **kw)

    def create_topic(self, name: str, partitions: int = 1) -> None:
        answer = self.post(
            self.cluster + "/topics",
            {"topic_name": name, "partitions_count": partitions, "replication_factor": 1},
        )
        assert answer.status_code == 201, answer.text

    def produce(self, topic: str, record: dict[str, Any]) -> requests.Response:
        return self.post(f"{self.cluster}/topics/{topic}/records", record)

    def consumer(self, group: str, **config: str) -> str:
        answer = self.post(f"/consumers/{group}", config)
        assert answer.status_code == 200, answer.text
        return str(answer.json()["base_uri"])[len(self.base) :]

    def poll(self, instance: str, fmt: str, timeout_ms: int = 1000) -> list[dict[str, Any]]:
        answer = self.get(
            f"{instance}/records?timeout={timeout_ms}",
            headers={"Accept": f"application/vnd.kafka.{fmt}.v2+json"},
        )
        assert answer.status_code == 200, answer.text
        records: list[dict[str, Any]] = answer.json()
        return records
