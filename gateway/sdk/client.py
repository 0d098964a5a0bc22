"""The synchronous SDK client: the tenant HTTP API from plain Python, standard library only.

Owns: `PierClient` (topics, configs, produce, consumer groups' lag) and `Consumer` (a v2
consumer instance: subscribe or assign, poll, commit, close). One keep-alive HTTP(S) connection
per client, reopened when the server closed it; 429 and 503 answers are retried up to
`max_retries` times after their `Retry-After`. Not thread-safe: one client per thread.

Example::

    from gateway.sdk import PierClient

    with PierClient("http://localhost:8082", "KEYID", "SECRET") as pier:
        pier.create_topic("orders", partitions=3)
        pier.produce("orders", {"id": 1}, key="customer-7")
        with pier.consumer("billing", format="json") as consumer:
            consumer.subscribe(["orders"])
            for record in consumer.poll(timeout_ms=2000):
                print(record.partition, record.offset, record.value)
            consumer.commit()
"""

from __future__ import annotations

import base64
import http.client
import json
import time
from typing import Any
from urllib.parse import quote, urlsplit

from gateway.sdk._core import (
    RETRY_STATUSES,
    V2_JSON,
    ConsumedRecord,
    ProducedRecord,
    consumed,
    error_of,
    offsets_body,
    partitions_body,
    produce_body,
    produced,
    retry_delay_s,
)

USER_AGENT = "pier-sdk-python/0.1"


class PierClient:
    def __init__(
        self,
        endpoint: str,
        key: str,
        secret: str,
        *,
        client_id: str | None = None,
        timeout_s: float = 30.0,
        max_retries: int = 3,
    ) -> None:
        parts = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"endpoint {endpoint!r} is not an http(s) URL")
        self._scheme = parts.scheme
        self._host = parts.hostname
        self._port = parts.port or (443 if parts.scheme == "https" else 80)
        self.endpoint = f"{parts.scheme}://{parts.netloc}"
        token = base64.b64encode(f"{key}:{secret}".encode()).decode()
        self._headers = {"Authorization": f"Basic {token}", "User-Agent": USER_AGENT}
        if client_id:
            self._headers["X-Client-Id"] = client_id
        self._timeout_s = timeout_s
        self.max_retries = max_retries
        self._connection: http.client.HTTPConnection | None = None
        self._cluster_id: str | None = None

    # -- plumbing --------------------------------------------------------------------------------
    def __enter__(self) -> PierClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _connect(self) -> http.client.HTTPConnection:
        if self._connection is None:
            kind = (
                http.client.HTTPSConnection
                if self._scheme == "https"
                else http.client.HTTPConnection
            )
            self._connection = kind(self._host, self._port, timeout=self._timeout_s)
        return self._connection

    def _once(
        self, method: str, path: str, body: bytes | None, headers: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        for fresh in (False, True):
            connection = self._connect()
            try:
                connection.request(method, path, body=body, headers=headers)
                response = connection.getresponse()
                return response.status, dict(response.getheaders()), response.read()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.close()  # the server closed a kept-alive connection: reopen once
                if fresh:
                    raise
        raise AssertionError("unreachable")

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        accept: str | None = None,
    ) -> Any:
        """Send one request (retrying 429/503); the decoded JSON answer, or None for 204."""
        headers = dict(self._headers)
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        if accept:
            headers["Accept"] = accept
        attempt = 0
        while True:
            status, answer_headers, payload = self._once(method, path, data, headers)
            if status in RETRY_STATUSES and attempt < self.max_retries:
                attempt += 1
                time.sleep(retry_delay_s(answer_headers.get("Retry-After"), attempt))
                continue
            if status >= 400:
                raise error_of(status, payload)
            return json.loads(payload) if payload else None

    # -- v3 --------------------------------------------------------------------------------------
    @property
    def cluster_id(self) -> str:
        if self._cluster_id is None:
            self._cluster_id = str(self.request("GET", "/v3/clusters")["data"][0]["cluster_id"])
        return self._cluster_id

    def _topics(self, topic: str | None = None) -> str:
        base = f"/v3/clusters/{self.cluster_id}/topics"
        return base if topic is None else f"{base}/{quote(topic, safe='')}"

    def list_topics(self) -> list[str]:
        return [t["topic_name"] for t in self.request("GET", self._topics())["data"]]

    def create_topic(
        self,
        name: str,
        *,
        partitions: int = 1,
        replication_factor: int | None = None,
        configs: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"topic_name": name, "partitions_count": partitions}
        if replication_factor is not None:
            body["replication_factor"] = replication_factor
        if configs:
            body["configs"] = [{"name": k, "value": v} for k, v in configs.items()]
        answer: dict[str, Any] = self.request("POST", self._topics(), body)
        return answer

    def delete_topic(self, name: str) -> None:
        self.request("DELETE", self._topics(name))

    def topic_configs(self, name: str) -> dict[str, str | None]:
        return {
            c["name"]: c["value"]
            for c in self.request("GET", self._topics(name) + "/configs")["data"]
        }

    def alter_topic_configs(self, name: str, configs: dict[str, str | None]) -> None:
        """Set each config; a None value resets it to its default."""
        data = [
            {"name": k, "value": v, "operation": "SET"}
            if v is not None
            else {"name": k, "operation": "DELETE"}
            for k, v in configs.items()
        ]
        self.request("POST", self._topics(name) + "/configs:alter", {"data": data})

    def produce(
        self,
        topic: str,
        value: Any,
        *,
        key: Any = None,
        partition: int | None = None,
        headers: Any = None,
    ) -> ProducedRecord:
        """Produce one record: `bytes` go as BINARY, `str` as STRING, anything else as JSON."""
        answer = self.request(
            "POST", self._topics(topic) + "/records", produce_body(value, key, partition, headers)
        )
        return produced(answer)

    def lag(self, group: str) -> dict[tuple[str, int], int]:
        path = f"/v3/clusters/{self.cluster_id}/consumer-groups/{quote(group, safe='')}/lags"
        return {
            (lag["topic_name"], lag["partition_id"]): lag["lag"]
            for lag in self.request("GET", path)["data"]
        }

    # -- v2 consumers ----------------------------------------------------------------------------
    def consumer(
        self,
        group: str,
        *,
        format: str = "binary",
        auto_offset_reset: str = "earliest",
        name: str | None = None,
    ) -> Consumer:
        config: dict[str, Any] = {"format": format, "auto.offset.reset": auto_offset_reset}
        if name:
            config["name"] = name
        answer = self.request(
            "POST", f"/consumers/{quote(group, safe='')}", config, content_type=V2_JSON
        )
        path = str(answer["base_uri"]).split("/consumers/", 1)[1]
        return Consumer(self, "/consumers/" + path, format)


