"""Fetch (key 1, v4–18) through the gateway: the hot path out.

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
topic's record bytes delivered. An answer of `STREAM_MIN_BYTES` or more whose slot is the client's
next answer is streamed (`raw.fetch_stream`): when its single topic is the tenant's and the
consumer quota, charged with the answer's size, does not throttle it, the renamed head goes to the
client and the rest follows as the broker's bytes arrive (views of the chunks read; the client
not reading pauses the upstream socket), so the gateway holds a chunk, not the answer; otherwise
it is read whole and answered as above. Once the head is out and the client's socket is plain TCP
with nothing queued, the rest of a streamed answer is moved by the kernel (`splice_relay`: record
bytes spliced socket to socket, the partitions' heads read by the walk); over TLS, or while the
client's socket is behind, it goes on through user space. From v13 topics are named by id
(KIP-516): each id is looked up in the fleet view without waiting (`known_topic_name`) and stands
for the tenant's topic only when that fleet topic is in the tenant's namespace; any other id
(another tenant's, or one nobody has) is answered UNKNOWN_TOPIC_ID here, never forwarded (fail
closed), and a forgotten topic's id that is not the tenant's is dropped. Ids go upstream
unchanged; the answer keeps only the ids forwarded. v15+ carries the replica id in ReplicaState.
A streamed v13+ answer keeps its topic id (`raw.fetch_stream`). Runs on the event loop; not
thread-safe.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from typing import Any

from brokers.client.messages import decode_response
from brokers.wire.entities import make, response_module
from brokers.wire.errors import ErrorCode
from brokers.wire.messages import decode_request, encode_entity
from gateway.kafka.api_table import client_backs_off
from gateway.kafka.byte_budget import Charge
from gateway.kafka.exchange import Exchange
from gateway.kafka.raw.fetch_response import rewrite_fetch_response
from gateway.kafka.raw.fetch_stream import FIRST_VERSION, LAST_VERSION, Decision, FetchStream
from gateway.kafka.request_session import RequestSession
from gateway.kafka.response_frames import body_offset, with_throttle
from gateway.kafka.splice_relay import AVAILABLE as SPLICE_AVAILABLE
from gateway.kafka.splice_relay import RelaySource
from gateway.kafka.upstream import StreamedAnswer

API_KEY = 1
TOPIC_ID_VERSION = 13
CONSUMER_REPLICA_ID = -1
UNHELD_ANSWER_BYTES = 64 * 1024  # a fetch's max_bytes while the tenant's budget has nothing free
STREAM_MIN_BYTES = 64 * 1024  # smaller answers are read whole (nothing to gain)
STREAMED_VERSIONS = (FIRST_VERSION, LAST_VERSION)


# A partition answered without data carries empty records, never null, as Kafka's
# (`MemoryRecords.EMPTY`): librdkafka refuses a Fetch answer with a null record set whole
# ("invalid MessageSetSize -1"), the partitions beside it included.
_NO_RECORDS = b""


def handle(session: RequestSession, exchange: Exchange, frame: memoryview, offset: int) -> None:
    policy = session.policy
    assert session.tenant is not None and exchange.subject is not None and policy is not None
    request = decode_request(API_KEY, exchange.version, frame, offset)
    if _replica_id(request) != CONSUMER_REPLICA_ID or getattr(request, "cluster_id", None):
        session.refuse("fetch with a replica id or cluster id")
        return
    namespace = session.tenant.namespace
    ids = _Ids(session) if exchange.version >= TOPIC_ID_VERSION else None
    local = _local_names(request, ids)
    denied = {n for n in local if n is not None and not policy.allowed("READ", "TOPIC", n)}
    # The answer is held in the gateway on its way: its bytes come from the tenant's budget, and
    # `max_bytes` is cut to what was held (a floor when none is free; the broker's first batch
    # is always whole, KIP-74).
    wanted = policy.fetch_max_bytes(exchange.subject, request.max_bytes)
    held = session.hold_answer_bytes(wanted)
    changes: dict[str, Any] = {
        "max_bytes": held.size if held is not None else min(wanted, UNHELD_ANSWER_BYTES),
        "topics": tuple(
            t if ids else dataclasses.replace(t, topic=namespace.fleet(t.topic))
            for t, name in zip(request.topics, local, strict=True)
            if name is not None and name not in denied
        ),
    }
    if ids is not None:  # v13+: ids pass unchanged, only the tenant's
        changes["forgotten_topics_data"] = tuple(
            t for t in request.forgotten_topics_data if ids.name(t.topic_id) is not None
        )
    elif hasattr(request, "forgotten_topics_data"):  # v7+ (fetch sessions)
        changes["forgotten_topics_data"] = tuple(
            dataclasses.replace(t, topic=namespace.fleet(t.topic))
            for t in request.forgotten_topics_data
        )
    rewritten = dataclasses.replace(request, **changes)
    topics = {n for n in local if n is not None}
    policy.meter(topics.pop() if len(topics) == 1 else None, requests=1)
    body = encode_entity(rewritten)
    handled_at = time.perf_counter()

    answer = _FetchAnswer(session, exchange, request, denied, held, handled_at, ids)
    session.forward(exchange, [body], len(body), answer)


def _replica_id(request: Any) -> int:
    """v15+ carries the replica id in ReplicaState (KIP-903)."""
    found = getattr(request, "replica_id", None)
    return int(request.replica_state.replica_id if found is None else found)


class _Ids:
    """v13+: the tenant's name for each topic id of one request, from the fleet view; None for
    an id that is not the tenant's topic (another tenant's, or nobody's: fail closed)."""

    def __init__(self, session: RequestSession) -> None:
        assert session.tenant is not None
        self._namespace = session.tenant.namespace
        self._fleet = session.services.fleet
        self.names: dict[bytes, str] = {}

    def name(self, topic_id: uuid.UUID | None) -> str | None:
        if topic_id is None:
            return None
        known = self.names.get(topic_id.bytes)
        if known is not None:
            return known
        fleet_name = self._fleet.known_topic_name(topic_id)
        name = None if fleet_name is None else self._namespace.local(fleet_name)
        if name is not None:
            self.names[topic_id.bytes] = name
        return name

    def rename(self) -> Callable[[str], str | None]:
        """For the answer's walk: an id's hex digits → the tenant's name; None for others."""
        return {key.hex(): name for key, name in self.names.items()}.get


