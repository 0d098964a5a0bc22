"""An HTTP v2 consumer instance closed (a DELETE, its expiry, its key revoked) while a request
that looked it up waits for its lock: the request is answered 404 and does nothing to the
instance (a subscribe there started a group member nothing would stop, holding no connection
slot: repeated, it got round the tenant's connection limit)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any, cast

import pytest

from gateway.http.consumers import ConsumerInstance
from gateway.http.errors import CONSUMER_INSTANCE_NOT_FOUND, ApiError

pytestmark = pytest.mark.unit


class FakeCluster:
    closed = 0

    async def close(self) -> None:
        self.closed += 1


def instance() -> ConsumerInstance:
    return ConsumerInstance(
        tenant="acme",
        group="g",
        name="i1",
        format="binary",
        auto_offset_reset="latest",
        auto_commit=False,
        caller=cast(Any, SimpleNamespace()),
        group_cluster=cast(Any, FakeCluster()),
        fetch_cluster=cast(Any, FakeCluster()),
    )


def test_a_request_waiting_while_the_instance_closes_is_404_and_changes_nothing() -> None:
    async def scenario() -> None:
        consumer = instance()
        done: list[str] = []

        async def request() -> None:
            async with consumer.using():
                done.append("ran")

        async with consumer.lock:  # the close holds the lock, as the registry's `_close` does
            waiting = asyncio.create_task(request())
            await asyncio.sleep(0)  # the request waits for the lock
            await consumer.close()
        with pytest.raises(ApiError) as refused:
            await waiting
        assert refused.value.status == 404
        assert refused.value.error_code == CONSUMER_INSTANCE_NOT_FOUND
        assert done == [] and consumer.member is None

    asyncio.run(scenario())


def test_an_open_instance_serves_its_requests_one_at_a_time() -> None:
    async def scenario() -> None:
        consumer = instance()
        async with consumer.using():
            assert consumer.lock.locked()
        assert not consumer.lock.locked()

    asyncio.run(scenario())
