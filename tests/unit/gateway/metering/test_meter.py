"""UsageMeter: windows, counters, connection time split exactly at hour boundaries, ids that never
repeat, all-zero records skipped, and the bytes `tenancy.usage.encode` makes of its records match
the golden files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from gateway.metering import UsageKey, UsageMeter
from gateway.metering.pending import Entry, PartitionQueue
from tenancy.usage import HOUR_MS, encode

pytestmark = pytest.mark.unit
GOLDEN = Path(__file__).parents[3] / "golden" / "usage"
HOUR = 1764072000000  # 2025-11-25T12:00:00Z, an hour boundary
ORDERS = UsageKey("acme", "sa-0123456789", "checkout", "orders")
CONNECTION = UsageKey("acme", "sa-0123456789", "", None)


class Clock:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms

    def __call__(self) -> int:
        return self.now_ms


def meter_at(now_ms: int, incarnation: str = "9f3c2a") -> tuple[UsageMeter, Clock]:
    clock = Clock(now_ms)
    return UsageMeter("gw-1", incarnation, clock), clock


def test_counters_add_up_in_one_window() -> None:
    meter, _ = meter_at(HOUR)
    meter.record(ORDERS, bytes_in=100, requests=1)
    meter.record(ORDERS, bytes_in=50, bytes_out=7, requests=2, throttle_ms=30)
    (record,) = meter.cut(HOUR + 5000)
    assert (record.start_ms, record.end_ms) == (HOUR, HOUR + 5000)
    assert (record.bytes_in, record.bytes_out, record.requests, record.throttle_ms) == (
        150,
        7,
        3,
        30,
    )
    assert record.connection_ms == 0
    assert (record.tenant, record.topic, record.client_id) == ("acme", "orders", "checkout")


def test_windows_follow_each_other_and_reset() -> None:
    meter, _ = meter_at(HOUR)
    meter.record(ORDERS, requests=1)
    first = meter.cut(HOUR + 5000)
    meter.record(ORDERS, requests=4)
    (second,) = meter.cut(HOUR + 10_000)
    assert first[0].end_ms == second.start_ms == HOUR + 5000
    assert second.requests == 4


def test_all_zero_records_are_skipped() -> None:
    meter, _ = meter_at(HOUR)
    meter.record(ORDERS)
    assert meter.cut(HOUR + 5000) == []
    assert meter.cut(HOUR + 10_000) == []


def test_connection_time_accrues_per_open_connection_per_window() -> None:
    meter, clock = meter_at(HOUR)
    clock.now_ms = HOUR + 1000
    meter.connection_opened(CONNECTION)
    clock.now_ms = HOUR + 2000
    meter.connection_opened(CONNECTION)
    (first,) = meter.cut(HOUR + 5000)
    assert first.connection_ms == 4000 + 3000
    clock.now_ms = HOUR + 6000
    meter.connection_closed(CONNECTION)
    (second,) = meter.cut(HOUR + 10_000)
    assert second.connection_ms == 2 * 1000 + 4000
    clock.now_ms = HOUR + 12_000
    meter.connection_closed(CONNECTION)
    (third,) = meter.cut(HOUR + 15_000)
    assert third.connection_ms == 2000
    assert meter.cut(HOUR + 20_000) == []  # nothing open any more


def test_connection_keys_have_no_topic() -> None:
    meter, _ = meter_at(HOUR)
    with pytest.raises(ValueError, match="no topic"):
        meter.connection_opened(ORDERS)


def test_a_late_cut_splits_connection_time_exactly_at_the_hour() -> None:
    meter, _ = meter_at(HOUR + HOUR_MS - 3000)
    meter.connection_opened(CONNECTION)
    meter.record(ORDERS, bytes_out=10)
    records = meter.cut(HOUR + HOUR_MS + 2000)
    before = [r for r in records if r.end_ms == HOUR + HOUR_MS]
    after = [r for r in records if r.start_ms == HOUR + HOUR_MS]
    assert {r.topic: r.connection_ms for r in before} == {None: 3000, "orders": 0}
    assert [(r.topic, r.connection_ms, r.bytes_out) for r in after] == [(None, 2000, 0)]
    for record in records:
        encode(record)  # validates: no window crosses the boundary


def test_a_cut_exactly_at_the_hour_then_the_next_hour() -> None:
    meter, _ = meter_at(HOUR - 1000)
    meter.connection_opened(CONNECTION)
    (first,) = meter.cut(HOUR)
    (second,) = meter.cut(HOUR + 500)
    assert (first.start_ms, first.end_ms, first.connection_ms) == (HOUR - 1000, HOUR, 1000)
    assert (second.start_ms, second.end_ms, second.connection_ms) == (HOUR, HOUR + 500, 500)


def test_a_cut_hours_late_makes_one_window_per_hour() -> None:
    meter, _ = meter_at(HOUR)
    meter.connection_opened(CONNECTION)
    records = meter.cut(HOUR + 2 * HOUR_MS + 10)
    assert [(r.start_ms, r.end_ms, r.connection_ms) for r in records] == [
        (HOUR, HOUR + HOUR_MS, HOUR_MS),
        (HOUR + HOUR_MS, HOUR + 2 * HOUR_MS, HOUR_MS),
        (HOUR + 2 * HOUR_MS, HOUR + 2 * HOUR_MS + 10, 10),
    ]


def test_ids_never_repeat_within_an_incarnation() -> None:
    meter, _ = meter_at(HOUR)
    ids = []
    for window in range(1, 50):
        meter.record(ORDERS, requests=1)
        meter.record(UsageKey("acme", "sa-1", "c", None), requests=1)
        ids += [r.id for r in meter.cut(HOUR + window * 1000)]
    assert len(ids) == len(set(ids)) == 98
    assert all(i.startswith("gw-1/9f3c2a/") for i in ids)


def test_a_bad_gateway_id_is_refused_at_once() -> None:
    with pytest.raises(ValueError, match="gateway_id"):
        UsageMeter("gw/1", "x", Clock(HOUR))


def spend_sequences(meter: UsageMeter, count: int) -> None:
    for _ in range(count):  # each non-empty cut spends one sequence number
        meter.record(UsageKey("acme", "sa-0", "c", "warmup"), requests=1)
        meter.cut(meter.window_start_ms)


def test_records_encode_to_the_golden_bytes() -> None:
    meter, _ = meter_at(HOUR)
    spend_sequences(meter, 42)
    meter.record(ORDERS, bytes_in=1048576, bytes_out=2097152, requests=17, throttle_ms=250)
    (record,) = meter.cut(HOUR + 5000)
    # The golden record also carries connection time on a topic key, which the meter only
    # counts on topic-less keys: everything else is the meter's own.
    record = dataclasses.replace(record, connection_ms=5000)
    key, value = encode(record)
    assert value == (GOLDEN / "traffic.json").read_bytes()
    assert key == b"gw-1/9f3c2a/42"


def test_a_connection_only_record_encodes_to_the_golden_bytes() -> None:
    meter, _ = meter_at(HOUR + HOUR_MS - 5000)
    spend_sequences(meter, 43)
    meter.record(CONNECTION, requests=3)
    meter.connection_opened(CONNECTION)
    (record,) = meter.cut(HOUR + HOUR_MS)
    assert encode(record)[1] == (GOLDEN / "traffic_no_topic.json").read_bytes()


def test_pending_queue_keeps_a_failed_batch_as_it_was() -> None:
    queue = PartitionQueue()
    queue.waiting.extend(Entry(i, b"k%d" % i, b"v") for i in range(5))
    assert queue.next_batch(3)
    batch = queue.in_flight
    queue.settled(batch, written=False)
    queue.waiting.append(Entry(9, b"k9", b"v"))
    assert queue.next_batch(3) and queue.in_flight is batch
    assert not queue.droppable() or queue.oldest_arrival() == 3  # a batch being sent stays
    queue.settled(batch, written=True)
    assert [e.arrival for e in queue.waiting] == [3, 4, 9] and len(queue) == 3


def test_a_tenant_past_its_keys_in_a_window_is_counted_under_its_overflow_key() -> None:
    """A new client id or topic per request cannot grow the meter (or the records of a window)
    without bound: past `max_keys_per_tenant`, traffic is still counted, under one key."""
    from gateway.metering.meter import OVERFLOW_CLIENT_ID

    meter = UsageMeter("gw-1", "9f3c2a", lambda: HOUR, max_keys_per_tenant=3)
    for i in range(10):
        meter.record(UsageKey("acme", "sa-0123456789", f"client-{i}", "orders"), bytes_in=10)
    meter.record(UsageKey("bolt", "sa-0000000002", "other", None), bytes_in=5)  # bolt unaffected
    records = meter.cut(HOUR + 5000)
    acme = [r for r in records if r.tenant == "acme"]
    assert len(acme) == 4  # 3 keys, then the overflow key
    assert sum(r.bytes_in for r in acme) == 100  # nothing lost
    (overflow,) = [r for r in acme if r.client_id == OVERFLOW_CLIENT_ID]
    assert (overflow.bytes_in, overflow.topic) == (70, None)
    assert [r.bytes_in for r in records if r.tenant == "bolt"] == [5]
    meter.record(UsageKey("acme", "sa-0123456789", "client-new", "orders"), bytes_in=1)
    (fresh,) = meter.cut(HOUR + 10_000)  # a new window starts counting keys again
    assert fresh.client_id == "client-new"
