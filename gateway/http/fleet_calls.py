"""Kafka requests made for an HTTP caller, through the Kafka path's own filters.

Owns: `kafka_call` — build nothing itself: the route hands a kio request in the tenant's names;
the API's filter from `gateway.kafka.filters` (the same module a Kafka client's request goes
through: namespace prefixing, ACLs, tenant limits, the controller-mutation budget, answer
rewriting and scrubbing) decides, with the caller's `TenantPolicy` (identity, mutation budget,
metering) as on the Kafka path, and a forwarded request is sent to the broker that serves it
(`Route`: any broker, the controller, or a group's coordinator) over the gateway's fleet client.
A coordinator that moved or is loading is retried (`Cluster.call`), as Kafka clients do. An
HTTP client cannot be muted, so its mutation budgets are strict (the KIP-599 quota and the
tenant's pacings refuse as soon as they are spent): the request that spends one is answered at
once (its throttle metered, not slept: one topic far past the burst held its answer for the
whole debt, 80 s for 10,000 partitions at the default pacing), and a request refused for it is
`429` with `Retry-After` the seconds until the tenant may change metadata again. Every call
counts one request in the tenant's usage. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Callable
from typing import Any

from brokers.client import BrokerConnection, Cluster
from brokers.client.errors import BrokerResponseError, ClientError
from brokers.wire.errors import ErrorCode
from gateway.http.context import Caller
from gateway.http.errors import ApiError
from gateway.kafka.filter import FilterContext, Forward
from gateway.kafka.filters import FILTERS
from gateway.kafka.fleet import COORDINATOR_MOVED
from gateway.policy.requests import mutations_or_none

Route = Callable[[Cluster], Awaitable[BrokerConnection]]


def any_broker(cluster: Cluster) -> Awaitable[BrokerConnection]:
    return cluster.any_connection()


def controller(cluster: Cluster) -> Awaitable[BrokerConnection]:
    return cluster.controller()


def coordinator(fleet_group: str) -> Route:
    def route(cluster: Cluster) -> Awaitable[BrokerConnection]:
        return cluster.coordinator(fleet_group)

    return route


def _top_error(answer: Any) -> int:
    return int(getattr(answer, "error_code", 0) or 0)


async def kafka_call(
    caller: Caller,
    api_key: int,
    version: int,
    request: Any,
    route: Route,
    *,
    cluster: Cluster | None = None,
    timeout_s: float | None = None,
) -> Any:
    """The tenant's answer to `request` (tenant names), as a Kafka client would get it."""
    services = caller.services.session
    policy = caller.policy
    subject = caller.subject
    budget = policy.mutation_budget(subject, api_key, version, strict=True)
    state = caller.state
    ctx = FilterContext(
        api_key=api_key,
        api_version=version,
        policy=policy,
        namespace=state.namespace,
        limits=state.tenant.limits,
        fleet=services.fleet,
        mutations=mutations_or_none(budget),
        partitions=services.partitions,
        names=services.names,
        members=services.members,
    )
    outcome = await FILTERS[api_key].handle(ctx, request)
    caller.meter(None, requests=1)
    if isinstance(outcome, Forward):
        fleet = cluster or caller.services.cluster
        forwarded = outcome.request

        async def attempt() -> Any:
            connection = await route(fleet)
            answer = await connection.send(
                forwarded, timeout_s=timeout_s, name_scope=outcome.name_scope
            )
            code = _top_error(answer)
            if code in COORDINATOR_MOVED:
                raise BrokerResponseError(ErrorCode(code), "group coordinator")
            return answer

        try:
            answer = await fleet.call(attempt)
        except ClientError as exc:  # no answer will come: give back what the filter holds
            outcome.on_failure()
            raise ApiError(
                503, f"the fleet did not answer: {type(exc).__name__}", 50003, 1
            ) from None
        except BaseException:  # the request ended (the client went away: cancelled) first
            outcome.on_failure()
            raise
        response = outcome.on_response(answer)
    elif ctx.refusal_detail is not None:  # a limit, which a Kafka error code reads as an ACL
        raise ApiError(403, ctx.refusal_detail)
    else:
        response = outcome.response
    throttle = 0 if budget is None else policy.mutation_throttle(subject, api_key)
    if throttle > 0:
        caller.meter(None, throttle_ms=throttle)
    if budget is not None and _paced_out(response):
        raise ApiError(429, PACED_OUT, 429, retry_after_s=max(1, math.ceil(throttle / 1000)))
    return response


PACED_OUT = (
    "the tenant changes topics (partitions created, deleted or added, or configs) faster than "
    "it may: retry after the time in Retry-After"
)


def _paced_out(response: Any) -> bool:
    """Whether the answer refused a resource THROTTLING_QUOTA_EXCEEDED (its lists' entries)."""
    if not dataclasses.is_dataclass(response):
        return False
    for field in dataclasses.fields(response):
        entries = getattr(response, field.name)
        if isinstance(entries, tuple) and any(
            getattr(entry, "error_code", None) == ErrorCode.throttling_quota_exceeded
            for entry in entries
        ):
            return True
    return False
