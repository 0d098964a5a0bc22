"""The bounds of client connections, fed bytes with an injected clock: the frame reader's budget
hook and preallocated buffers, `ByteBudget`, `ConnectionLimits`, the `ConnectionGuard`'s caps and
sweep, and `ClientConnection`'s deadlines and back pressure over a fake transport."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from gateway.config import GatewayConfig, GatewayConfigError
from gateway.kafka.byte_budget import ByteBudget, Charge
from gateway.kafka.client_connection import ClientConnection
from gateway.kafka.connection_guard import ConnectionGuard
from gateway.kafka.connection_limits import ConnectionLimits, parse_overrides
from gateway.kafka.exchange import Slot
from gateway.kafka.frames import FrameReader
from gateway.kafka.metrics import GatewayMetrics
from gateway.kafka.services import SessionServices
from gateway.kafka.session import Channel, Session
from gateway.kafka.upstream import Upstream

pytestmark = pytest.mark.unit
MiB = 1024 * 1024


def framed(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


class Deferred:
    """A `defer` that keeps the callbacks until `run()` (the loop's call_soon, by hand)."""

    def __init__(self) -> None:
        self.calls: list[Callable[[], None]] = []

    def __call__(self, callback: Callable[[], None]) -> None:
        self.calls.append(callback)

    def run(self) -> None:
        calls, self.calls = self.calls, []
        for call in calls:
            call()


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- the frame reader --------------------------------------------------------------------------
def test_a_frame_that_spans_chunks_is_read_into_one_buffer_of_its_announced_size() -> None:
    body = bytes(range(256)) * 40
    stream = framed(body)
    reader = FrameReader(1 << 20)
    frames = [
        f for part in (stream[:100], stream[100:5000], stream[5000:]) for f in reader.feed(part)
    ]
    assert [bytes(f) for f in frames] == [body]
    assert isinstance(frames[0].obj, bytearray) and len(frames[0].obj) == len(body)
    assert frames[0].readonly


def test_frames_whole_in_the_shared_scratch_are_copied_out_and_the_scratch_is_not_kept() -> None:
    small, large = b"s" * 10, b"L" * 1000
    reader = FrameReader(1 << 20)
    target = reader.get_buffer()
    chunk = framed(small) + framed(large)
    target[: len(chunk)] = chunk
    frames = list(reader.updated(len(chunk)))
    assert [bytes(f) for f in frames] == [small, large]
    assert all(f.obj is not target.obj for f in frames)  # the scratch is every reader's
    assert reader.buffered == 0 and not reader.partial
    target[: len(chunk)] = b"x" * len(chunk)  # the next read overwrites the scratch
    assert [bytes(f) for f in frames] == [small, large]


def test_the_rest_of_a_large_frame_is_read_straight_into_its_own_buffer() -> None:
    body = bytes(range(256)) * 1024  # 256 KiB: larger than the scratch
    stream = framed(body)
    reader = FrameReader(1 << 20)
    first = reader.get_buffer()
    first[:1000] = stream[:1000]
    assert list(reader.updated(1000)) == []
    rest = reader.get_buffer()  # the frame's own buffer, exactly the rest of its body
    assert rest.obj is not first.obj and len(rest) == len(body) - 996
    rest[:] = stream[1000:]
    (frame,) = reader.updated(len(rest))
    assert frame.obj is rest.obj and frame.readonly and bytes(frame) == body


def test_a_frame_the_budget_refuses_waits_with_its_bytes_held_until_admitted() -> None:
    answers = iter([True, False, True])
    asked: list[int] = []

    def admit(size: int) -> bool:
        asked.append(size)
        return next(answers)

    reader = FrameReader(1000, admit)
    stream = framed(b"one!") + framed(b"two!!") + framed(b"three")
    assert [bytes(f) for f in reader.feed(stream[:12])] == [b"one!"]
    assert reader.waiting and reader.partial
    assert list(reader.feed(stream[12:])) == []  # held, not read
    assert asked == [4, 5]
    assert [bytes(f) for f in reader.admitted()] == [b"two!!", b"three"]
    assert asked == [4, 5, 5] and not reader.waiting and reader.buffered == 0


# -- the byte budget ---------------------------------------------------------------------------
def test_the_budget_never_holds_more_than_its_capacity_and_grants_waiters_in_order() -> None:
    defer = Deferred()
    budget = ByteBudget(100, defer=defer)
    first = budget.try_take(60)
    assert first is not None and budget.try_take(50) is None
    granted: list[Charge] = []
    budget.wait(50, granted.append)
    budget.wait(10, granted.append)
    assert budget.try_take(1) is None  # no one jumps the queue
    first.release()
    first.release()  # once only
    assert budget.used == 60 and defer.calls  # both granted, delivered later
    defer.run()
    assert [c.size for c in granted] == [50, 10]
    for charge in granted:
        charge.release()
    assert budget.used == 0


def test_an_empty_budget_takes_one_frame_larger_than_itself_and_a_cancelled_grant_is_given_back() -> (
    None
):
    defer = Deferred()
    budget = ByteBudget(100, defer=defer)
    big = budget.try_take(150)
    assert big is not None
    granted: list[Charge] = []
    waiter = budget.wait(10, granted.append)
    big.release()
    waiter.cancel()
    defer.run()
    assert granted == [] and budget.used == 0


# -- limits ------------------------------------------------------------------------------------
def test_the_frame_limit_follows_the_tenant_and_never_exceeds_the_budget() -> None:
    limits = ConnectionLimits(queued_max_request_bytes=32 * MiB)
    assert limits.frame_limit(MiB) == 2 * MiB
    assert limits.frame_limit(100_000) == 100_000 + MiB
    assert limits.frame_limit(100 * MiB) == 32 * MiB
    assert ConnectionLimits(socket_request_max_bytes=MiB).frame_limit(MiB) == MiB


def test_per_ip_overrides_parse_as_kafka_writes_them() -> None:
    overrides = parse_overrides("10.0.0.1:5, ::1:7,")
    assert overrides == {"10.0.0.1": 5, "::1": 7}
    limits = ConnectionLimits(max_connections_per_ip=3, max_connections_per_ip_overrides=overrides)
    assert (limits.per_ip("10.0.0.1"), limits.per_ip("10.0.0.2")) == (5, 3)
    with pytest.raises(ValueError):
        parse_overrides("nohost")


# -- the guard ---------------------------------------------------------------------------------
class FakeGuarded:
    def __init__(self, due: str | None = None) -> None:
        self.due = due
        self.closed: list[str] = []

    def overdue(self, now: float) -> str | None:
        return self.due

    def close_for(self, reason: str, detail: str) -> None:
        self.closed.append(reason)


def closures(registry: CollectorRegistry, reason: str) -> float:
    value = registry.get_sample_value("pier_gateway_connection_close_total", {"reason": reason})
    return value or 0.0


def test_the_guard_caps_connections_per_address_and_before_login() -> None:
    guard = ConnectionGuard(
        ConnectionLimits(max_connections_per_ip=2, max_unauthenticated_connections=3)
    )
    a, b, c, d = (FakeGuarded() for _ in range(4))
    assert guard.admit(a, "10.0.0.1") is None and guard.admit(b, "10.0.0.1") is None
    assert guard.admit(c, "10.0.0.1") == "max_connections_per_ip"
    assert guard.admit(c, "10.0.0.2") is None
    assert guard.admit(d, "10.0.0.3") == "max_unauthenticated_connections"
    guard.authenticated(a)
    assert guard.admit(d, "10.0.0.3") is None  # a logged in: room before login again
    guard.gone(b, "10.0.0.1")
    assert guard.admit(FakeGuarded(), "10.0.0.1") is None


def test_the_sweep_closes_overdue_connections_and_counts_them() -> None:
    registry = CollectorRegistry()
    guard = ConnectionGuard(registry=registry)
    late, fine = FakeGuarded("authentication_timeout"), FakeGuarded()
    guard.admit(late, "h")
    guard.admit(fine, "h")
    assert guard.sweep(0.0) == 1
    assert late.closed == ["authentication_timeout"] and fine.closed == []


# -- the client connection over a fake transport ------------------------------------------------
class FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.reading = True
        self.aborted = False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 5555) if name == "peername" else default

    def is_reading(self) -> bool:
        return self.reading

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_closing(self) -> bool:
        return self.aborted

    def abort(self) -> None:
        self.aborted = True

    def close(self) -> None:
        self.aborted = True

    def write(self, data: Any) -> None:
        pass

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass


