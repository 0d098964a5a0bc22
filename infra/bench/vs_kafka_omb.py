"""The OpenMessaging Benchmark's Kafka shape for `infra.bench.vs_kafka` (issue 25), on a running server.

Owns `omb`: 1 topic x 100 partitions, 1 KiB records, 16 producer and 16 consumer processes (one
confluent-kafka client each, one subscription), OMB's Kafka driver settings
(`driver-kafka/kafka-throughput.yaml`: acks=all, linger.ms=1, batch.size=1048576;
auto.offset.reset=earliest, enable.auto.commit=false, max.partition.fetch.bytes=10485760), and
OMB's rules (OMB itself is not built here; docs/benchmarks.md says what differs):

- the rate is a target for the producers, each sending its share at the intended times
  (uniformly), whatever the server answers;
- the maximum rate is OMB's *sustainable* rate (`producerRate: 0`): a rate controller, every
  control period, raises the target while the consumers keep up and cuts it when the receive
  backlog (sent minus received) or the publish backlog (expected minus sent) passes a limit
  (OMB's `RateController`, its defaults); the row is the rate published while measured;
- the fixed-rate phase runs at 50 % of that rate, its own topic and consumer group;
- each phase starts once every consumer holds partitions of one complete assignment (polled
  with a deadline; the time it took is in the result), then warms up (sent, not counted), then
  measures; latencies are per message: publish (send to delivery report) and end-to-end (send
  time in the record to the consumer's receipt; one host, one clock);
- a consumer commits its position asynchronously after every batch it reads, as OMB's Kafka
  consumer does.

The result of each phase carries its per-period timeline (target, published and received per
second, backlog), so a phase that queues shows it. Blocking; child processes are joined (or
killed) before a function returns; the shared counters are written by one process each.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import statistics
import struct
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import confluent_kafka

from infra.bench.latency import percentile

RECORD = 1024
OMB_PRODUCER = {
    "acks": "all",
    "linger.ms": 1,
    "batch.size": 1048576,
    # OMB's driver runs the Java producer, whose defaults these are (librdkafka's are no
    # idempotence and a million requests in flight: a request per linger.ms however slow the
    # answers, where the Java producer batches up behind its five in flight).
    "enable.idempotence": True,
    "max.in.flight.requests.per.connection": 5,
}
OMB_CONSUMER = {
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "max.partition.fetch.bytes": 10485760,
}
OMB_START_RATE = 10_000.0  # records/s: where OMB's controller starts
CONTROL_PERIOD_S = 3.0  # OMB's control period
BACKLOG_LIMIT = 1_000  # records: OMB's PUBLISH_BACKLOG_LIMIT and RECEIVE_BACKLOG_LIMIT defaults
MIN_RATE = 100.0  # records/s: a floor OMB lacks (a stalled period would otherwise pin it at 0)
JOIN_TIMEOUT_S = 300.0
_STAMP = struct.Struct(">qb")  # send time (ns since the epoch), measured (1) or warm-up (0)
_BATCH = 500  # records taken from a consumer's queue at once


class WorkloadSizes(Protocol):
    """The sizes `omb` reads (`vs_kafka_workloads.WorkloadSizes` has them)."""

    @property
    def omb_partitions(self) -> int: ...
    @property
    def omb_producers(self) -> int: ...
    @property
    def omb_consumers(self) -> int: ...
    @property
    def omb_seconds(self) -> float: ...
    @property
    def omb_warmup_seconds(self) -> float: ...
    @property
    def omb_max_warmup_seconds(self) -> float: ...


@dataclass
class RateController:
    """OMB's maximum-sustainable-rate controller: the next target rate from one period's counts."""

    backlog_limit: int = BACKLOG_LIMIT
    ramping: float = 1.0  # OMB's ramping factor, between 0.01 and 1
    published: int = 0
    received: int = 0

    def next_rate(self, rate: float, period_s: float, published: int, received: int) -> float:
        """`published`/`received`: totals so far (delivered records, records read)."""
        expected = rate * period_s
        sent_now, read_now = published - self.published, received - self.received
        self.published, self.received = published, received
        if (receive_backlog := published - received) > self.backlog_limit:
            return self._cut(period_s, read_now, expected, receive_backlog)
        if (publish_backlog := expected - sent_now) > self.backlog_limit:
            return self._cut(period_s, sent_now, expected, publish_backlog)
        self.ramping = min(1.0, self.ramping * 2)
        return rate * (1 + self.ramping)

    def _cut(self, period_s: float, actual: float, expected: float, backlog: float) -> float:
        self.ramping = max(0.01, self.ramping / 2)
        caught_up = max(0.0, expected - backlog) / period_s
        return max(MIN_RATE, 0.2 * actual / period_s + 0.8 * caught_up)


@dataclass
class _Shared:
    """What the phase's processes share: events, the target rate and one counter per client."""

    start: Any
    stop_producers: Any
    stop_consumers: Any
    rate: Any  # total records/s, read by every producer
    measuring: Any  # 1 while the measured period runs: records sent then carry the flag
    ready: Any  # producers connected, metadata known
    delivered: Any  # per producer
    received: Any  # per consumer
    assigned: Any  # per consumer: partitions it holds (0 after a revoke)


