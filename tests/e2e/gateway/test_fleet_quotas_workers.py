"""A tenant's quota held across 2 gateways × 2 workers (issue 24's done condition; docs/gateway.md,
"Quotas across gateways"): two real `pier gateway --workers 2` processes on one ZooKeeper, one
tenant store and one broker, so four gateway ids (`<id>.w0`, `<id>.w1` of each) share the quota.

Producers (confluent-kafka, at least twelve, through both gateways, so most workers carry several
connections of the one quota sensor) each offer far more than the producer quota of their one
service account; producers are added until every one of the four workers carries produce traffic
of the tenant (the kernel's SO_REUSEPORT hash places each
connection; read from each worker's `pier_gateway_bytes_in` on its own metrics port). The bytes
the broker's log grows by over the measured span are the quota's worth ± 10 % (issue 24's target). Each worker alone
would grant the whole quota: with the fleet sharing off (no `zookeeper.connect`) this is ≈ 4×.
Measurement and window as in test_fleet_quotas.py (bytes from DescribeLogDirs; 3 × 1 s window).

It measured 0.93–0.955× alone and once 1.162× in a clean-clone CI run: not the load itself, but
several producers' connections on one worker, each throttled on its own by Kafka's formula (a
worker with 2 connections of the sensor ran at ≈ 1.2× its share). The sensors are now paced as a
whole (`gateway.quotas.client_quotas`), and the test starts 12 producers so that case is always
exercised (with the pacing off it measured 1.271×; with it 0.947–1.036× at load 14–29). A later
CI run measured 1.103×: Kafka's formula, then still added to the pacing, over-throttled after
the shares dropped and the silence came back as bursts; with the pacing alone 1.003–1.008×. It takes
95–165 s with the stack (a 30 s span, the warm-up, spreading and stopping the producers) and runs
in CI beside the 2-gateway test (test_fleet_quotas.py): it is issue 24's done condition.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from prometheus_client.parser import text_string_to_metric_families

from infra.gateway import GatewayProcess, start_gateway
from infra.probes import free_port, port_in_use
from tests.e2e.gateway.test_fleet_quotas import (
    BACKLOG_RECORDS,
    QUOTA,
    SETTINGS,
    SPAN_S,
    WARM_UP_S,
    Offer,
    config,
    fleet_chroot,
    log_bytes,
    service_account,
)
from tests.gateway_stack import TEST_GATEWAY_SETTINGS, Credentials, GatewayStack
from tests.polling import wait_until

__all__ = ["fleet_chroot"]  # the module fixture, shared with test_fleet_quotas.py
pytestmark = pytest.mark.e2e
TOLERANCE = 0.10  # issue 24: the quota ± 10 % over 30 s through 2 gateways x 2 workers
WORKERS = 2
MIN_PRODUCERS = 12  # ≈ 3 per worker: several connections of one sensor on one worker
MAX_PRODUCERS = 24  # P(a gateway's producers all hashed to one of its 2 workers) = 2 × 2^-12
SPREAD_TIMEOUT_S = 45.0


@dataclass
class Door:
    """One gateway (a supervisor with `WORKERS` workers) and its first metrics port."""

    process: GatewayProcess
    metrics_port: int

    def worker_bytes_in(self, tenant: str) -> list[float]:
        """Each worker's `pier_gateway_bytes_in` of `tenant` (worker k on metrics port + k)."""
        return [_bytes_in(self.metrics_port + k, tenant) for k in range(WORKERS)]


@dataclass
class Fleet2x2:
    stack: GatewayStack
    doors: tuple[Door, Door]


class CountingOffer(Offer):
    """An `Offer` that counts its acknowledged records."""

    delivered: int = 0

    def _delivered(self, error: KafkaError | None, message: object) -> None:
        super()._delivered(error, message)
        if error is None:
            self.delivered += 1


def _bytes_in(port: int, tenant: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        if family.name == "pier_gateway_bytes_in"
        for sample in family.samples
        if sample.name == "pier_gateway_bytes_in_total" and sample.labels.get("tenant") == tenant
    )


def _metrics_ports() -> int:
    """A port P with P .. P + WORKERS - 1 free (one per worker)."""
    for _ in range(100):
        port = free_port()
        if not any(port_in_use("127.0.0.1", port + k) for k in range(1, WORKERS)):
            return port
    raise RuntimeError("no block of free metrics ports")


