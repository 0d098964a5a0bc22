"""An HTTP v2 consumer instance closed (a DELETE, its expiry, its key revoked) while a request
that looked it up waits for its lock: the request is answered 404 and does nothing to the
instance (a subscribe there started a group member nothing would stop, holding no connection
slot: repeated, it got round the tenant's connection limit)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest

from gateway.http.consumers import ConsumerInstance, ConsumerRegistry
from gateway.http.errors import CONSUMER_INSTANCE_NOT_FOUND, ApiError
from tenancy.domain import Principal
from tests.polling import wait_until_async

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


class SlowDirectory:
    """Admits once `admitted` is set; records the logins in between and what is released."""

    def __init__(self) -> None:
        self.in_between: dict[object, object] = {}
        self.admitted = asyncio.Event()
        self.released: list[object] = []

    @contextlib.contextmanager
    def admitting(self, session: object, principal: object) -> Iterator[None]:
        self.in_between[session] = principal
        try:
            yield
        finally:
            del self.in_between[session]

    async def admit(self, session: object, state: object) -> str | None:
        await self.admitted.wait()
        return None

    def release(self, session: object) -> None:
        self.released.append(session)


def test_an_instance_whose_key_is_revoked_while_it_is_admitted_is_not_made() -> None:
    """Its slot is given back and the request answered 401: made, it would keep a slot and a
    group membership on a revoked key until it expired."""

    async def scenario() -> None:
        directory = SlowDirectory()
        registry = ConsumerRegistry(lambda client_id: cast(Any, FakeCluster()), timeout_ms=60_000)
        caller = SimpleNamespace(
            tenant_id="acme",
            principal=Principal("acme", "sa-1", "key-1"),
            state=None,
            client_id="",
            services=SimpleNamespace(session=SimpleNamespace(directory=directory)),
        )
        creating = asyncio.create_task(registry.create(cast(Any, caller), "g", {"name": "i1"}))

        async def in_between() -> bool:
            return bool(directory.in_between)

        await wait_until_async(in_between, what="the login between check and admission")
        for login in list(directory.in_between):
            cast(Any, login).close("api key revoked")  # as the directory's revocation does
        directory.admitted.set()
        with pytest.raises(ApiError) as refused:
            await creating
        assert refused.value.status == 401 and "api key revoked" in refused.value.message
        assert len(directory.released) == 1
        with pytest.raises(ApiError):  # nothing was made
            registry.get(cast(Any, caller), "g", "i1")

    asyncio.run(scenario())