def _processes() -> Any:
    """Client processes fork from a clean server process that has imported this module once
    (the benchmark's own process holds librdkafka threads, which a plain fork would copy)."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload([__name__, "confluent_kafka"])
    return ctx


def _shared(ctx: Any, sizes: WorkloadSizes, rate: float) -> _Shared:
    return _Shared(
        start=ctx.Event(), stop_producers=ctx.Event(), stop_consumers=ctx.Event(),
        rate=ctx.Value("d", rate, lock=False), measuring=ctx.Value("b", 0, lock=False),
        ready=ctx.Value("i", 0),
        delivered=ctx.Array("q", sizes.omb_producers, lock=False),
        received=ctx.Array("q", sizes.omb_consumers, lock=False),
        assigned=ctx.Array("i", sizes.omb_consumers, lock=False),
    )  # fmt: skip


def quantiles(samples_ms: Sequence[float]) -> dict[str, float]:
    if not samples_ms:
        return {"count": 0, "p50_ms": float("nan"), "p99_ms": float("nan"),
                "p999_ms": float("nan")}  # fmt: skip
    ordered = sorted(samples_ms)
    return {
        "count": len(ordered),
        "p50_ms": round(statistics.median(ordered), 2),
        "p99_ms": round(percentile(ordered, 0.99), 2),
        "p999_ms": round(percentile(ordered, 0.999), 2),
    }


# --- the client processes -------------------------------------------------------------------------


def _producer(bootstrap: str, topic: str, index: int, count: int, shared: _Shared,
              out: Any, nice: int = 0) -> None:  # fmt: skip
    """Send this producer's share of the shared target rate at the intended times until told to
    stop; records sent while `measuring` carry the flag and their publish latency is kept."""
    os.nice(nice)
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, **OMB_PRODUCER})
    # OMB's probe: one record each, delivered before the start (connected, metadata and the
    # idempotent producer id known), not measured
    producer.produce(topic, _STAMP.pack(time.time_ns(), 0) + bytes(RECORD - _STAMP.size))
    if producer.flush(120) != 0:
        raise RuntimeError("OMB producer: the probe record was not delivered in 120s")
    with shared.ready.get_lock():
        shared.ready.value += 1
    filler = bytes(RECORD - _STAMP.size)
    publish_ms: list[float] = []
    delivered = shared.delivered

    def on_delivery(err: Any, msg: Any) -> None:
        if err is None:
            delivered[index] += 1
            stamp, measured = _STAMP.unpack_from(msg.value() or bytes(_STAMP.size))
            if measured:
                publish_ms.append((time.time_ns() - stamp) / 1e6)

    shared.start.wait()
    last, due, sent, share = time.monotonic(), 1.0, 0, shared.rate.value / count
    while not shared.stop_producers.is_set():
        now = time.monotonic()
        if shared.rate.value / count != share:  # a new target: OMB starts a new rate limiter,
            share, due = shared.rate.value / count, min(due, sent + 1.0)  # the debt dropped
        due += (now - last) * share
        last = now
        measured = shared.measuring.value
        while sent < int(due):
            try:
                producer.produce(topic, _STAMP.pack(time.time_ns(), measured) + filler,
                                 on_delivery=on_delivery)  # fmt: skip
                sent += 1
            except BufferError:  # the client's queue is full: it cannot keep the rate
                producer.poll(0.001)
                break
        producer.poll(min(0.005, max(0.0, (int(due) + 1 - due) / share)) if share else 0.005)
    producer.flush(120)
    out.put({"publish_ms": publish_ms})


def _consumer(bootstrap: str, topic: str, group: str, index: int, shared: _Shared,
              out: Any, nice: int = 0) -> None:  # fmt: skip
    """Read as OMB's Kafka consumer does: hand over each batch as soon as it is there (a
    consume() with a timeout would wait for a full batch), then commit asynchronously."""
    os.nice(nice)
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": group, **OMB_CONSUMER}
    )

    def on_assign(_c: Any, partitions: list[Any]) -> None:
        shared.assigned[index] = len(partitions)

    def on_revoke(_c: Any, _partitions: list[Any]) -> None:
        shared.assigned[index] = 0

    consumer.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)
    latencies: list[float] = []
    received = shared.received
    while not shared.stop_consumers.is_set():
        batch = consumer.consume(_BATCH, 0)
        if not batch and (first := consumer.poll(0.1)) is not None:
            batch = [first]
        read = 0
        for msg in batch:
            value = msg.value()
            if msg.error() is None and value is not None:
                read += 1
                stamp, measured = _STAMP.unpack_from(value)
                if measured:
                    latencies.append((time.time_ns() - stamp) / 1e6)
        if read:
            received[index] += read
            consumer.commit(asynchronous=True)
    consumer.close()
    out.put({"e2e_ms": latencies})


# --- one phase ------------------------------------------------------------------------------------


@dataclass
class _Timeline:
    """Per-period counts of one phase, OMB's periodic report."""

    shared: _Shared
    began: float = field(default_factory=time.monotonic)
    periods: list[dict[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._last = (self.began, 0, 0)

    def totals(self) -> tuple[int, int]:
        return sum(self.shared.delivered), sum(self.shared.received)

    def sample(self) -> tuple[float, int, int]:
        now = time.monotonic()
        published, received = self.totals()
        then, was_published, was_received = self._last
        span = max(1e-9, now - then)
        self.periods.append({
            "t_s": round(now - self.began, 1), "target_per_s": round(self.shared.rate.value),
            "published_per_s": round((published - was_published) / span),
            "received_per_s": round((received - was_received) / span),
            "backlog": published - received,
        })  # fmt: skip
        self._last = (now, published, received)
        return span, published, received


def _run_for(seconds: float, timeline: _Timeline, control: RateController | None) -> None:
    """Let the load run `seconds`, sampling every control period (and steering the rate)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(CONTROL_PERIOD_S, left))
        span, published, received = timeline.sample()
        if control is not None:
            rate = timeline.shared.rate.value
            timeline.shared.rate.value = control.next_rate(rate, span, published, received)


def _wait(
    check: Callable[[], bool], timeout: float, what: str, state: Callable[[], str] = str
) -> float:
    """Poll until `check` holds; the seconds it took (a benchmark's wait, part of its result)."""
    began = time.monotonic()
    while not check():
        if time.monotonic() - began > timeout:
            raise RuntimeError(f"{what}: not done after {timeout:g}s {state()}".rstrip())
        time.sleep(0.05)
    return round(time.monotonic() - began, 2)


def _assigned(shared: _Shared, partitions: int) -> bool:
    """Every consumer holds partitions and together they hold each once: one whole assignment."""
    held = list(shared.assigned)
    return all(held) and sum(held) == partitions


def _phase(
    bootstrap: str, topic: str, sizes: WorkloadSizes, rate: float | None, nice: int = 0
) -> dict[str, Any]:
    """One phase at `rate` records/s (None: OMB's controller finds the sustainable rate); the
    client processes run at `nice` (OMB runs its workers on hosts of their own: a positive
    value, the same for every system, keeps the load generators from starving the server)."""
    ctx = _processes()
    shared = _shared(ctx, sizes, OMB_START_RATE if rate is None else rate)
    outs = ctx.Queue()
    group = f"omb-{uuid.uuid4().hex[:8]}"
    consumers = [
        ctx.Process(target=_consumer, args=(bootstrap, topic, group, i, shared, outs, nice))
        for i in range(sizes.omb_consumers)
    ]
    producers = [
        ctx.Process(target=_producer,
                    args=(bootstrap, topic, i, sizes.omb_producers, shared, outs, nice))
        for i in range(sizes.omb_producers)
    ]  # fmt: skip
    control = RateController() if rate is None else None
    try:
        for process in consumers + producers:
            process.start()
        held = partial(_assigned, shared, sizes.omb_partitions)
        join_s = _wait(held, JOIN_TIMEOUT_S, "OMB consumers assigned",
                       lambda: f"(partitions each holds: {list(shared.assigned)})")  # fmt: skip
        _wait(lambda: shared.ready.value >= sizes.omb_producers, 120, "OMB producers ready")
        timeline = _Timeline(shared)
        shared.start.set()
        warmup = sizes.omb_warmup_seconds if rate is not None else sizes.omb_max_warmup_seconds
        _run_for(warmup, timeline, control)
        published0, received0 = timeline.totals()
        shared.measuring.value = 1
        measure_began = time.monotonic()
        _run_for(sizes.omb_seconds, timeline, control)
        published1, received1 = timeline.totals()
        seconds = time.monotonic() - measure_began
        shared.measuring.value = 0
        shared.stop_producers.set()
        produced = [outs.get(timeout=300) for _ in producers]
        total = sum(shared.delivered)
        drain_s = _wait(lambda: sum(shared.received) >= total, 120, "OMB consumers caught up")
        shared.stop_consumers.set()
        consumed = [outs.get(timeout=120) for _ in consumers]
    finally:
        shared.stop_producers.set()
        shared.stop_consumers.set()
        shared.start.set()
        for process in consumers + producers:
            if process.pid is not None:
                process.join(30)
                if process.is_alive():
                    process.kill()
    measured = published1 - published0
    return {
        "rate_target": round(shared.rate.value if rate is None else rate),
        "records_per_s": round(measured / seconds),
        "mb_per_s": round(measured * RECORD / seconds / 1e6, 2),
        "received_mb_per_s": round((received1 - received0) * RECORD / seconds / 1e6, 2),
        "join_s": join_s,
        "drain_s": drain_s,
        "produced": total,
        "consumed": sum(shared.received),
        "measured": measured,
        "warmup_s": warmup,
        "backlog_max_measured": max(
            (p["backlog"] for p in timeline.periods if p["t_s"] > warmup), default=0
        ),
        "periods": timeline.periods,
        "publish": quantiles([x for p in produced for x in p["publish_ms"]]),
        "e2e": quantiles([x for c in consumed for x in c["e2e_ms"]]),
    }


def omb(
    bootstrap: str, sizes: WorkloadSizes, create: Callable[..., None], nice: int = 0
) -> dict[str, Any]:
    """OMB's maximum sustainable rate, then its fixed-rate latency run at 50 % of that rate."""
    create(bootstrap, ["omb-max"], partitions=sizes.omb_partitions)
    peak = _phase(bootstrap, "omb-max", sizes, None, nice)
    create(bootstrap, ["omb-half"], partitions=sizes.omb_partitions)
    half = _phase(bootstrap, "omb-half", sizes, peak["records_per_s"] / 2, nice)
    return {"max": peak, "half": half, "client_nice": nice}


def omb_at(
    bootstrap: str, sizes: WorkloadSizes, create: Callable[..., None], rate: float, nice: int = 0
) -> dict[str, Any]:
    """OMB's fixed-rate latency run at `rate` records/s on a topic of its own: the same rate for
    every system compared, as OMB's own comparisons fix `producerRate` in the workload file."""
    create(bootstrap, ["omb-common"], partitions=sizes.omb_partitions)
    return _phase(bootstrap, "omb-common", sizes, rate, nice)
