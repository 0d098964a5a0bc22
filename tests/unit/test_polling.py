"""The shared polling helper: returns the first truthy value, retries only what it is told to,
and names what it waited for on timeout."""

from __future__ import annotations

import asyncio

import pytest

from tests.polling import wait_until, wait_until_async

pytestmark = pytest.mark.unit


def test_returns_first_truthy_value() -> None:
    values: list[int | None] = [0, None, 0, 7]
    feed = iter(values)
    assert wait_until(lambda: next(feed), interval=0) == 7


def test_unlisted_exception_fails_at_once() -> None:
    calls = []

    def broken() -> int:
        calls.append(1)
        raise KeyError("broken read")

    with pytest.raises(KeyError):
        wait_until(broken, timeout=5, interval=0)
    assert len(calls) == 1


def test_listed_exception_is_retried_then_reported() -> None:
    def refused() -> int:
        raise ConnectionRefusedError("not up")

    with pytest.raises(AssertionError, match="broker up not reached") as info:
        wait_until(refused, what="broker up", timeout=0.05, interval=0.01, retry_on=(OSError,))
    assert isinstance(info.value.__cause__, ConnectionRefusedError)


def test_timeout_names_last_value() -> None:
    with pytest.raises(AssertionError, match=r"last value \[\]"):
        wait_until(lambda: [], what="rows", timeout=0.02, interval=0.01)


def test_async_twin() -> None:
    seen: list[str | bool] = [False, False, "done"]
    feed = iter(seen)

    async def check() -> str | bool:
        return next(feed)

    assert asyncio.run(wait_until_async(check, interval=0)) == "done"
