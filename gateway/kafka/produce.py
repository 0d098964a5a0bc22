"""Produce (key 0, v3–13) through the gateway, on raw bytes: the hot path in.

Owns: the Kafka edge of the policy stage for a Produce, and the answer. The request is parsed into
a view of spans (`gateway.kafka.raw.produce_request`); the session's `TenantPolicy` decides which
topics may go upstream (`produce_refusals`, in Kafka's order: the transactional id's WRITE →
TRANSACTIONAL_ID_AUTHORIZATION_FAILED; per topic a legal name → INVALID_TOPIC_EXCEPTION and WRITE →
TOPIC_AUTHORIZATION_FAILED; then the request over the tenant's `max_request_bytes` →
MESSAGE_TOO_LARGE and the tenant over its storage cap → POLICY_VIOLATION). Topic names and the
transactional id are prefixed while the record batches go out as the very bytes the client sent;
refusals are merged into the broker's answer in request order (kio); an answer with no refusal,
error message or record error is renamed on its bytes (`gateway.kafka.raw.produce_response`). The request size is charged to the
producer byte-rate quota (as Kafka charges it); acks=0 is exempt from the request-time quota and
gets no answer (a throttle then only mutes; a refusal closes the connection, as Kafka does). Metering counts each forwarded topic's record-batch
bytes as sent. v13 names topics by id (KIP-516): each id is looked up in the fleet view without
waiting (`known_topic_name`) and stands for the tenant's topic only when that fleet topic is in
the tenant's namespace; any other id — another tenant's, or one nobody has — is answered
UNKNOWN_TOPIC_ID here and never forwarded (fail closed). The ids go upstream unchanged.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from brokers.client.messages import decode_response
from brokers.wire.entities import make, response_module
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import encode_entity
from brokers.wire.produce_request import ProduceRequestView, ProduceTopic, parse_produce_request
from gateway.kafka.exchange import Exchange
from gateway.kafka.raw.produce_request import build_produce_request
from gateway.kafka.raw.produce_response import rewrite_produce_response
from gateway.kafka.request_session import RequestSession
from gateway.kafka.response_frames import body_offset, with_throttle
from gateway.policy import Reason, Refusal

Refusals = dict[str, Refusal]  # tenant topic → why it was not forwarded

API_KEY = 0
TOPIC_ID_VERSION = 13
UNKNOWN_ID = Refusal(Reason.NOT_AUTHORIZED, ErrorCode.unknown_topic_id)


def handle(session: RequestSession, exchange: Exchange, body: memoryview) -> None:
    policy = session.policy
    assert session.tenant is not None and exchange.subject is not None and policy is not None
    view = parse_produce_request(body, exchange.version)
    namespace = session.tenant.namespace
    unknown: Refusals = {}
    if exchange.version >= TOPIC_ID_VERSION:
        view, unknown = _named_by_id(session, view)
    refusals = policy.produce_refusals(
        (topic.name for topic in view.topics if topic.name not in unknown),
        len(body),
        view.transactional_id,
    )
    refusals.update(unknown)
    forwarded = [topic for topic in view.topics if topic.name not in refusals]
    throttle = policy.charge_produce(exchange.subject, len(body))
    session.throttled(throttle)  # no request is taken behind a throttled one (Kafka's mute)
    for topic in forwarded:
        size = sum(len(p.records) for p in topic.partitions if p.records is not None)
        policy.meter(topic.name, bytes_in=size)
        session.metrics.bytes_in(namespace.tenant_id, size)
    policy.meter(_single_topic(t for t in view.topics if t.name not in unknown), requests=1)
    if view.acks == 0 and refusals:
        _refuse_unanswered(session, exchange, view, forwarded, refusals, throttle)
        return
    if not forwarded:
        session.finish(exchange, _local_answer(exchange, view, refusals, throttle), throttle)
        return
    parts = build_produce_request(
        view,
        topics=forwarded,
        rename=namespace.fleet,
        transactional_id=namespace.fleet_or_none(view.transactional_id),
    )
    size = sum(len(part) for part in parts)
    if view.acks == 0:
        session.forward(exchange, parts, size, None)
        session.finish(exchange, None, throttle)
        return

    subject = exchange.subject

    def on_response(frame: memoryview | None) -> None:
        if frame is None:
            return
        time_throttle = 0
        if view.acks == 1:  # acks=all waits on replication: broker time, not request work
            elapsed = (time.perf_counter() - exchange.started) * 1000
            time_throttle = policy.charge_request_time(subject, elapsed)
        total = max(throttle, time_throttle)
        start = body_offset(exchange, frame)
        raw = None
        if not refusals:  # the usual answer: renamed on its bytes
            rename: Callable[[str], str | None] = namespace.local
            if view.version >= TOPIC_ID_VERSION:
                rename = {t.topic_id.hex(): t.name for t in forwarded}.get
            raw = rewrite_produce_response(
                frame[start:], exchange.version, rename=rename, throttle_time_ms=total
            )
        if raw is not None:
            session.finish(exchange, exchange.framed(raw.parts, raw.size), total)
            return
        response = decode_response(API_KEY, exchange.version, frame, start)
        answer = _client_answer(session, exchange, view, response, refusals)
        encoded = encode_entity(with_throttle(answer, total))
        session.finish(exchange, exchange.framed([encoded], len(encoded)), total)

    session.forward(exchange, parts, size, on_response)


def _named_by_id(
    session: RequestSession, view: ProduceRequestView
) -> tuple[ProduceRequestView, Refusals]:
    """v13: each topic named as the tenant knows it, from its id; ids that are not the tenant's
    get a placeholder name no topic can have (ids are hex, and ':' is not legal in a name)
    and UNKNOWN_TOPIC_ID."""
    assert session.tenant is not None
    namespace = session.tenant.namespace
    fleet = session.services.fleet
    topics, unknown = [], {}
    for topic in view.topics:
        fleet_name = fleet.known_topic_name(uuid.UUID(bytes=topic.topic_id))
        name = None if fleet_name is None else namespace.local(fleet_name)
        if name is None:
            name = f"id:{topic.topic_id.hex()}"
            unknown[name] = UNKNOWN_ID
        topics.append(dataclasses.replace(topic, name=name))
    return dataclasses.replace(view, topics=topics), unknown


def _refuse_unanswered(
    session: RequestSession,
    exchange: Exchange,
    view: ProduceRequestView,
    forwarded: list[ProduceTopic],
    refusals: Refusals,
    throttle: int,
) -> None:
    """acks=0 gets no answer, so a refusal is told the way Kafka tells it: the topics allowed go
    upstream, then the connection closes (the client refreshes its metadata and retries, where it
    meets the refusal on an answered request). An answer here would be read as the answer to the
    client's next request."""
    assert session.tenant is not None
    namespace = session.tenant.namespace
    if forwarded:
        parts = build_produce_request(
            view,
            topics=forwarded,
            rename=namespace.fleet,
            transactional_id=namespace.fleet_or_none(view.transactional_id),
        )
        session.forward(exchange, parts, sum(len(part) for part in parts), None)
    session.finish(exchange, None, throttle)
    first = next(iter(refusals.values()))
    session.refuse(f"{first.reason.value} acks=0 produce: {first.message or first.error.name}")


