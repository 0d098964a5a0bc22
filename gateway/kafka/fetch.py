"""Fetch (key 1, v4–12) through the gateway: the hot path out.

Owns: the request's checks and rewrite (kio: Fetch requests are small) and the answer's rewrite
on raw bytes (`gateway.kafka.raw.fetch_response`: topic names stripped, topics that are not the
tenant's dropped, record batches passed on as the broker's bytes). A replica fetch (replica id
≠ −1) or a request naming a cluster id is refused: only consumers come through the gateway.
Every decision is the session's `TenantPolicy`'s (the policy stage, `gateway.policy`): topics the
caller may not READ get TOPIC_AUTHORIZATION_FAILED (that rare answer is merged through kio);
`max_bytes` is capped by the consumer byte-rate quota's window (Kafka's
`getMaxValueInQuotaWindow`) and then by the tenant's byte budget (`queued.max.request.bytes`): the
answer's bytes are held from it until the answer has gone to the client, so a tenant's fetches
cannot grow the gateway past its budget (64 KiB when none is free); the answer's record bytes are charged to that quota, and a throttled
fetch goes out with no records and its bytes taken back, as Kafka does. Metering counts each
topic's record bytes delivered. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from brokers.client.messages import decode_response
from brokers.wire.entities import make, response_module
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import decode_request, encode_entity
from gateway.kafka.exchange import Exchange
from gateway.kafka.raw.fetch_response import rewrite_fetch_response
from gateway.kafka.request_session import RequestSession
from gateway.kafka.response_frames import body_offset, with_throttle

API_KEY = 1
CONSUMER_REPLICA_ID = -1
UNHELD_ANSWER_BYTES = 64 * 1024  # a fetch's max_bytes while the tenant's budget has nothing free


def handle(session: RequestSession, exchange: Exchange, frame: memoryview, offset: int) -> None:
    policy = session.policy
    assert session.tenant is not None and exchange.subject is not None and policy is not None
    request = decode_request(API_KEY, exchange.version, frame, offset)
    if request.replica_id != CONSUMER_REPLICA_ID or getattr(request, "cluster_id", None):
        session.refuse("fetch with a replica id or cluster id")
        return
    namespace = session.tenant.namespace
    denied = {t.topic for t in request.topics if not policy.allowed("READ", "TOPIC", t.topic)}
    # The answer is held in the gateway on its way: its bytes come from the tenant's budget, and
    # `max_bytes` is cut to what was held (a floor when none is free; the broker's first batch
    # is always whole, KIP-74).
    wanted = policy.fetch_max_bytes(exchange.subject, request.max_bytes)
    held = session.hold_answer_bytes(wanted)
    changes: dict[str, Any] = {
        "max_bytes": held.size if held is not None else min(wanted, UNHELD_ANSWER_BYTES),
        "topics": tuple(
            dataclasses.replace(t, topic=namespace.fleet(t.topic))
            for t in request.topics
            if t.topic not in denied
        ),
    }
    if hasattr(request, "forgotten_topics_data"):  # v7+ (fetch sessions)
        changes["forgotten_topics_data"] = tuple(
            dataclasses.replace(t, topic=namespace.fleet(t.topic))
            for t in request.forgotten_topics_data
        )
    rewritten = dataclasses.replace(request, **changes)
    topics = {t.topic for t in request.topics}
    policy.meter(topics.pop() if len(topics) == 1 else None, requests=1)
    body = encode_entity(rewritten)
    handled_at = time.perf_counter()

    subject = exchange.subject

    def on_response(answer: memoryview | None) -> None:
        try:
            answered(answer)
        finally:
            if held is not None:
                session.release_answer_bytes(held)

    def answered(answer: memoryview | None) -> None:
        if answer is None:
            return
        started = time.perf_counter()
        start = body_offset(exchange, answer)
        if denied:
            parts, size, per_topic, throttle = _merged(
                session, exchange, request, answer, start, denied
            )
        else:
            parts, size, per_topic, throttle = _raw(session, exchange, answer, start)
        for topic, count in per_topic.items():
            policy.meter(topic, bytes_out=count)
            session.metrics.bytes_out(namespace.tenant_id, count)
        # A fetch parks in the broker's purgatory: only the gateway's own work is request time.
        work_ms = ((handled_at - exchange.started) + (time.perf_counter() - started)) * 1000
        time_throttle = policy.charge_request_time(subject, work_ms)
        total = max(throttle, time_throttle)
        session.finish(exchange, exchange.framed(parts, size), total)

    session.forward(exchange, [body], len(body), on_response)


def _raw(
    session: RequestSession, exchange: Exchange, answer: memoryview, start: int
) -> tuple[list[Any], int, dict[str, int], int]:
    assert session.tenant is not None and exchange.subject is not None
    rename = session.tenant.namespace.local
    body = answer[start:]
    rewrite = rewrite_fetch_response(
        body, exchange.version, rename=rename, drop_records=False, throttle_time_ms=0
    )
    delivered = sum(rewrite.bytes_per_topic.values())
    assert session.policy is not None
    throttle = session.policy.charge_fetch(exchange.subject, delivered)
    if throttle <= 0:
        return list(rewrite.parts), rewrite.size, rewrite.bytes_per_topic, 0
    empty = rewrite_fetch_response(
        body, exchange.version, rename=rename, drop_records=True, throttle_time_ms=throttle
    )
    return list(empty.parts), empty.size, {}, throttle


def _merged(
    session: RequestSession,
    exchange: Exchange,
    request: Any,
    answer: memoryview,
    start: int,
    denied: set[str],
) -> tuple[list[Any], int, dict[str, int], int]:
    """The rare answer with refused topics: decoded, renamed, refusals added, re-encoded."""
    assert session.tenant is not None and exchange.subject is not None
    namespace = session.tenant.namespace
    module = response_module(API_KEY, exchange.version)
    response = decode_response(API_KEY, exchange.version, answer, start)
    topics = []
    per_topic: dict[str, int] = {}
    for topic in response.responses:
        name = namespace.local(topic.topic)
        if name is None:
            continue
        per_topic[name] = sum(len(p.records or b"") for p in topic.partitions)
        topics.append(dataclasses.replace(topic, topic=name))
    for topic in request.topics:
        if topic.topic in denied:
            partitions = tuple(
                make(
                    module,
                    "PartitionData",
                    partition_index=p.partition,
                    error_code=ErrorCode.topic_authorization_failed,
                    high_watermark=-1,
                    last_stable_offset=-1,
                    log_start_offset=-1,
                    aborted_transactions=None,
                    preferred_read_replica=-1,
                    records=None,
                )
                for p in topic.partitions
            )
            topics.append(
                make(module, "FetchableTopicResponse", topic=topic.topic, partitions=partitions)
            )
    assert session.policy is not None
    throttle = session.policy.charge_fetch(exchange.subject, sum(per_topic.values()))
    if throttle > 0:
        per_topic = {}
        topics = [
            dataclasses.replace(
                t, partitions=tuple(dataclasses.replace(p, records=None) for p in t.partitions)
            )
            for t in topics
        ]
    encoded = encode_entity(
        with_throttle(dataclasses.replace(response, responses=tuple(topics)), throttle)
    )
    return [encoded], len(encoded), per_topic, throttle
