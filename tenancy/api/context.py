"""What every admin API handler shares: the store, the thread pool it runs in, the clock.

Owns: `StoreRunner`, the bounded thread pool that runs the synchronous `TenantStore` calls so the
event loop never blocks on the database or on a slow hash, and `ApiContext`, stored once in the
aiohttp application under `CONTEXT`. The runner may be called from the event loop only; the store
methods it runs execute on its worker threads (the store is thread-safe: one session per call).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, ParamSpec, TypeVar

from aiohttp import web

if TYPE_CHECKING:
    from tenancy.store import TenantStore

P = ParamSpec("P")
T = TypeVar("T")
Clock = Callable[[], datetime]
OPERATOR = web.RequestKey("pier.operator", str)


def utcnow() -> datetime:
    return datetime.now(UTC)


class StoreRunner:
    """Runs blocking store calls on at most `max_workers` threads."""

    def __init__(self, max_workers: int) -> None:
        self._executor = ThreadPoolExecutor(max_workers, thread_name_prefix="pier-admin-store")

    async def __call__(self, call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(call, *args, **kwargs))

    def close(self) -> None:
        self._executor.shutdown(wait=True, cancel_futures=True)


@dataclass(frozen=True, slots=True)
class ApiContext:
    store: TenantStore
    run: StoreRunner
    clock: Clock
    gateway_http: tuple[str, ...] = ()  # gateways' HTTP API base URLs (operator view)


CONTEXT = web.AppKey("pier.admin.context", ApiContext)


def context_of(request: web.Request) -> ApiContext:
    return request.app[CONTEXT]


def actor_of(request: web.Request) -> str:
    """The authenticated operator's name, recorded as the audit actor of every change."""
    return request[OPERATOR]
