"""The asyncio SDK client: the same operations as `PierClient`, over aiohttp.

Owns: `AsyncPierClient` and `AsyncConsumer`. One `aiohttp.ClientSession` per client (its
connection pool); 429 and 503 answers are retried up to `max_retries` times after their
`Retry-After`. Runs on one event loop; not thread-safe.

Example::

    from gateway.sdk import AsyncPierClient

    async with AsyncPierClient("http://localhost:8082", "KEYID", "SECRET") as pier:
        await pier.produce("orders", b"raw bytes", key=b"k1", headers={"trace": b"abc"})
        async with await pier.consumer("billing") as consumer:
            await consumer.subscribe(["orders"])
            records = await consumer.poll(timeout_ms=2000)
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import quote

import aiohttp

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
from gateway.sdk.client import USER_AGENT


class AsyncPierClient:
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
        self.endpoint = (endpoint if "://" in endpoint else f"http://{endpoint}").rstrip("/")
        self._auth = aiohttp.BasicAuth(key, secret)
        self._headers = {"User-Agent": USER_AGENT}
        if client_id:
            self._headers["X-Client-Id"] = client_id
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)
        self.max_retries = max_retries
        self._session: aiohttp.ClientSession | None = None
        self._cluster_id: str | None = None

    async def __aenter__(self) -> AsyncPierClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                auth=self._auth, headers=self._headers, timeout=self._timeout
            )
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        accept: str | None = None,
    ) -> Any:
        headers: dict[str, str] = {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        if accept:
            headers["Accept"] = accept
        attempt = 0
        while True:
            async with self._http().request(
                method, self.endpoint + path, data=data, headers=headers
            ) as response:
                payload = await response.read()
                status, retry_after = response.status, response.headers.get("Retry-After")
            if status in RETRY_STATUSES and attempt < self.max_retries:
                attempt += 1
                await asyncio.sleep(retry_delay_s(retry_after, attempt))
                continue
            if status >= 400:
                raise error_of(status, payload)
            return json.loads(payload) if payload else None

    async def cluster_id(self) -> str:
        if self._cluster_id is None:
            answer = await self.request("GET", "/v3/clusters")
            self._cluster_id = str(answer["data"][0]["cluster_id"])
        return self._cluster_id

    async def _topics(self, topic: str | None = None) -> str:
        base = f"/v3/clusters/{await self.cluster_id()}/topics"
        return base if topic is None else f"{base}/{quote(topic, safe='')}"

    async def list_topics(self) -> list[str]:
        return [t["topic_name"] for t in (await self.request("GET", await self._topics()))["data"]]

    async def create_topic(
        self, name: str, *, partitions: int = 1, configs: dict[str, str] | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"topic_name": name, "partitions_count": partitions}
        if configs:
            body["configs"] = [{"name": k, "value": v} for k, v in configs.items()]
        answer: dict[str, Any] = await self.request("POST", await self._topics(), body)
        return answer

    async def delete_topic(self, name: str) -> None:
        await self.request("DELETE", await self._topics(name))

    async def produce(
        self,
        topic: str,
        value: Any,
        *,
        key: Any = None,
        partition: int | None = None,
        headers: Any = None,
    ) -> ProducedRecord:
        path = await self._topics(topic) + "/records"
        return produced(
            await self.request("POST", path, produce_body(value, key, partition, headers))
        )

    async def consumer(
        self,
        group: str,
        *,
        format: str = "binary",
        auto_offset_reset: str = "earliest",
        name: str | None = None,
    ) -> AsyncConsumer:
        config: dict[str, Any] = {"format": format, "auto.offset.reset": auto_offset_reset}
        if name:
            config["name"] = name
        answer = await self.request(
            "POST", f"/consumers/{quote(group, safe='')}", config, content_type=V2_JSON
        )
        path = str(answer["base_uri"]).split("/consumers/", 1)[1]
        return AsyncConsumer(self, "/consumers/" + path, format)


class AsyncConsumer:
    def __init__(self, client: AsyncPierClient, path: str, fmt: str) -> None:
        self._client = client
        self.path = path
        self.format = fmt
        self.closed = False

    async def __aenter__(self) -> AsyncConsumer:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def subscribe(self, topics: list[str]) -> None:
        await self._client.request(
            "POST", self.path + "/subscription", {"topics": topics}, content_type=V2_JSON
        )

    async def assign(self, partitions: list[tuple[str, int]]) -> None:
        await self._client.request(
            "POST", self.path + "/assignments", partitions_body(partitions), content_type=V2_JSON
        )

    async def poll(
        self, *, timeout_ms: int = 1000, max_bytes: int | None = None
    ) -> list[ConsumedRecord]:
        query = f"?timeout={timeout_ms}" + (f"&max_bytes={max_bytes}" if max_bytes else "")
        accept = f"application/vnd.kafka.{self.format}.v2+json"
        records = await self._client.request("GET", self.path + "/records" + query, accept=accept)
        return [consumed(r, self.format) for r in records]

    async def commit(self, offsets: dict[tuple[str, int], int] | None = None) -> None:
        body = None if offsets is None else offsets_body(offsets)
        await self._client.request("POST", self.path + "/offsets", body, content_type=V2_JSON)

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self._client.request("DELETE", self.path)
