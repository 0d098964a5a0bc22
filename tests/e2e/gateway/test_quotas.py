"""Client quotas through the gateway (issue 10, acceptance): a producer and a consumer at ≥ 10×
their byte-rate quota of 1 MB/s are held to it ± 10 %, with `throttle_time_ms` > 0 seen by the
client, and a quota raised in the store takes effect within 1 s.

How the rate is measured, and why so. Kafka's windowed rate (11 samples × 1 s, the gateway's
defaults) pads a young window to 10 s, so a saturating client gets ≈ 10 windows' worth through at
once, is then held until its rate over the window is back at the quota, and is let through in
another burst each time the sample holding the previous burst leaves the window: a saturating
client moves in cycles of one window (≈ 11–12 s), each a burst plus a trickle, each carrying
quota × its length (`tests/unit/gateway/quotas/test_client_quotas.py` shows the same on a fake
clock). The bytes of an arbitrary 30 s span therefore depend on whether it holds two or three
bursts (0.76–1.13 × the quota measured here); over whole cycles they are the quota. So the rate is
measured from the client's first acknowledged byte (the first burst) to the start of the first
burst at least 30 s later: ≥ 30 s of whole cycles, the measurement Kafka's algorithm guarantees.

What is counted is what the quota counts. The gateway charges a produce request's size and a
fetch's record bytes; the clients see payload (key + value). Records are equal and large (10 KB),
so the ratio of record-batch bytes to payload is one constant per topic, taken exactly from the
broker (DescribeLogDirs size of the partition ÷ payload of every record in it); acknowledged
payload × that ratio is the record-batch bytes the quota charged. A produce request adds ≈ 100
bytes of header around ≈ 100 kB of batch (< 0.2 %), left out and inside the tolerance.

Each test has its own service account in tenant `acme`, with its quota on that user's entity
(`/config/users/<sa>`), so the tests cannot throttle one another or the unquotaed filler.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, ThrottleEvent, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from brokers.client import Cluster
from brokers.client.log_dirs import describe_log_dirs
from tenancy.domain import QuotaEntity
from tests.gateway_stack import OPERATOR, Credentials, GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

MB = 1_000_000  # quotas are bytes per second; "1 MB/s" is 10^6 B/s
QUOTA = 1 * MB
TOLERANCE = 0.10
VALUE_BYTES = 10_000
MIN_SPAN_S = 30.0
BURST_PROBE_S = 0.5  # a burst: acknowledged bytes over this span ≥ 4 × the quota's worth
RUN_DEADLINE_S = 75.0  # a run that finds no cycle end by then fails
STALL_S = 1.0  # an acknowledgement gap this much longer than the throttle told: a stalled machine
SAME_POLL_S = 0.05  # a throttle and acknowledgements this close came from one poll


@dataclass
class Flow:
    """What a client saw: (monotonic time, payload bytes) per record, and the throttles."""

    acks: list[tuple[float, int]] = field(default_factory=list)
    throttles: list[tuple[float, float]] = field(default_factory=list)  # (time, seconds)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_throttle(self, event: ThrottleEvent) -> None:
        with self.lock:
            self.throttles.append((time.monotonic(), event.throttle_time))

    def acked(self, size: int) -> None:
        with self.lock:
            self.acks.append((time.monotonic(), size))


def service_account(stack: GatewayStack, name: str, **quotas: float) -> Credentials:
    """A new service account of `acme` with `quotas` on its user entity."""
    with stack.store() as store:
        creds = GatewayStack.add_tenant(store, "acme", name)
        if quotas:
            store.set_quotas(
                "acme", QuotaEntity(creds.service_account, None), quotas, actor=OPERATOR
            )
    return creds


def sasl_config(stack: GatewayStack, creds: Credentials, **extra: Any) -> dict[str, Any]:
    return {
        "bootstrap.servers": stack.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": creds.key_id,
        "sasl.password": creds.secret,
        **extra,
    }


def create_topic(stack: GatewayStack, creds: Credentials, topic: str) -> None:
    admin = AdminClient(sasl_config(stack, creds))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)


def log_bytes(stack: GatewayStack, tenant: str, topic: str) -> int:
    """The partition's size on the broker (DescribeLogDirs, straight to the broker)."""
    broker = stack.broker
    assert broker is not None
    fleet_topic = f"{tenant}_{topic}"

    async def ask() -> int:
        async with Cluster(broker.bootstrap) as cluster:
            sizes = await describe_log_dirs(cluster, {fleet_topic: [0]}, node_id=broker.node_id)
        return sum(size for tp, size in sizes.items() if tp.topic == fleet_topic)

    return asyncio.run(ask())


