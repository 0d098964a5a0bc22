"""`GatewayMetrics`: per-request counters kept per tenant and API (their children looked up once)
count each tenant and API on its own."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from gateway.kafka.metrics import GatewayMetrics


def test_requests_and_bytes_are_counted_per_tenant_and_api() -> None:
    registry = CollectorRegistry()
    metrics = GatewayMetrics(registry)
    for _ in range(3):
        metrics.request("acme", 0)
    metrics.request("acme", 1)
    metrics.request("globex", 0)
    metrics.bytes_in("acme", 100)
    metrics.bytes_in("acme", 50)
    metrics.bytes_in("globex", 7)
    metrics.bytes_out("acme", 11)
    metrics.spliced("globex", 13)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert value("pier_gateway_requests_total", tenant="acme", api="0") == 3
    assert value("pier_gateway_requests_total", tenant="acme", api="1") == 1
    assert value("pier_gateway_requests_total", tenant="globex", api="0") == 1
    assert value("pier_gateway_bytes_in_total", tenant="acme") == 150
    assert value("pier_gateway_bytes_in_total", tenant="globex") == 7
    assert value("pier_gateway_bytes_out_total", tenant="acme") == 11
    assert value("pier_gateway_bytes_out_total", tenant="globex") is None
    assert value("pier_gateway_spliced_bytes_total", tenant="globex") == 13
