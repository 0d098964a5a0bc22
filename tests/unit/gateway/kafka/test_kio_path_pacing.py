"""The kio path mutes a connection as soon as a request earns a throttle (the controller-mutation
quota, the pacing of config changes), before the request is forwarded: requests pipelined behind
it are not taken, so they cannot pass the pacing before the first answer mutes the connection.
The real `Session` pump and `kio_path.handle` with the real `TenantPacing`; the filter,
policy and upstream are stand-ins (the broker never answers)."""

from __future__ import annotations

import asyncio
import struct
import time
from types import SimpleNamespace
from typing import Any, cast

import pytest
from prometheus_client import CollectorRegistry

from brokers.wire.entities import make, request_module
from brokers.wire.messages import encode_entity
from gateway.kafka import kio_path
from gateway.kafka.exchange import Exchange
from gateway.kafka.filter import FilterContext, Forward
from gateway.kafka.filters import FILTERS
from gateway.kafka.metrics import GatewayMetrics
from gateway.kafka.services import QuotaSubject, SessionServices
from gateway.kafka.session import Session
from gateway.quotas.tenant_pacing import CONFIG_CHANGES_BURST, TenantPacing
from tests.unit.gateway.kafka.test_session_throttle import FakeChannel

pytestmark = pytest.mark.unit
ALTER = 44
RESOURCES = 10  # per request: the burst is spent by the fifth


class ChargingFilter:
    """Forwards every request, charging each resource as the config filters do."""

    API_KEY, MIN_VERSION, MAX_VERSION = ALTER, 0, 1

    @staticmethod
    async def handle(ctx: FilterContext, request: Any) -> Forward:
        for _ in request.resources:
            ctx.mutations.record(1)
        return Forward(request, lambda answer: answer)


class Policy:
    def __init__(self, pacing: TenantPacing) -> None:
        self.pacing = pacing

    def mutation_budget(self, subject: QuotaSubject, api_key: int, version: int) -> Any:
        return self.pacing.budget(subject.tenant, _now_ms())

    def mutation_throttle(self, subject: QuotaSubject, api_key: int) -> int:
        return self.pacing.throttle_ms(subject.tenant, _now_ms())

    def meter(self, *args: Any, **counters: Any) -> None:
        return None

    def charge_request_time(self, *args: Any) -> int:
        return 0


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class PipelinedSession(Session):
    forwarded = 0
    tenant = cast(Any, SimpleNamespace(namespace=None, tenant=SimpleNamespace(limits=None)))

    def _handle(self, frame: memoryview) -> Any:
        subject = QuotaSubject("acme", "sa", "")
        header = memoryview(struct.pack(">hhih", ALTER, 1, 1, -1) + b"\x00")  # header v2
        exchange = Exchange(ALTER, 1, 1, header, True, subject, time.perf_counter())
        exchange.slot = self._reserve_slot()
        return kio_path.handle(self, exchange, frame, 0)

    def forward(self, exchange: Exchange, body: Any, size: int, on_response: Any) -> None:
        self.forwarded += 1  # the broker never answers


def _request() -> memoryview:
    module = request_module(ALTER, 1)
    config = make(module, "AlterableConfig", name="retention.ms", config_operation=0, value="1")
    resources = tuple(
        make(
            module,
            "AlterConfigsResource",
            resource_type=2,
            resource_name=f"t{i}",
            configs=(config,),
        )
        for i in range(RESOURCES)
    )
    request = make(
        module, "IncrementalAlterConfigsRequest", resources=resources, validate_only=False
    )
    return memoryview(encode_entity(request))


def test_pipelined_config_changes_stop_at_the_first_throttle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(FILTERS, ALTER, ChargingFilter)
    asyncio.run(_pipelined())


async def _pipelined() -> None:
    services = cast(
        SessionServices,
        type("Services", (), {"authenticator": None, "fleet": None, "partitions": None,
                              "names": None, "members": None})(),
    )  # fmt: skip
    channel = FakeChannel()
    session = PipelinedSession(
        services, channel, peer_host="h", node_id=0, metrics=GatewayMetrics(CollectorRegistry())
    )
    session.policy = cast(Any, Policy(TenantPacing.for_config_changes()))
    session.upstream = cast(Any, type("U", (), {"in_flight": 0, "unsent_bytes": 0})())
    body = _request()
    for _ in range(100):  # 1,000 changes pipelined on one connection
        session.on_frame(body)
        await asyncio.sleep(0)
    first_throttled = CONFIG_CHANGES_BURST // RESOURCES + 1  # the one that passes the burst
    assert session.forwarded == first_throttled
    assert channel.paused, "muted: the rest wait in the connection, not read"