def burst_starts(acks: Sequence[tuple[float, int]], quota: float) -> list[float]:
    """Times at which a burst begins: the first ack of a `BURST_PROBE_S` span carrying at least
    4 × the quota's worth (a client held at its quota never does; a window sample leaving does)."""
    starts: list[float] = []
    total, j = 0, 0
    for i, (at, _size) in enumerate(acks):
        while j < len(acks) and acks[j][0] < at + BURST_PROBE_S:
            total += acks[j][1]
            j += 1
        if total >= 4 * quota * BURST_PROBE_S and (not starts or at >= starts[-1] + 1.0):
            starts.append(at)
        total -= acks[i][1]
    return starts


def cycle_span(flow: Flow, quota: float) -> tuple[float, float] | None:
    """(start, end) of the measurement: from the first ack to the first burst ≥ 30 s later."""
    with flow.lock:
        acks = list(flow.acks)
    if not acks:
        return None
    start = acks[0][0]
    ends = [at for at in burst_starts(acks, quota) if at >= start + MIN_SPAN_S]
    if not ends or acks[-1][0] < ends[0] + BURST_PROBE_S:
        return None
    return start, ends[0]


def rate(flow: Flow, start: float, end: float, factor: float) -> float:
    return sum(size for at, size in flow.acks if start <= at < end) * factor / (end - start)


def window_spans(flow: Flow, start: float, end: float, factor: float) -> tuple[float, float]:
    """Min and max rate of every 30 s span in [start, end] (reported, not asserted)."""
    rates = [
        rate(flow, t, t + MIN_SPAN_S, factor)
        for t in [start + k * 0.25 for k in range(int((end - start - MIN_SPAN_S) / 0.25) + 1)]
    ]
    return (min(rates), max(rates)) if rates else (0.0, 0.0)


def run_until(done: Callable[[], bool], step: Callable[[], None], what: str) -> None:
    """`step()` over and over until `done()` (checked every 50 ms) or the deadline."""

    def stepped() -> bool:
        if done():
            return True
        check_at = time.monotonic() + 0.05
        while time.monotonic() < check_at:  # the client works flat out between checks
            step()
        return False

    wait_until(stepped, what=what, timeout=RUN_DEADLINE_S, interval=0)


def stalled_seconds(flow: Flow, start: float, end: float) -> float:
    """Seconds of [start, end) in which nothing was acknowledged for at least `STALL_S` beyond
    the throttles the client had been told to wait: the machine held it then, not the quota.

    A throttle received at `at` holds the client until `at + seconds`; the ones that count for
    a gap arrived with the acknowledgements before it or within it (a throttled fetch answers
    with no records), not with those that end it (same poll, within `SAME_POLL_S`)."""
    acks = [at for at, _size in flow.acks if start <= at < end] + [end]
    stalled = 0.0
    for before, after in itertools.pairwise(acks):
        held_until = max(
            (
                at + seconds
                for at, seconds in flow.throttles
                if before - SAME_POLL_S <= at < after - SAME_POLL_S
            ),
            default=before,
        )
        excess = after - max(before, held_until)
        if excess >= STALL_S:
            stalled += excess
    return stalled