def _local_names(request: Any, ids: _Ids | None) -> list[str | None]:
    """Each requested topic's tenant name (v13+: from its id; None when not the tenant's)."""
    if ids is None:
        return [t.topic for t in request.topics]
    return [ids.name(t.topic_id) for t in request.topics]


class _FetchAnswer:
    """The answer of one Fetch: taken whole (`__call__`), or streamed (`stream`) when it is large,
    the client's only answer due and a single topic of the tenant's (`raw.fetch_stream`)."""

    def __init__(
        self,
        session: RequestSession,
        exchange: Exchange,
        request: Any,
        denied: set[str],
        held: Charge | None,
        handled_at: float,
        ids: _Ids | None = None,
    ) -> None:
        self.session, self.exchange, self.request = session, exchange, request
        self.denied, self.held, self.handled_at = denied, held, handled_at
        self.ids = ids
        # refused here: topics the caller may not read, and (v13+) ids that are not its topics
        self.refused = bool(denied) or (ids is not None and None in _local_names(request, ids))

    def __call__(self, answer: memoryview | None, charged: int | None = None) -> None:
        try:
            if answer is not None:
                self._answered(answer, charged)
        finally:
            self._release()

    def stream(self, size: int) -> StreamedAnswer | None:
        exchange = self.exchange
        streamable = size >= STREAM_MIN_BYTES and not self.refused
        streamable = streamable and STREAMED_VERSIONS[0] <= exchange.version <= STREAMED_VERSIONS[1]
        if not streamable or not client_backs_off(API_KEY, exchange.version):
            return None  # an old client's throttled answer waits out its throttle whole
        if not self.session.answers_next(exchange):
            return None
        return _Streamed(self, size)

    def _release(self) -> None:
        held, self.held = self.held, None
        if held is not None:
            self.session.release_answer_bytes(held)

    def _answered(self, answer: memoryview, charged: int | None) -> None:
        session, exchange = self.session, self.exchange
        started = time.perf_counter()
        start = body_offset(exchange, answer)
        if self.refused:
            parts, size, per_topic, throttle = _merged(
                session, exchange, self.request, answer, start, self.denied, self.ids
            )
        else:
            rename = None if self.ids is None else self.ids.rename()
            parts, size, per_topic, throttle = _raw(
                session, exchange, answer, start, charged, rename
            )
        self._delivered(per_topic)
        session.finish(exchange, exchange.framed(parts, size), self._throttle(started, throttle))

    def _delivered(self, per_topic: dict[str, int]) -> None:
        session = self.session
        assert session.tenant is not None and session.policy is not None
        for topic, count in per_topic.items():
            session.policy.meter(topic, bytes_out=count)
            session.metrics.bytes_out(session.tenant.namespace.tenant_id, count)

    def _throttle(self, started: float, throttle: int) -> int:
        # A fetch parks in the broker's purgatory: only the gateway's own work is request time.
        exchange = self.exchange
        work_ms = ((self.handled_at - exchange.started) + (time.perf_counter() - started)) * 1000
        assert self.session.policy is not None and exchange.subject is not None
        time_throttle = self.session.policy.charge_request_time(exchange.subject, work_ms)
        return max(throttle, time_throttle)


