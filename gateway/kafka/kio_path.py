"""Every API other than Produce and Fetch: decode with kio, run the API's filter, forward or
answer, rewrite the broker's answer, encode.

Owns: building the `FilterContext` of a request from the session's `TenantPolicy` (the policy stage:
the filters' ACL checks go through it, the controller-mutation budget for the APIs that create or
delete partitions, strict from the versions KIP-599 names, the pacing of config changes, usage
metering and charging request time, `request_percentage`). APIs that wait in the broker (JoinGroup
and SyncGroup rebalances) are charged only the gateway's own work. Runs on the event loop; not
thread-safe.
"""

from __future__ import annotations

import time
from typing import Any

from brokers.client.messages import decode_response
from brokers.wire.headers import scoped_header, untagged_header
from brokers.wire.messages import decode_request, encode_entity, is_flexible_request
from gateway.kafka.exchange import Exchange
from gateway.kafka.filter import FilterContext, Forward
from gateway.kafka.filters import FILTERS
from gateway.kafka.request_session import RequestSession
from gateway.kafka.response_frames import body_offset, with_throttle
from gateway.policy.requests import mutations_or_none

WAITS_IN_BROKER = frozenset({11, 14})  # JoinGroup, SyncGroup


async def handle(
    session: RequestSession, exchange: Exchange, frame: memoryview, offset: int
) -> None:
    policy = session.policy
    assert session.tenant is not None and policy is not None and exchange.subject is not None
    subject = exchange.subject
    module = FILTERS[exchange.api_key]
    request = decode_request(exchange.api_key, exchange.version, frame, offset)
    budget = policy.mutation_budget(subject, exchange.api_key, exchange.version)
    ctx = FilterContext(
        api_key=exchange.api_key,
        api_version=exchange.version,
        policy=policy,
        namespace=session.tenant.namespace,
        limits=session.tenant.tenant.limits,
        fleet=session.services.fleet,
        mutations=mutations_or_none(budget),
        partitions=session.services.partitions,
        names=session.services.names,
        members=session.services.members,
    )
    outcome = await module.handle(ctx, request)
    throttle = 0 if budget is None else policy.mutation_throttle(subject, exchange.api_key)
    session.throttled(throttle)  # muted from now: no request behind this one is taken meanwhile
    policy.meter(None, requests=1)
    if not isinstance(outcome, Forward):
        _finish(session, exchange, outcome.response, throttle, work_ms=_since(exchange))
        return
    body = encode_entity(outcome.request)
    if is_flexible_request(exchange.api_key, exchange.version):  # the client's tags stay here
        scope = outcome.name_scope
        header = exchange.header
        exchange.header = (
            untagged_header(header) if scope is None else memoryview(scoped_header(header, scope))
        )
    handled_at = time.perf_counter()

    def on_response(answer: memoryview | None) -> None:
        if answer is None:  # the upstream connection failed, or the client went away
            outcome.on_failure()
            return
        started = time.perf_counter()
        response = decode_response(
            exchange.api_key, exchange.version, answer, body_offset(exchange, answer)
        )
        rewritten = outcome.on_response(response)
        if exchange.api_key in WAITS_IN_BROKER:
            work_ms = ((handled_at - exchange.started) + (time.perf_counter() - started)) * 1000
        else:
            work_ms = _since(exchange)
        _finish(session, exchange, rewritten, throttle, work_ms=work_ms)

    session.forward(exchange, [body], len(body), on_response)


def _since(exchange: Exchange) -> float:
    return (time.perf_counter() - exchange.started) * 1000


def _finish(
    session: RequestSession, exchange: Exchange, response: Any, throttle: int, *, work_ms: float
) -> None:
    assert exchange.subject is not None and session.policy is not None
    time_throttle = session.policy.charge_request_time(exchange.subject, work_ms)
    total = max(throttle, time_throttle)
    encoded = encode_entity(with_throttle(response, total))
    session.finish(exchange, exchange.framed([encoded], len(encoded)), total)