class FakeSession:
    """Keeps the frames it is given with their charges; `answer()` gives the oldest one back."""

    def __init__(self, max_request_bytes: int) -> None:
        self.frames: list[tuple[bytes, Charge | None]] = []
        self.closed: list[str] = []
        self.tenant: Any = None
        self.blocked = False
        self._limits = SimpleNamespace(max_request_bytes=max_request_bytes)

    def log_in(self, connection: ClientConnection, tenant_id: str) -> None:
        self.tenant = SimpleNamespace(tenant=SimpleNamespace(limits=self._limits))
        connection.authenticated(tenant_id)

    def on_frame(self, frame: memoryview, charge: Charge | None = None) -> None:
        self.frames.append((bytes(frame), charge))

    def answer(self) -> None:
        _frame, charge = self.frames.pop(0)
        assert charge is not None
        charge.release()

    @property
    def idle(self) -> bool:
        return not self.frames

    def refuse(self, reason: str) -> None:
        self.closed.append(reason)

    def close(self, reason: str) -> None:
        self.closed.append(reason)

    def connection_lost(self) -> None:
        self.closed.append("lost")

    def client_blocked(self, blocked: bool) -> None:
        self.blocked = blocked


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    asyncio.set_event_loop(None)
    loop.close()


def connect(
    guard: ConnectionGuard, max_request_bytes: int = MiB
) -> tuple[ClientConnection, FakeSession, FakeTransport]:
    session = FakeSession(max_request_bytes)
    connection = ClientConnection(lambda _c, _p: cast(Any, session), guard)
    transport = FakeTransport()
    connection.connection_made(transport)
    return connection, session, transport


