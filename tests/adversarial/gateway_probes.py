"""What the adversarial tests read of a running gateway: its Prometheus samples and its memory.

`gateway_metric(stack, name, **labels)` sums the samples of `name` whose labels include `labels`
(the gateway's `--metrics-port` must be on); `rss_bytes(stack)` is the gateway process's VmRSS.
Blocking; pytest's main thread.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.gateway_stack import GatewayStack

KiB = 1024


def gateway_metric(stack: GatewayStack, name: str, **labels: str) -> float:
    assert stack.gateway is not None and stack.gateway.metrics_port is not None
    url = f"http://127.0.0.1:{stack.gateway.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name and labels.items() <= sample.labels.items()
    )


def rss_bytes(stack: GatewayStack) -> int:
    assert stack.gateway is not None
    for line in Path(f"/proc/{stack.gateway.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * KiB
    raise AssertionError("no VmRSS")
