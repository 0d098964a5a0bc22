"""`infra/up`'s billing stream (`infra.billing_loop`, `pier billing stream`) behind a running
gateway: a tenant's traffic shows in the tenant store while the stream runs, equal to what the
gateway metered to `__usage` (read independently with librdkafka); killed, the stream is started
again by the launcher's backoff and still counts every record once. Both start a Spark JVM and
take minutes on a busy machine: slow (`--run-slow`); in CI, tests/integration/test_up_cluster.py
checks infra/up's stream rolls the demo tenant's gateway traffic up, and
tests/integration/billing/test_stream.py the stream's exact totals across a kill."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from sqlalchemy.exc import OperationalError

from infra.billing_loop import BillingStreamProcess, start_billing_stream
from tenancy.billing_store import UsageFilter
from tenancy.usage import HOUR_MS, TrafficRecord
from tests.e2e.billing.test_gateway_usage import _read_usage
from tests.gateway_stack import GatewayStack
from tests.polling import wait_until

pytestmark = pytest.mark.e2e
VALUE = b"v" * 1000
STREAM_S = 300  # a Spark JVM starting on a busy 2-core machine, then a few micro-batches


def _produce(stack: GatewayStack, count: int) -> None:
    producer = Producer(stack.client_config("acme", "PLAIN", acks="all"))
    for i in range(count):
        producer.produce("orders", VALUE, f"key-{i}".encode())
    assert producer.flush(30) == 0


def _stored(stack: GatewayStack) -> int:
    """acme's bytes_in to `orders` in the store, over the hours around now."""
    now = int(time.time() * 1000)
    wanted = UsageFilter("acme", now - now % HOUR_MS - 2 * HOUR_MS, now + HOUR_MS, topic="orders")
    with stack.store() as store:
        return sum(int(row["bytes_in"]) for row in store.usage(wanted))


def _metered(bootstrap: str) -> int:
    """acme's bytes_in to `orders` as the gateway wrote it to `__usage`, each id once."""
    records = {r.id: r for r in _read_usage(bootstrap) if isinstance(r, TrafficRecord)}
    return sum(r.bytes_in for r in records.values() if r.tenant == "acme" and r.topic == "orders")


def _shows(stack: GatewayStack, stream: BillingStreamProcess, at_least: int) -> int:
    """Poll until the store holds what `__usage` holds (≥ `at_least` bytes), restarting a dead
    stream as `infra/up`'s watcher does."""
    assert stack.broker is not None
    bootstrap = stack.broker.bootstrap

    def equal() -> int:
        stream.restart_if_due()
        stored = _stored(stack)
        return stored if stored >= at_least and stored == _metered(bootstrap) else 0

    try:
        return wait_until(
            equal, what="the stream's rollups equal to __usage", timeout=STREAM_S, interval=1.0,
            retry_on=(OperationalError,),  # SQLite busy while the stream commits
        )  # fmt: skip
    except AssertionError as error:
        raise AssertionError(
            f"{error}; stream log:\n{stream.log_path.read_text()[-3000:]}"
        ) from error


def _stream(stack: GatewayStack, tmp_path: Path) -> BillingStreamProcess:
    assert stack.broker is not None
    return start_billing_stream(
        tmp_path / "billing.log", stack.db_url, stack.broker.bootstrap, tmp_path / "state",
        trigger="2s",
    )  # fmt: skip


@pytest.mark.slow  # 100-200 s here (a Spark JVM); CI covers the path with test_up_cluster
def test_a_tenants_usage_shows_while_the_stream_runs(tmp_path: Path) -> None:
    with GatewayStack(tmp_path / "stack") as stack:
        stream = _stream(stack, tmp_path)  # may start before `__usage` exists: then restarted
        try:
            _produce(stack, 200)
            _shows(stack, stream, 200 * len(VALUE))
            assert stream.process.poll() is None
        finally:
            stream.stop()
        assert stream.process.returncode == 0, stream.log_path.read_text()[-3000:]


@pytest.mark.slow
def test_a_killed_stream_is_restarted_and_counts_each_record_once(tmp_path: Path) -> None:
    with GatewayStack(tmp_path / "stack") as stack:
        stream = _stream(stack, tmp_path)
        try:
            _produce(stack, 100)
            first = _shows(stack, stream, 100 * len(VALUE))
            stream.process.kill()  # SIGKILL: no clean stop, checkpoint and ledger as they are
            stream.process.wait(60)
            _produce(stack, 100)
            assert _shows(stack, stream, first + 100 * len(VALUE)) > first
            assert stream.restarts >= 1
        finally:
            stream.stop()
