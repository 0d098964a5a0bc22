"""Retrying an operation on retriable errors, with exponential backoff.

Owns: `Backoff` (KIP-580: retry.backoff.ms doubling per attempt up to retry.backoff.max.ms; no
jitter, so tests see exact delays) and `retrying`. The sleep function is injected so tests record
the delays instead of waiting. Runs on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from brokers.client.errors import ClientError

T = TypeVar("T")
Sleep = Callable[[float], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Backoff:
    initial_s: float
    maximum_s: float

    def delay(self, attempt: int) -> float:
        """The wait before retry number `attempt` (0 for the first retry)."""
        return float(min(self.initial_s * 2.0**attempt, self.maximum_s))


async def retrying(
    operation: Callable[[], Awaitable[T]],
    *,
    retries: int,
    backoff: Backoff,
    sleep: Sleep = asyncio.sleep,
    on_retriable: Callable[[ClientError], None] | None = None,
) -> T:
    """Run `operation`; on a retriable ClientError, call `on_retriable` (to drop stale metadata
    or connections), wait, and try again — at most `retries` more times. Non-retriable errors
    and the last retriable one propagate."""
    attempt = 0
    while True:
        try:
            return await operation()
        except ClientError as error:
            if not error.retriable or attempt >= retries:
                raise
            if on_retriable is not None:
                on_retriable(error)
            await sleep(backoff.delay(attempt))
            attempt += 1