def assert_held(flow: Flow, span: tuple[float, float], factor: float, what: str) -> None:
    start, end = span
    measured = rate(flow, start, end, factor)
    stalled = stalled_seconds(flow, start, end)
    unstalled = measured * (end - start) / (end - start - stalled)
    low, high = window_spans(flow, start, end, factor)
    first = [size for at, size in flow.acks if at < start + 1.0]
    print(  # the numbers behind the verdict, in the test's output
        f"{what}: {measured / QUOTA:.3f} × quota over {end - start:.1f} s of whole cycles "
        f"({unstalled / QUOTA:.3f} × without {stalled:.1f} s stalled); "
        f"30 s spans within it {low / QUOTA:.3f}–{high / QUOTA:.3f}; "
        f"first second {sum(first) * factor / QUOTA:.1f} × quota; "
        f"{len(flow.throttles)} throttles, max {max((t for _, t in flow.throttles), default=0):.3f} s"
    )
    assert stalled <= (end - start) / 4, f"{what}: the machine stalled {stalled:.1f} s of the span"
    assert measured <= QUOTA * (1 + TOLERANCE), (
        f"{what} at {measured / QUOTA:.3f} × its quota over {end - start:.1f} s"
    )
    assert unstalled >= QUOTA * (1 - TOLERANCE), (
        f"{what} at {unstalled / QUOTA:.3f} × its quota over {end - start - stalled:.1f} s "
        f"not stalled ({measured / QUOTA:.3f} × over all {end - start:.1f} s)"
    )
    assert any(throttle > 0 for at, throttle in flow.throttles if start <= at <= end), (
        f"{what}: no throttle_time_ms > 0 seen by the client"
    )


def test_a_producer_at_ten_times_its_quota_is_held_to_it(
    gateway_stack: GatewayStack, topic_name: str
) -> None:
    creds = service_account(gateway_stack, "quota-producer", producer_byte_rate=QUOTA)
    create_topic(gateway_stack, creds, topic_name)
    flow = Flow()

    def delivered(error: KafkaError | None, message: Any) -> None:
        if error is not None and error.code() == KafkaError._PURGE_QUEUE:
            return  # never sent: dropped from the backlog once the measurement was over
        assert error is None, error
        flow.acked(len(message.value()))

    producer = Producer(
        sasl_config(
            gateway_stack,
            creds,
            **{
                "client.id": "quota-producer",
                "acks": "all",
                "linger.ms": 5,
                "batch.size": 100_000,
                "queue.buffering.max.messages": 3000,  # a 30 MB backlog, kept full
                "throttle_cb": flow.on_throttle,
            },
        )
    )
    value = os.urandom(VALUE_BYTES)  # incompressible, equal records: one batch/payload ratio
    backlog: list[int] = []

    def offer() -> None:
        try:
            producer.produce(topic_name, value, on_delivery=delivered)
        except BufferError:  # the backlog is full: the client is held back, not idle
            backlog.append(len(producer))
            producer.poll(0.01)
        producer.poll(0)

    run_until(lambda: cycle_span(flow, QUOTA) is not None, offer, "throttle cycle end")
    span = cycle_span(flow, QUOTA)
    assert span is not None
    producer.purge(in_queue=True, in_flight=False)
    assert producer.flush(60) == 0
    acknowledged = sum(size for _, size in flow.acks)
    factor = log_bytes(gateway_stack, "acme", topic_name) / acknowledged
    assert 1.0 < factor < 1.01, f"batch bytes / payload {factor}"
    # The client always had far more to send than it was let through: ≥ 10× the quota offered.
    assert backlog and min(backlog) * VALUE_BYTES >= 10 * QUOTA
    assert_held(flow, span, factor, "producer")