def test_deadlines_authentication_then_a_stalled_frame_then_idleness(
    loop: asyncio.AbstractEventLoop,
) -> None:
    clock = Clock()
    limits = ConnectionLimits(
        authentication_timeout_s=1.0, frame_read_timeout_s=2.0, connections_max_idle_s=5.0
    )
    guard = ConnectionGuard(limits, clock=clock)
    never, _s, _t = connect(guard)
    clock.now += 0.9
    assert never.overdue(clock.now) is None
    clock.now += 0.2
    assert never.overdue(clock.now) == "authentication_timeout"

    connection, session, transport = connect(guard)
    session.log_in(connection, "acme")
    connection.data_received(framed(b"complete")[:6])  # a frame begins and stops
    clock.now += 1.9
    assert connection.overdue(clock.now) is None
    transport.pause_reading()  # not read by the gateway's own choice: not a stalled frame
    clock.now += 1.0
    assert connection.overdue(clock.now) is None
    transport.resume_reading()
    clock.now += 2.1
    assert connection.overdue(clock.now) == "frame_read_timeout"
    connection.data_received(framed(b"complete")[6:])
    session.answer()
    clock.now += 4.9
    assert connection.overdue(clock.now) is None
    clock.now += 0.2
    assert connection.overdue(clock.now) == "idle"


def test_a_tenant_over_its_budget_stops_reading_until_an_answer_gives_bytes_back(
    loop: asyncio.AbstractEventLoop,
) -> None:
    defer = Deferred()
    guard = ConnectionGuard(ConnectionLimits(queued_max_request_bytes=1000), defer=defer)
    first, first_session, _ = connect(guard)
    second, second_session, second_transport = connect(guard)
    first_session.log_in(first, "acme")
    second_session.log_in(second, "acme")
    first.data_received(framed(b"a" * 700))
    second.data_received(framed(b"b" * 600))
    assert guard.tenant_budget("acme").used == 700
    assert second_session.frames == [] and not second_transport.reading
    assert guard.tenant_budget("other").try_take(1000) is not None  # other tenants unaffected
    first_session.answer()
    defer.run()
    assert [f for f, _c in second_session.frames] == [b"b" * 600]
    assert second_transport.reading and guard.tenant_budget("acme").used == 600


