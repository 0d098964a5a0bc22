"""The one way tests wait for state: poll a check until it holds or a deadline passes.

`wait_until` (blocking) and `wait_until_async` (on an event loop) call `check` every `interval`
seconds until it returns a truthy value, and return that value. Exceptions are never swallowed
wholesale: only the exception types named in `retry_on` count as "not yet" (a broker still
starting refuses connections, say); any other exception fails the test at once. On timeout an
AssertionError names `what`, the last value seen and, chained, the last retried exception, so a
broken read never looks like a slow one. No timing is asserted: the deadline only bounds a hang.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 30.0
DEFAULT_INTERVAL_S = 0.05


def wait_until(
    check: Callable[[], T],
    *,
    what: str = "condition",
    timeout: float = DEFAULT_TIMEOUT_S,
    interval: float = DEFAULT_INTERVAL_S,
    retry_on: tuple[type[BaseException], ...] = (),
) -> T:
    """Poll `check` until it returns a truthy value; return it."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    error: BaseException | None = None
    while True:
        try:
            last = check()
            error = None
        except retry_on as exc:
            error = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise AssertionError(_timeout_message(what, timeout, last, error)) from error
        time.sleep(interval)


async def wait_until_async(
    check: Callable[[], Awaitable[T]],
    *,
    what: str = "condition",
    timeout: float = DEFAULT_TIMEOUT_S,
    interval: float = DEFAULT_INTERVAL_S,
    retry_on: tuple[type[BaseException], ...] = (),
) -> T:
    """The event-loop twin of `wait_until`: `check` is a coroutine function."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    error: BaseException | None = None
    while True:
        try:
            last = await check()
            error = None
        except retry_on as exc:
            error = exc
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            raise AssertionError(_timeout_message(what, timeout, last, error)) from error
        await asyncio.sleep(interval)


def _timeout_message(what: str, timeout: float, last: object, error: BaseException | None) -> str:
    seen = f"last error {error!r}" if error is not None else f"last value {last!r}"
    return f"{what} not reached within {timeout:.0f} s ({seen})"
