"""Every API other than Produce and Fetch: decode with kio, run the API's filter, forward or
answer, rewrite the broker's answer, encode.

Owns: building the `FilterContext` of a request, the controller-mutation budget for the APIs
that create or delete partitions (strict from the versions KIP-599 names), and charging request
time (`request_percentage`). APIs that wait in the broker (JoinGroup and SyncGroup rebalances)
are charged only the gateway's own work. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import time
from typing import Any

from brokers.client.messages import decode_response
from brokers.wire.messages import decode_request, encode_entity
from gateway.kafka.exchange import Exchange
from gateway.kafka.filter import Caller, FilterContext, Forward, MutationBudget
from gateway.kafka.filters import FILTERS
from gateway.kafka.request_session import RequestSession
from gateway.kafka.response_frames import body_offset, with_throttle

STRICT_MUTATIONS_FROM = {19: 6, 20: 5, 37: 3}  # CreateTopics, DeleteTopics, CreatePartitions
WAITS_IN_BROKER = frozenset({11, 14})  # JoinGroup, SyncGroup


class _NoBudget:
    def exceeded(self) -> bool:
        return False

    def record(self, partitions: int) -> None:
        return None


async def handle(
    session: RequestSession, exchange: Exchange, frame: memoryview, offset: int
) -> None:
    assert session.tenant is not None and session.principal is not None
    assert exchange.subject is not None
    module = FILTERS[exchange.api_key]
    request = decode_request(exchange.api_key, exchange.version, frame, offset)
    now = session.services.clock_ms()
    budget: MutationBudget = _NoBudget()
    strict_from = STRICT_MUTATIONS_FROM.get(exchange.api_key)
    if strict_from is not None:
        strict = exchange.version >= strict_from
        budget = session.services.throttling.mutations(exchange.subject, strict, now)
    ctx = FilterContext(
        api_key=exchange.api_key,
        api_version=exchange.version,
        caller=Caller(session.principal, session.peer_host, exchange.subject.client_id),
        namespace=session.tenant.namespace,
        access=session.tenant.access,
        limits=session.tenant.tenant.limits,
        fleet=session.services.fleet,
        mutations=budget,
        partitions=session.services.partitions,
    )
    outcome = await module.handle(ctx, request)
    mutation_throttle = 0
    if strict_from is not None:
        mutation_throttle = session.services.throttling.mutation_throttle_ms(
            exchange.subject, session.services.clock_ms()
        )
    session.meter(None, requests=1)
    if not isinstance(outcome, Forward):
        _finish(session, exchange, outcome.response, mutation_throttle, work_ms=_since(exchange))
        return
    body = encode_entity(outcome.request)
    handled_at = time.perf_counter()

    def on_response(answer: memoryview | None) -> None:
        if answer is None:
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
        _finish(session, exchange, rewritten, mutation_throttle, work_ms=work_ms)

    session.forward(exchange, [body], len(body), on_response)


def _since(exchange: Exchange) -> float:
    return (time.perf_counter() - exchange.started) * 1000


def _finish(
    session: RequestSession, exchange: Exchange, response: Any, throttle: int, *, work_ms: float
) -> None:
    assert exchange.subject is not None
    time_throttle = session.services.throttling.request_time(
        exchange.subject, work_ms, session.services.clock_ms()
    )
    total = max(throttle, time_throttle)
    encoded = encode_entity(with_throttle(response, total))
    session.finish(exchange, exchange.framed([encoded], len(encoded)), total)