class _Streamed:
    """A Fetch answer on its way through: chunks kept until `FetchStream` decides; streamed (the
    renamed head, then the broker's bytes as views) or, when it cannot be, read whole and answered
    by `_FetchAnswer` as usual. The consumer quota is charged when streaming starts, with the
    answer's size for its record bytes (what remains is partition heads: a few dozen bytes)."""

    def __init__(self, answer: _FetchAnswer, size: int) -> None:
        session, exchange = answer.session, answer.exchange
        assert session.tenant is not None
        self.answer, self.size, self.seen = answer, size, 0
        self.kept: list[memoryview] = []
        self.started = time.perf_counter()
        ids = answer.ids
        self.walk = FetchStream(
            exchange.version,
            exchange.correlation_id,
            exchange.flexible_response,
            size,
            session.tenant.namespace.local if ids is None else ids.rename(),
        )
        self.charged: int | None = None  # the throttle, once the quota was charged

    def feed(self, chunk: memoryview) -> None:
        self.seen += len(chunk)
        walk = self.walk
        if walk.decision is not Decision.STREAM:
            self.kept.append(chunk)
        if walk.decision is not Decision.BUFFER:
            walk.feed(chunk)
            if walk.decision is Decision.STREAM and self.kept:
                self._start()
            if walk.decision is Decision.STREAM:
                out = walk.take_out()
                if out:
                    self.answer.session.write_through(out)
        if self.seen == self.size:
            self._end()

    def failed(self) -> None:
        self.kept = []
        self.answer(None)

    # -- handed to the kernel (`gateway.kafka.upstream`, `splice_relay`) -------------------------
    def relay_target(self) -> tuple[int, RelaySource] | None:
        walk = self.walk
        if not SPLICE_AVAILABLE or walk.decision is not Decision.STREAM or self.seen == self.size:
            return None
        passing, wanted = walk.next_step()
        if not passing or wanted <= 0:
            return None
        fd = self.answer.session.splice_fd()
        return (fd, self) if fd is not None else None

    def next_step(self) -> tuple[bool, int]:
        return self.walk.next_step()

    def take(self, chunk: memoryview) -> list[memoryview]:
        self.seen += len(chunk)
        self.walk.feed(chunk)
        return self.walk.take_out()

    def skipped(self, count: int) -> None:
        self.seen += count
        self.walk.skip(count)

    def relayed(self, spliced: int) -> None:
        session = self.answer.session
        assert session.tenant is not None
        session.metrics.spliced(session.tenant.namespace.tenant_id, spliced)
        self._end()

    def _start(self) -> None:
        """The head is known: charge the quota; stream, or (throttled) take the answer whole."""
        session, exchange, walk = self.answer.session, self.answer.exchange, self.walk
        assert session.policy is not None and exchange.subject is not None
        self.charged = session.policy.charge_fetch(exchange.subject, walk.client_body_size)
        if self.charged > 0:  # a throttled fetch goes out with no records: read it whole
            walk.decision = Decision.BUFFER
            return
        self.kept = []
        session.write_through(exchange.framed([walk.head], walk.client_body_size))

    def _end(self) -> None:
        walk, answer = self.walk, self.answer
        if walk.decision is not Decision.STREAM:
            kept, self.kept = self.kept, []
            whole = kept[0] if len(kept) == 1 else memoryview(b"".join(kept))
            answer(whole, self.charged)
            return
        try:
            assert walk.topic is not None
            answer._delivered({walk.topic: walk.record_bytes})
            throttle = answer._throttle(self.started, 0)
            answer.session.finish(answer.exchange, None, throttle)
        finally:
            answer._release()


