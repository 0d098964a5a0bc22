"""Version negotiation against advertised ranges, and retry/backoff behaviour."""

from __future__ import annotations

import asyncio

import pytest

from brokers.client.config import ClientConfig
from brokers.client.errors import (
    BrokerConnectionError,
    BrokerResponseError,
    ClientConfigError,
    UnknownTopicError,
    UnsupportedVersionError,
)
from brokers.client.retry import Backoff, retrying
from brokers.client.versions import CLIENT_VERSIONS, ApiKey, negotiate, version_for
from brokers.wire.errors import ErrorCode

pytestmark = pytest.mark.unit


def test_negotiation_picks_the_highest_common_version() -> None:
    chosen = negotiate([(0, 0, 11), (1, 4, 17), (3, 0, 9), (2, 1, 9)])
    assert chosen[ApiKey.PRODUCE] == 11
    assert chosen[ApiKey.FETCH] == CLIENT_VERSIONS[ApiKey.FETCH][1]  # broker newer than us
    assert chosen[ApiKey.METADATA] == 9  # broker older than us
    assert chosen[ApiKey.LIST_OFFSETS] == 9


def test_disjoint_or_missing_ranges_leave_the_api_out() -> None:
    chosen = negotiate([(0, 0, 2), (1, 13, 17), (9999, 0, 3)])
    assert chosen == {}
    with pytest.raises(UnsupportedVersionError, match="PRODUCE"):
        version_for(chosen, ApiKey.PRODUCE)
    with pytest.raises(UnsupportedVersionError, match="4242"):
        version_for(chosen, 4242)


def test_backoff_doubles_up_to_the_maximum() -> None:
    backoff = Backoff(0.1, 0.5)
    assert [backoff.delay(i) for i in range(5)] == [0.1, 0.2, 0.4, 0.5, 0.5]


async def _run_retrying(errors: list[Exception], retries: int) -> tuple[str, list[float], int]:
    slept: list[float] = []
    calls = 0

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def operation() -> str:
        nonlocal calls
        calls += 1
        if errors:
            raise errors.pop(0)
        return "done"

    result = await retrying(operation, retries=retries, backoff=Backoff(0.1, 1.0), sleep=sleep)
    return result, slept, calls


def test_retriable_errors_are_retried_with_backoff() -> None:
    errors: list[Exception] = [
        BrokerConnectionError("lost"),
        BrokerResponseError(ErrorCode.not_coordinator, "group g"),
    ]
    result, slept, calls = asyncio.run(_run_retrying(errors, retries=3))
    assert (result, slept, calls) == ("done", [0.1, 0.2], 3)


def test_non_retriable_and_exhausted_errors_propagate() -> None:
    with pytest.raises(UnknownTopicError):
        asyncio.run(_run_retrying([UnknownTopicError("t")], retries=3))
    with pytest.raises(BrokerResponseError) as raised:
        asyncio.run(_run_retrying([BrokerResponseError(ErrorCode.group_id_not_found)], retries=3))
    assert raised.value.code == ErrorCode.group_id_not_found
    lost: list[Exception] = [BrokerConnectionError(str(i)) for i in range(3)]
    with pytest.raises(BrokerConnectionError, match="1"):
        asyncio.run(_run_retrying(lost, retries=1))


@pytest.mark.parametrize(
    "options",
    [
        {"request_timeout_s": 0},
        {"retries": -1},
        {"retry_backoff_s": 2.0},
        {"max_response_bytes": 4},
    ],
)
def test_bad_settings_are_refused_when_built(options: dict[str, float]) -> None:
    with pytest.raises(ClientConfigError):
        ClientConfig(**options)  # type: ignore[arg-type]
