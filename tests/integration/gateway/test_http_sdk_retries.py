"""The SDK clients retry 429 and 503 after `Retry-After`, against a real local HTTP server that
refuses the first attempts (aiohttp, on a free port)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest
from aiohttp import web

from gateway.sdk import AsyncPierClient, PierApiError, PierClient

pytestmark = pytest.mark.integration


class Flaky:
    """Answers /v3/clusters with `refusals` 429/503 (Retry-After: 1) before a 200."""

    def __init__(self, refusals: list[int]) -> None:
        self.refusals = list(refusals)
        self.seen: list[float] = []
        self.auth: list[str] = []

    async def clusters(self, request: web.Request) -> web.Response:
        self.seen.append(time.monotonic())
        self.auth.append(request.headers.get("Authorization", ""))
        if self.refusals:
            status = self.refusals.pop(0)
            return web.json_response(
                {"error_code": status, "message": "slow down"},
                status=status,
                headers={"Retry-After": "1"},
            )
        return web.json_response({"data": [{"cluster_id": "c1"}]})


@pytest.fixture
def serve() -> Iterator[tuple[Flaky, list[str]]]:
    loop = asyncio.new_event_loop()
    urls: list[str] = []
    flaky = Flaky([])
    ready = threading.Event()
    runner_box: list[web.AppRunner] = []

    async def start() -> None:
        app = web.Application()
        app.router.add_get("/v3/clusters", flaky.clusters)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        urls.append(f"http://127.0.0.1:{port}")
        runner_box.append(runner)
        ready.set()

    thread = threading.Thread(target=lambda: (loop.run_until_complete(start()), loop.run_forever()))
    thread.start()
    assert ready.wait(10)
    yield flaky, urls
    asyncio.run_coroutine_threadsafe(runner_box[0].cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_sync_client_waits_retry_after_then_succeeds(serve: tuple[Flaky, list[str]]) -> None:
    flaky, urls = serve
    flaky.refusals = [429, 503]
    with PierClient(urls[0], "KEY", "SECRET") as client:
        assert client.cluster_id == "c1"
    gaps = [b - a for a, b in zip(flaky.seen, flaky.seen[1:], strict=False)]
    assert len(flaky.seen) == 3 and all(gap >= 0.95 for gap in gaps), f"gaps {gaps}"
    assert all(a.startswith("Basic ") for a in flaky.auth)


def test_sync_client_gives_up_after_max_retries(serve: tuple[Flaky, list[str]]) -> None:
    flaky, urls = serve
    flaky.refusals = [429, 429]
    with (
        PierClient(urls[0], "KEY", "SECRET", max_retries=1) as client,
        pytest.raises(PierApiError) as error,
    ):
        _ = client.cluster_id
    assert error.value.status == 429 and len(flaky.seen) == 2


def test_async_client_waits_retry_after_then_succeeds(serve: tuple[Flaky, list[str]]) -> None:
    flaky, urls = serve
    flaky.refusals = [503]

    async def run() -> str:
        async with AsyncPierClient(urls[0], "KEY", "SECRET") as client:
            return await client.cluster_id()

    assert asyncio.run(run()) == "c1"
    assert len(flaky.seen) == 2 and flaky.seen[1] - flaky.seen[0] >= 0.95
