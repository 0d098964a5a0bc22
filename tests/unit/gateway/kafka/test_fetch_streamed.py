"""A Fetch answer fed to `gateway.kafka.fetch` in chunks (as `Upstream` streams it): streamed to
the client with the whole-answer rewrite's bytes, or — throttled — read whole and answered with no
records; the answer's budget is given back whichever way it ends. The session is a stand-in that
records what the path asks of it (the path's own contract, `RequestSession`)."""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest

from brokers.client.messages import decode_response
from brokers.wire.messages import encode_entity
from gateway.kafka import fetch
from gateway.kafka.byte_budget import ByteBudget, Charge
from gateway.kafka.exchange import Exchange, ResponseQueue
from gateway.kafka.raw.fetch_response import rewrite_fetch_response
from gateway.kafka.services import QuotaSubject
from tests.unit.gateway.raw.kio_messages import NAMESPACE, fetch_partition, fetch_response

pytestmark = pytest.mark.unit

VERSION = 12
CORRELATION = 31
BATCH = bytes(range(256)) * 1024  # 256 KiB: streamed


class Policy:
    def __init__(self, fetch_throttle: int) -> None:
        self.fetch_throttle = fetch_throttle
        self.charged: list[int] = []
        self.metered: list[tuple[str | None, dict[str, int]]] = []

    def charge_fetch(self, _subject: QuotaSubject, size: int) -> int:
        self.charged.append(size)
        return self.fetch_throttle

    def charge_request_time(self, _subject: QuotaSubject, _ms: float) -> int:
        return 0

    def meter(self, topic: str | None, **counters: int) -> None:
        self.metered.append((topic, counters))


class StandIn:
    """What `fetch._FetchAnswer` uses of a session."""

    def __init__(self, fetch_throttle: int) -> None:
        self.policy = Policy(fetch_throttle)
        self.tenant = SimpleNamespace(namespace=NAMESPACE)
        self.metrics = SimpleNamespace(bytes_out=lambda _tenant, _count: None)
        self.written: list[bytes] = []
        self.answers = ResponseQueue(self._written, lambda _ms: None)
        self.finished: list[tuple[Sequence[Any] | None, int]] = []
        self.budget = ByteBudget(1 << 30, defer=lambda callback: callback())

    def _written(self, parts: Sequence[Any]) -> None:
        self.written.append(b"".join(bytes(p) for p in parts))

    def answers_next(self, exchange: Exchange) -> bool:
        return self.answers.first(exchange.slot)

    def write_through(self, parts: Sequence[Any]) -> None:
        self.written.append(b"".join(bytes(p) for p in parts))

    def splice_fd(self) -> int | None:
        return None

    def finish(self, exchange: Exchange, parts: Sequence[Any] | None, throttle_ms: int) -> None:
        self.finished.append((parts, throttle_ms))
        self.answers.complete(exchange.slot, parts)

    def release_answer_bytes(self, charge: Charge) -> None:
        charge.release()


def exchange(session: StandIn) -> Exchange:
    made = Exchange(
        1,
        VERSION,
        CORRELATION,
        memoryview(b""),
        True,
        QuotaSubject("acme", "sa", "client"),
        time.perf_counter(),
    )
    made.slot = session.answers.reserve()
    return made


def broker_frame() -> bytes:
    partitions = [fetch_partition(VERSION, i, BATCH, aborted=False) for i in range(2)]
    body = encode_entity(fetch_response(VERSION, [("acme_orders", partitions)]))
    return struct.pack(">i", CORRELATION) + b"\x00" + body


def answer_for(session: StandIn) -> tuple[Any, Exchange, Charge]:
    made = exchange(session)
    held = session.budget.take_up_to(1 << 20)
    assert held is not None
    answer = fetch._FetchAnswer(session, made, None, set(), held, time.perf_counter())  # type: ignore[arg-type]
    return answer, made, held


def feed_in_chunks(streamed: Any, data: bytes, size: int = 50_000) -> None:
    for start in range(0, len(data), size):
        streamed.feed(memoryview(bytearray(data[start : start + size])))


def test_a_large_answer_streams_the_whole_answer_rewrite_and_gives_its_budget_back() -> None:
    session = StandIn(fetch_throttle=0)
    answer, _made, _held = answer_for(session)
    data = broker_frame()
    streamed = answer.stream(len(data))
    assert streamed is not None
    feed_in_chunks(streamed, data)
    whole = rewrite_fetch_response(
        memoryview(data[5:]),
        VERSION,
        rename=NAMESPACE.local,
        drop_records=False,
        throttle_time_ms=0,
    )
    body = b"".join(whole.parts)
    expected = struct.pack(">i", 5 + len(body)) + struct.pack(">i", CORRELATION) + b"\x00" + body
    assert b"".join(session.written) == expected
    assert len(session.written) > 2  # it went out in pieces, as the chunks came
    assert session.finished == [(None, 0)] and len(session.answers) == 0
    assert ("orders", {"bytes_out": 2 * len(BATCH)}) in session.policy.metered
    assert session.budget.used == 0


def test_a_throttled_answer_is_read_whole_and_goes_out_without_records() -> None:
    session = StandIn(fetch_throttle=700)
    answer, _made, _held = answer_for(session)
    data = broker_frame()
    streamed = answer.stream(len(data))
    assert streamed is not None
    feed_in_chunks(streamed, data)
    assert len(session.policy.charged) == 1  # charged once, when streaming would have begun
    ((parts, throttle),) = session.finished
    assert throttle == 700 and parts is not None
    frame = memoryview(b"".join(bytes(p) for p in parts))
    response = decode_response(1, VERSION, frame, 4 + 5)
    assert [t.topic for t in response.responses] == ["orders"]
    assert all(not p.records for t in response.responses for p in t.partitions)
    assert session.budget.used == 0


def test_an_answer_cut_off_by_a_failure_gives_its_budget_back_and_is_not_finished() -> None:
    session = StandIn(fetch_throttle=0)
    answer, _made, _held = answer_for(session)
    data = broker_frame()
    streamed = answer.stream(len(data))
    assert streamed is not None
    feed_in_chunks(streamed, data[: len(data) // 2])
    streamed.failed()
    assert session.finished == [] and session.budget.used == 0


def test_an_answer_behind_another_one_is_read_whole() -> None:
    session = StandIn(fetch_throttle=0)
    session.answers.reserve()  # an earlier request's answer is still due
    answer, _made, _held = answer_for(session)
    assert answer.stream(len(broker_frame())) is None