def _raw(
    session: RequestSession,
    exchange: Exchange,
    answer: memoryview,
    start: int,
    charged: int | None = None,
    by_id: Callable[[str], str | None] | None = None,
) -> tuple[list[Any], int, dict[str, int], int]:
    """The usual answer renamed on its bytes; `charged`: the throttle of a quota charge already
    made (a streamed answer that turned out throttled); `by_id`: v13+'s id → name."""
    assert session.tenant is not None and exchange.subject is not None
    rename = session.tenant.namespace.local if by_id is None else by_id
    body = answer[start:]
    rewrite = rewrite_fetch_response(
        body, exchange.version, rename=rename, drop_records=False, throttle_time_ms=0
    )
    delivered = sum(rewrite.bytes_per_topic.values())
    assert session.policy is not None
    throttle = charged
    if throttle is None:
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
    ids: _Ids | None = None,
) -> tuple[list[Any], int, dict[str, int], int]:
    """The rare answer with refused topics: decoded, renamed, refusals added, re-encoded."""
    assert session.tenant is not None and exchange.subject is not None
    namespace = session.tenant.namespace
    module = response_module(API_KEY, exchange.version)
    response = decode_response(API_KEY, exchange.version, answer, start)
    topics = []
    per_topic: dict[str, int] = {}
    for topic in response.responses:
        if ids is not None:
            name = None if topic.topic_id is None else ids.names.get(topic.topic_id.bytes)
        else:
            name = namespace.local(topic.topic)
        if name is None:
            continue
        per_topic[name] = sum(len(p.records or b"") for p in topic.partitions)
        topics.append(topic if ids is not None else dataclasses.replace(topic, topic=name))
    for topic, local in zip(request.topics, _local_names(request, ids), strict=True):
        if local is None or local in denied:
            code = (
                ErrorCode.unknown_topic_id
                if local is None
                else ErrorCode.topic_authorization_failed
            )
            partitions = tuple(
                make(
                    module,
                    "PartitionData",
                    partition_index=p.partition,
                    error_code=code,
                    high_watermark=-1,
                    last_stable_offset=-1,
                    log_start_offset=-1,
                    aborted_transactions=None,
                    preferred_read_replica=-1,
                    records=_NO_RECORDS,
                )
                for p in topic.partitions
            )
            topics.append(
                make(
                    module,
                    "FetchableTopicResponse",
                    topic=local,
                    topic_id=getattr(topic, "topic_id", None),
                    partitions=partitions,
                )
            )
    assert session.policy is not None
    throttle = session.policy.charge_fetch(exchange.subject, sum(per_topic.values()))
    if throttle > 0:
        per_topic = {}
        topics = [
            dataclasses.replace(
                t,
                partitions=tuple(dataclasses.replace(p, records=_NO_RECORDS) for p in t.partitions),
            )
            for t in topics
        ]
    changes: dict[str, Any] = {"responses": tuple(topics)}
    if hasattr(response, "node_endpoints"):  # v16+: brokers' addresses, never passed on
        changes["node_endpoints"] = ()
    encoded = encode_entity(with_throttle(dataclasses.replace(response, **changes), throttle))
    return [encoded], len(encoded), per_topic, throttle