def test_before_login_a_full_buffer_pool_closes_the_connection_at_once(
    loop: asyncio.AbstractEventLoop,
) -> None:
    registry = CollectorRegistry()
    guard = ConnectionGuard(
        ConnectionLimits(unauthenticated_buffer_max_bytes=1000), registry=registry
    )
    holder, _s, _t = connect(guard)
    holder.data_received(struct.pack(">i", 800) + b"x" * 10)  # 800 announced: taken
    late, session, transport = connect(guard)
    late.data_received(struct.pack(">i", 300))
    assert transport.aborted and "unauthenticated_buffer_full" in session.closed
    assert closures(registry, "unauthenticated_buffer_full") == 1
    late.connection_lost(None)
    holder.connection_lost(None)
    assert guard.unauthenticated_bytes.used == 0 and guard.unauthenticated_count == 0


def test_a_frame_over_the_tenants_limit_is_refused_before_its_body(
    loop: asyncio.AbstractEventLoop,
) -> None:
    guard = ConnectionGuard(ConnectionLimits(queued_max_request_bytes=64 * MiB))
    connection, session, _t = connect(guard, max_request_bytes=100_000)
    session.log_in(connection, "acme")
    connection.data_received(struct.pack(">i", 100_000 + MiB + 1))
    assert session.closed and session.closed[0].startswith("frame:")
    assert guard.tenant_budget("acme").used == 0


# -- the session gives charges back when answers leave ------------------------------------------
class SlotSession(Session):
    """Reserves an answer slot per frame (as a request path does) and answers on demand."""

    def __init__(self, channel: Channel) -> None:
        services = cast(SessionServices, type("Services", (), {"authenticator": None})())
        metrics = GatewayMetrics(CollectorRegistry())
        super().__init__(services, channel, peer_host="127.0.0.1", node_id=0, metrics=metrics)
        self.slots: list[Slot] = []

    def _handle(self, frame: memoryview) -> Any:
        self.slots.append(self._reserve_slot())
        return None