def _single_topic(topics: Iterable[ProduceTopic]) -> str | None:
    names = {topic.name for topic in topics}
    return names.pop() if len(names) == 1 else None


def _local_answer(
    exchange: Exchange, view: ProduceRequestView, refusals: Refusals, throttle: int
) -> list[Any]:
    module = response_module(API_KEY, exchange.version)
    topics = tuple(_refused_topic(module, topic, refusals[topic.name]) for topic in view.topics)
    response = make(module, "ProduceResponse", responses=topics)
    encoded = encode_entity(with_throttle(response, throttle))
    return exchange.framed([encoded], len(encoded))


def _refused_topic(module: Any, topic: ProduceTopic, refusal: Refusal) -> Any:
    error, message = refusal.error, refusal.message
    partitions = tuple(
        make(
            module,
            "PartitionProduceResponse",
            index=p.index,
            error_code=error,
            base_offset=-1,
            log_append_time=None,
            log_start_offset=-1,
            record_errors=(),
            error_message=message,
        )
        for p in topic.partitions
    )
    return make(
        module,
        "TopicProduceResponse",
        name=topic.name,
        topic_id=uuid.UUID(bytes=topic.topic_id) if topic.topic_id else None,
        partition_responses=partitions,
    )


def _client_answer(
    session: RequestSession,
    exchange: Exchange,
    view: ProduceRequestView,
    response: Any,
    refusals: Refusals,
) -> Any:
    """The broker's answer renamed for the tenant, with local refusals merged in request order."""
    assert session.tenant is not None
    namespace = session.tenant.namespace
    module = response_module(API_KEY, exchange.version)
    answered: dict[str, Any] = {}
    by_id = {t.topic_id: t.name for t in view.topics if t.name not in refusals}
    for topic in response.responses:
        topic_id = getattr(topic, "topic_id", None)
        if topic_id is not None:
            name = by_id.get(topic_id.bytes)
        else:
            name = namespace.local(topic.name) if hasattr(topic, "name") else None
        if name is not None:
            answered[name] = topic
    topics = []
    for topic in view.topics:
        if topic.name in refusals:
            topics.append(_refused_topic(module, topic, refusals[topic.name]))
        elif topic.name in answered:
            upstream = answered.pop(topic.name)
            partitions = tuple(_scrubbed(p, namespace.scrub) for p in upstream.partition_responses)
            topics.append(
                make(
                    module,
                    "TopicProduceResponse",
                    name=topic.name,
                    topic_id=getattr(upstream, "topic_id", None),
                    partition_responses=partitions,
                )
            )
    return make(
        module, "ProduceResponse", responses=tuple(topics), throttle_time=response.throttle_time
    )


def _scrubbed(partition: Any, scrub: Any) -> Any:
    message = getattr(partition, "error_message", None)
    if message is None:
        return partition
    import dataclasses

    return dataclasses.replace(partition, error_message=scrub(message))
