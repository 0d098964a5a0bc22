"""`QuotaMetrics`: throttle time and throttled responses per tenant and quota."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from gateway.quotas.metrics import QuotaMetrics

pytestmark = pytest.mark.unit


def test_throttles_are_counted_per_tenant_and_quota() -> None:
    registry = CollectorRegistry()
    metrics = QuotaMetrics(registry)
    metrics.throttled("acme", "producer_byte_rate", 250)
    metrics.throttled("acme", "producer_byte_rate", 750)
    metrics.throttled("acme", "request_percentage", 0)  # not throttled: not counted
    metrics.mutation_refused("acme", 2)
    metrics.sensors("producer_byte_rate", 3)
    labels = {"tenant": "acme", "quota": "producer_byte_rate"}
    assert registry.get_sample_value("pier_gateway_throttle_time_ms_total", labels) == 1000
    assert registry.get_sample_value("pier_gateway_throttled_responses_total", labels) == 2
    idle = {"tenant": "acme", "quota": "request_percentage"}
    assert registry.get_sample_value("pier_gateway_throttled_responses_total", idle) is None
    assert (
        registry.get_sample_value("pier_gateway_mutations_refused_total", {"tenant": "acme"}) == 2
    )
    assert (
        registry.get_sample_value("pier_gateway_quota_sensors", {"quota": "producer_byte_rate"})
        == 3
    )
