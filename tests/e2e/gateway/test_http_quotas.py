"""Quotas and limits over HTTP are the Kafka path's (issue 15): produce requests over the
producer byte rate are answered no faster than the quota; a request larger than the quota allows
in a whole window gets 429 with `Retry-After` at once; a request over the tenant's
`max_request_bytes` gets 413. The stack's quota window is short (2 samples of 1 s) so the test
is quick; the bound is the issue's ("never answered faster than the quota").
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tenancy.domain import DEFAULT_LIMITS
from tests.e2e.gateway.http_stack import TenantHttp, http_gateway_stack, wait_http
from tests.gateway_stack import OPERATOR, GatewayStack

pytestmark = pytest.mark.e2e
QUOTA = 5000  # bytes/s for bolt's service account
WINDOW = {"quota.window.num": "2", "quota.window.size.seconds": "1"}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with http_gateway_stack(Path(tmp_path_factory.mktemp("http-quotas")), WINDOW) as running:
        wait_http(running)
        yield running


def body(size: int) -> bytes:
    return json.dumps({"value": {"type": "STRING", "data": "x" * size}}).encode()


def test_produce_is_never_answered_faster_than_the_quota(stack: GatewayStack) -> None:
    creds = stack.credentials["bolt"]
    stack.set_quota("bolt", creds.service_account, None, producer_byte_rate=QUOTA)
    bolt = TenantHttp(stack, creds)
    bolt.create_topic("limited", 1)
    url = f"{bolt.base}{bolt.cluster}/topics/limited/records"
    headers = {"Content-Type": "application/json"}
    sent = 0
    started = time.monotonic()
    for _ in range(40):
        payload = body(460)
        answer = bolt.session.post(url, data=payload, headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        sent += len(payload)
    elapsed = time.monotonic() - started
    # One window's worth may pass before the first throttle; the rest waits for the quota.
    least = (sent - QUOTA) / QUOTA
    assert elapsed >= least * 0.9, (
        f"{sent} bytes in {elapsed:.2f} s = {sent / elapsed:.0f} B/s against a quota of {QUOTA} B/s"
        f" (at least {least:.2f} s expected)"
    )
    too_big = body(QUOTA + 100)  # more than quota × (samples − 1) × window: can never fit
    refused = bolt.session.post(url, data=too_big, headers=headers, timeout=30)
    assert refused.status_code == 429, refused.text
    assert refused.json()["error_code"] == 42901
    assert refused.headers["Retry-After"] == "2"


def test_a_request_over_the_tenants_limit_is_413(stack: GatewayStack) -> None:
    with stack.store() as store:
        store.update_tenant(
            "acme",
            limits=dataclasses.replace(DEFAULT_LIMITS, max_request_bytes=2000),
            actor=OPERATOR,
        )
    acme = TenantHttp(stack, stack.credentials["acme"])
    acme.create_topic("small", 1)
    url = f"{acme.base}{acme.cluster}/topics/small/records"
    headers = {"Content-Type": "application/json"}

    def status(size: int) -> int:
        return int(acme.session.post(url, data=body(size), headers=headers, timeout=30).status_code)

    from tests.polling import wait_until

    wait_until(lambda: status(3000) == 413, what="the new limit reaches the gateway", timeout=15)
    assert status(1000) == 200