class Consumer:
    """A v2 consumer instance on the gateway that created it."""

    def __init__(self, client: PierClient, path: str, fmt: str) -> None:
        self._client = client
        self.path = path
        self.format = fmt
        self.closed = False

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def subscribe(self, topics: list[str]) -> None:
        self._client.request(
            "POST", self.path + "/subscription", {"topics": topics}, content_type=V2_JSON
        )

    def assign(self, partitions: list[tuple[str, int]]) -> None:
        self._client.request(
            "POST", self.path + "/assignments", partitions_body(partitions), content_type=V2_JSON
        )

    def seek(self, offsets: dict[tuple[str, int], int]) -> None:
        self._client.request(
            "POST", self.path + "/positions", offsets_body(offsets), content_type=V2_JSON
        )

    def poll(self, *, timeout_ms: int = 1000, max_bytes: int | None = None) -> list[ConsumedRecord]:
        query = f"?timeout={timeout_ms}" + (f"&max_bytes={max_bytes}" if max_bytes else "")
        accept = f"application/vnd.kafka.{self.format}.v2+json"
        records = self._client.request("GET", self.path + "/records" + query, accept=accept)
        return [consumed(r, self.format) for r in records]

    def commit(self, offsets: dict[tuple[str, int], int] | None = None) -> None:
        """Commit the positions (None), or the given last-consumed offsets."""
        body = None if offsets is None else offsets_body(offsets)
        self._client.request("POST", self.path + "/offsets", body, content_type=V2_JSON)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._client.request("DELETE", self.path)
