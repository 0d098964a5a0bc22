"""Serving the admin API in-process for tests: a loop thread, a loopback port, a blocking client.

`ServedApi(store)` runs `create_app(store)` with the production access logger on 127.0.0.1 (a free
port) in its own event-loop thread, so tests stay synchronous and other synchronous clients
(Schemathesis, the CLI in a subprocess) can call the same server. `stop()` shuts the runner down
and joins the thread. Used by the unit tests (with the fake store) and the integration tests
(with the real store on SQLite and PostgreSQL).
"""

from __future__ import annotations

import asyncio
import io
import json
import threading
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
from aiohttp import web

from tenancy.api import create_app
from tenancy.api.metrics import PathAccessLogger

T = TypeVar("T")


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def content_type(self) -> str:
        return self.headers.get("Content-Type", "").split(";")[0]


class ServedApi:
    def __init__(self, store: Any, *, token: str | None = None, **app_options: Any) -> None:
        self.store = store
        self.token = token
        self.app = create_app(store, **app_options)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="admin-api-test")
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.port = 0

    def start(self) -> ServedApi:
        self._thread.start()
        self._call(self._start())
        return self

    async def _start(self) -> None:
        self._runner = web.AppRunner(self.app, access_log_class=PathAccessLogger)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self._session = aiohttp.ClientSession()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout=60)

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        data: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        token: str | None = "default",
        chunked: bool = False,
    ) -> Reply:
        sent = dict(headers or {})
        bearer = self.token if token == "default" else token
        if bearer is not None:
            sent.setdefault("Authorization", f"Bearer {bearer}")
        if json_body is not None:
            data = json.dumps(json_body).encode()
            sent.setdefault("Content-Type", "application/json")
        return self._call(self._request(method, path, data, sent, chunked))

    async def _request(
        self, method: str, path: str, data: bytes | None, headers: dict[str, str], chunked: bool
    ) -> Reply:
        assert self._session is not None
        payload = io.BytesIO(data) if data is not None else None
        async with self._session.request(
            method, self.url + path, data=payload, headers=headers, chunked=chunked or None
        ) as response:
            return Reply(response.status, dict(response.headers), await response.read())

    def get(self, path: str, **kwargs: Any) -> Reply:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> Reply:
        return self.request("POST", path, json_body=body, **kwargs)

    def put(self, path: str, body: Any = None, **kwargs: Any) -> Reply:
        return self.request("PUT", path, json_body=body, **kwargs)

    def patch(self, path: str, body: Any = None, **kwargs: Any) -> Reply:
        return self.request("PATCH", path, json_body=body, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> Reply:
        return self.request("DELETE", path, **kwargs)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._call(self._stop())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=30)
        self._loop.close()

    async def _stop(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()