def test_a_consumer_at_ten_times_its_quota_is_held_to_it(
    gateway_stack: GatewayStack, topic_name: str
) -> None:
    filler = service_account(gateway_stack, "quota-filler")  # no quota at any level
    creds = service_account(gateway_stack, "quota-consumer", consumer_byte_rate=QUOTA)
    create_topic(gateway_stack, filler, topic_name)
    records = 6_500  # 65 MB: more than ≥ 30 s of cycles plus the first burst can take
    producer = Producer(
        sasl_config(
            gateway_stack,
            filler,
            # Batches of ≈ 100 kB: a fetch returns at least one whole batch, so the batch size
            # is the grain of what a throttled consumer is let through.
            **{"client.id": "quota-filler", "acks": "all", "linger.ms": 5, "batch.size": 100_000},
        )
    )
    value = os.urandom(VALUE_BYTES)
    for _ in range(records):
        while True:
            try:
                producer.produce(topic_name, value)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0
    factor = log_bytes(gateway_stack, "acme", topic_name) / (records * VALUE_BYTES)
    assert 1.0 < factor < 1.01, f"batch bytes / payload {factor}"

    flow = Flow()
    consumer = Consumer(
        sasl_config(
            gateway_stack,
            creds,
            **{
                "client.id": "quota-consumer",
                "group.id": f"{topic_name}-g",
                "enable.auto.commit": False,
                "max.partition.fetch.bytes": 262_144,  # fetches of ≈ 0.25 MB: fine-grained
                "throttle_cb": flow.on_throttle,
            },
        )
    )
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    consumed = 0

    def take() -> None:
        nonlocal consumed
        messages = consumer.consume(500, 0.1)
        for message in messages:
            assert message.error() is None, message.error()
            flow.acked(len(message.value() or b""))
        consumed += len(messages)
        assert consumed < records, "the topic ran dry before the measurement ended"

    try:
        run_until(lambda: cycle_span(flow, QUOTA) is not None, take, "throttle cycle end")
    finally:
        consumer.close()
    span = cycle_span(flow, QUOTA)
    assert span is not None
    assert_held(flow, span, factor, "consumer")


def test_a_raised_quota_takes_effect_within_a_second(
    gateway_stack: GatewayStack, topic_name: str
) -> None:
    creds = service_account(gateway_stack, "quota-raised", producer_byte_rate=200_000)
    create_topic(gateway_stack, creds, topic_name)
    flow = Flow()
    producer = Producer(
        sasl_config(
            gateway_stack,
            creds,
            **{
                "client.id": "quota-raised",
                "acks": "all",
                "linger.ms": 5,
                "batch.size": 16_384,
                "queue.buffering.max.messages": 5000,
                "throttle_cb": flow.on_throttle,
            },
        )
    )
    value = os.urandom(1_000)

    def delivered(error: KafkaError | None, _message: Any) -> None:
        if error is None:  # purged leftovers at the end are not acknowledged bytes
            flow.acked(len(value))

    def offer() -> None:
        try:
            producer.produce(topic_name, value, on_delivery=delivered)
        except BufferError:
            producer.poll(0.005)
        producer.poll(0)

    def throttled_steadily() -> bool:  # past the first burst, held at 200 kB/s
        with flow.lock:
            return sum(1 for _, t in flow.throttles if t > 0) >= 5

    run_until(throttled_steadily, offer, "throttle at 200 kB/s")
    with gateway_stack.store() as store:
        store.set_quotas(
            "acme",
            QuotaEntity(creds.service_account, None),
            {"producer_byte_rate": 5 * MB},
            actor=OPERATOR,
        )
    committed = time.monotonic()
    with flow.lock:
        # A mute already handed out is served (as in Kafka): the change is due to show from the
        # later of the commit and the end of the last throttle the client was given before it.
        due = max([committed, *(at + t for at, t in flow.throttles if at <= committed)])

    def unthrottled() -> float | None:
        with flow.lock:
            return next((at for at, t in flow.throttles if at > committed and t == 0), None)

    run_until(lambda: unthrottled() is not None, offer, "unthrottled response")
    first_free = unthrottled()
    assert first_free is not None
    # The responses that follow stay unthrottled for 3 MB: more than a whole 11 s window holds
    # at 200 kB/s, so only the new quota lets it through.
    moved_from = len(flow.acks)
    run_until(lambda: len(flow.acks) - moved_from >= 3_000, offer, "3 MB after the change")
    producer.purge(in_queue=True, in_flight=False)
    producer.flush(30)
    with flow.lock:
        later = [t for at, t in flow.throttles if at > first_free]
    print(
        f"quota raise: unthrottled {first_free - committed:.3f} s after the commit, "
        f"{first_free - due:.3f} s after the last mute ended"
    )
    assert first_free - due <= 1.0, f"unthrottled only {first_free - due:.3f} s after due"
    assert not any(t > 0 for t in later), f"throttled again after the raise: {later}"