def _supervisor_ready(process: GatewayProcess) -> bool:
    return "pier gateway ready" in process.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory, fleet_chroot: str) -> Iterator[Fleet2x2]:
    root = Path(tmp_path_factory.mktemp("fleet-2x2"))
    settings = {**SETTINGS, "zookeeper.connect": fleet_chroot, "workers": str(WORKERS)}
    first_metrics = _metrics_ports()
    with GatewayStack(root, gateway_settings=settings, gateway_metrics_port=first_metrics) as stack:
        assert stack.broker is not None and stack.gateway is not None
        second_metrics = _metrics_ports()
        second = start_gateway(
            root / "second",
            stack.broker.bootstrap,
            stack.db_url,
            node_ids=[stack.broker.node_id],
            metrics_port=second_metrics,
            properties={**TEST_GATEWAY_SETTINGS, **settings},
        )
        try:
            for process in (stack.gateway, second):
                wait_until(
                    lambda p=process: _supervisor_ready(p),  # type: ignore[misc]
                    what="every worker of a gateway ready",
                    timeout=60,
                )
            yield Fleet2x2(
                stack, (Door(stack.gateway, first_metrics), Door(second, second_metrics))
            )
        finally:
            second.stop()


def _producer(door: Door, creds: Credentials, name: str) -> Producer:
    return Producer(
        {
            **config(door.process, creds),
            "client.id": name,
            "acks": "all",
            "linger.ms": 5,
            "batch.size": 64_000,
            "queue.buffering.max.messages": BACKLOG_RECORDS,
        }
    )


def _all_bytes_in(fleet: Fleet2x2) -> list[float]:
    return [value for door in fleet.doors for value in door.worker_bytes_in("acme")]


def test_producers_on_two_gateways_of_two_workers_share_one_quota(fleet: Fleet2x2) -> None:
    creds = service_account(fleet.stack, "fleet-2x2")
    topic = "fleet-2x2"
    admin = AdminClient(config(fleet.doors[0].process, creds))
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    offers: list[CountingOffer] = []
    threads: list[threading.Thread] = []

    def add(door_index: int) -> None:
        offer = CountingOffer(_producer(fleet.doors[door_index], creds, f"p{len(offers)}"), topic)
        thread = threading.Thread(target=offer.run, name=f"offer-{len(offers)}")
        offers.append(offer)
        threads.append(thread)
        thread.start()

    before = _all_bytes_in(fleet)
    try:
        for index in range(MIN_PRODUCERS):
            add(index % 2)

        # Producers are added (one at a time, through a gateway with an idle worker, once the
        # last one has had a record acknowledged) until each of the 4 workers carries traffic.
        def spread() -> list[bool]:  # empty (falsy) until every worker carries traffic
            grown = [now > then for now, then in zip(_all_bytes_in(fleet), before, strict=True)]
            if all(grown):
                return grown
            assert len(offers) <= MAX_PRODUCERS, (
                f"workers without produce traffic after {len(offers)} producers: {grown}"
            )
            if all(offer.delivered for offer in offers):
                add(grown.index(False) // WORKERS)
            return []

        grown = wait_until(
            spread, what="produce traffic on every worker", timeout=SPREAD_TIMEOUT_S, interval=0.2
        )
        print(f"2x2: {len(offers)} producers reach all {len(grown)} workers")
        # Not a wait for state: the span to measure over starts once the warm-up is past.
        time.sleep(WARM_UP_S)
        held_before = [offer.held for offer in offers]
        span_bytes_in = _all_bytes_in(fleet)
        start_at, start_bytes = time.monotonic(), log_bytes(fleet.stack, topic)
        time.sleep(SPAN_S)
        end_at, end_bytes = time.monotonic(), log_bytes(fleet.stack, topic)
        after_bytes_in = _all_bytes_in(fleet)
    finally:
        for offer in offers:
            offer.stop.set()
        for thread in threads:
            thread.join(60)
    for offer, held in zip(offers, held_before, strict=True):
        assert not offer.errors, offer.errors[:3]
        assert offer.held > held, "a producer was not held back: it did not offer enough"
    shares = [end - start for end, start in zip(after_bytes_in, span_bytes_in, strict=True)]
    assert all(share > 0 for share in shares), f"a worker carried nothing in the span: {shares}"
    rate = (end_bytes - start_bytes) / (end_at - start_at)
    print(
        f"2x2: {rate / QUOTA:.3f} × the quota over {end_at - start_at:.1f} s; bytes in per "
        f"worker {[round(share / (end_at - start_at)) for share in shares]} B/s"
    )
    assert rate == pytest.approx(QUOTA, rel=TOLERANCE), f"{rate / QUOTA:.3f} × the quota"