class SilentChannel(Channel):
    def write(self, parts: Any) -> None:
        pass

    def pause(self) -> None:
        pass

    def resume(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_requests_bytes_are_given_back_when_its_answer_leaves_in_turn(
    loop: asyncio.AbstractEventLoop,
) -> None:
    budget = ByteBudget(1000, defer=Deferred())
    session = SlotSession(SilentChannel())
    for size in (100, 200, 300):
        charge = budget.try_take(size)
        assert charge is not None
        session.on_frame(memoryview(b"x"), charge)
    assert budget.used == 600
    session.answers.complete(session.slots[1], [b"second"])  # ready, but waits for the first
    assert budget.used == 600
    session.answers.complete(session.slots[0], None)  # no answer (acks=0): still done
    session.on_upstream_progress()  # what `finish` calls: the pump settles what has left
    assert budget.used == 300
    session.close("client disconnected")  # the third is given back with the connection
    assert budget.used == 0
    late = budget.try_take(50)
    session.on_frame(memoryview(b"y"), late)  # after close: given back at once
    assert budget.used == 0


def test_a_client_that_stops_reading_its_answers_stops_the_answers_from_the_broker(
    loop: asyncio.AbstractEventLoop,
) -> None:
    connection, session, transport = connect(ConnectionGuard())
    connection.pause_writing()
    assert session.blocked and not transport.reading  # nor are its requests read
    connection.resume_writing()
    assert not session.blocked and transport.reading
    upstream = Upstream("broker:9092", lambda _reason: None)
    broker_side = FakeTransport()
    upstream.connection_made(broker_side)
    upstream.hold_answers(True)
    assert not broker_side.reading
    upstream.hold_answers(False)
    assert broker_side.reading


def test_the_settings_are_read_from_the_gateway_properties_with_kafkas_names() -> None:
    properties = {
        "authentication.timeout.ms": "1500",
        "max.unauthenticated.connections": "7",
        "unauthenticated.buffer.max.bytes": str(2 * MiB),
        "max.connections.per.ip": "9",
        "max.connections.per.ip.overrides": "10.1.1.1:50",
        "frame.read.timeout.ms": "2500",
        "connections.max.idle.ms": "60000",
        "queued.max.request.bytes": str(8 * MiB),
    }
    config = GatewayConfig(bootstrap="b:9092", db_url="sqlite://", port=9092, properties=properties)
    limits = ConnectionLimits.from_settings(config.setting, config.connections_per_ip_overrides)
    assert limits == ConnectionLimits(
        authentication_timeout_s=1.5,
        max_unauthenticated_connections=7,
        unauthenticated_buffer_max_bytes=2 * MiB,
        max_connections_per_ip=9,
        max_connections_per_ip_overrides={"10.1.1.1": 50},
        frame_read_timeout_s=2.5,
        connections_max_idle_s=60.0,
        queued_max_request_bytes=8 * MiB,
    )
    defaults = GatewayConfig(bootstrap="b:9092", db_url="sqlite://", port=9092)
    assert ConnectionLimits.from_settings(defaults.setting, {}) == ConnectionLimits()
    for bad in ({"max.connections.per.ip.overrides": "10.1.1.1"}, {"max.connections.per.ip": "0"}):
        with pytest.raises(GatewayConfigError):
            GatewayConfig(bootstrap="b:9092", db_url="sqlite://", port=9092, properties=bad)


def test_a_closed_connection_whose_client_never_reads_its_last_answers_is_aborted(
    loop: asyncio.AbstractEventLoop,
) -> None:
    clock = Clock()
    guard = ConnectionGuard(ConnectionLimits(frame_read_timeout_s=2.0), clock=clock)
    connection, _session, transport = connect(guard)
    transport.close = lambda: None  # type: ignore[method-assign]  # flushing, never done
    connection.close()
    clock.now += 1.9
    assert connection.overdue(clock.now) is None
    clock.now += 0.2
    assert connection.overdue(clock.now) == "close_timeout"
    connection.close_for("close_timeout", "deadline passed")
    assert transport.aborted


def test_a_client_that_never_reads_its_answers_is_idle_however_much_it_has_pending(
    loop: asyncio.AbstractEventLoop,
) -> None:
    clock = Clock()
    guard = ConnectionGuard(ConnectionLimits(connections_max_idle_s=5.0), clock=clock)
    connection, session, _transport = connect(guard)
    session.log_in(connection, "acme")
    connection.data_received(framed(b"a request"))  # pending: not idle by itself
    connection.pause_writing()
    clock.now += 4.9
    assert connection.overdue(clock.now) is None
    connection.resume_writing()
    connection.pause_writing()  # it read a little: the clock starts again
    clock.now += 4.9
    assert connection.overdue(clock.now) is None
    clock.now += 0.2
    assert connection.overdue(clock.now) == "idle"


def test_an_address_backing_off_after_failed_logins_gets_new_connections_at_a_rate() -> None:
    now = [100.0]
    failing = {"10.0.0.9"}
    guard = ConnectionGuard(
        ConnectionLimits(failed_login_connection_rate=3, max_connections_per_ip=1000),
        clock=lambda: now[0],
        failing=failing.__contains__,
    )
    verdicts = [guard.admit(FakeGuarded(), "10.0.0.9") for _ in range(5)]
    assert verdicts == [
        None,
        None,
        None,
        "failed_login_connection_rate",
        "failed_login_connection_rate",
    ]
    assert all(guard.admit(FakeGuarded(), "10.0.0.1") is None for _ in range(20)), "clean: no rate"
    now[0] += 0.34
    assert guard.admit(FakeGuarded(), "10.0.0.9") is None  # a token back a third of a second on
    assert guard.admit(FakeGuarded(), "10.0.0.9") == "failed_login_connection_rate"
    failing.clear()
    assert guard.admit(FakeGuarded(), "10.0.0.9") is None, "its backoff over: no rate"
