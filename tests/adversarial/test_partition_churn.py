"""A tenant that creates and deletes topics as fast as it can: each partition created or deleted is
ZooKeeper writes, a controller decision and a metadata round on the brokers, and a tenant's churn
slowed every tenant's produce on the fleet (docs/benchmarks.md, topic churn: a bystander's p99
rose 1.1 → 5.0 ms). KIP-599's `controller_mutation_rate` bounds it only where a quota is set (the
default plans set none), and only from CreateTopics v6 / DeleteTopics v5 on; the tenant's
partition limit bounds what it holds, not how fast it churns.

Defended (`gateway/quotas/tenant_pacing.py`, gateway setting
`tenant.partition.mutations.per.second`, here 1 a second: a burst of 20, then 30 s of backlog):
on every version and with no quota set, past the burst every answer carries a throttle (and its
connection is muted), and once the tenant is 30 s past its burst the next topic is refused
THROTTLING_QUOTA_EXCEEDED, also on a fresh connection; another tenant is not slowed. Real broker
and `pier gateway`, raw CreateTopics v5 and DeleteTopics v4 frames (versions KIP-599 only
throttles)."""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from brokers.wire.entities import make, request_module, response_module
from tests.e2e.gateway.http_stack import http_gateway_stack, http_url, wait_http
from tests.e2e.gateway.sasl_wire import login
from tests.e2e.raw_wire import RawConnection
from tests.gateway_stack import GatewayStack

pytestmark = pytest.mark.e2e
CREATE, CREATE_VERSION = 19, 5
DELETE, DELETE_VERSION = 20, 4
THROTTLING_QUOTA_EXCEEDED = 89
SLOW = {"tenant.partition.mutations.per.second": "1"}  # a burst of 20, then 30 of backlog
ANSWERED_WITHIN_S = 20


def create(wire: RawConnection, name: str, partitions: int) -> Any:
    module = request_module(CREATE, CREATE_VERSION)
    topic = make(
        module,
        "CreatableTopic",
        name=name,
        num_partitions=partitions,
        replication_factor=1,
        assignments=(),
        configs=(),
    )
    request = make(module, "CreateTopicsRequest", topics=(topic,), timeout=timedelta(seconds=30))
    answer = wire.call(request, response_module(CREATE, CREATE_VERSION).CreateTopicsResponse, 30)
    return answer, answer.topics[0].error_code


def delete(wire: RawConnection, *names: str) -> Any:
    module = request_module(DELETE, DELETE_VERSION)
    request = make(module, "DeleteTopicsRequest", topic_names=names, timeout=timedelta(seconds=30))
    answer = wire.call(request, response_module(DELETE, DELETE_VERSION).DeleteTopicsResponse, 30)
    return answer, [r.error_code for r in answer.responses]


def throttle_ms(answer: Any) -> float:
    return float(answer.throttle_time.total_seconds() * 1000)


def test_topic_churn_past_the_burst_is_throttled_then_refused(tmp_path: Path) -> None:
    """The tenant's partition limit is 100 (the free plan's): it churns within it. A deleted
    topic costs its partitions (one if the gateway cannot tell yet): the numbers hold either
    way, with the time the requests take (under 40 s) paid back."""
    with GatewayStack(tmp_path, gateway_settings=SLOW) as stack:
        with login(stack, "acme") as acme:
            for name in ("a", "b"):  # 20 partitions: the burst
                answer, code = create(acme, name, 10)
                assert (code, throttle_ms(answer)) == (0, 0.0)
            answer, code = create(acme, "c", 10)  # 10 s of the 1-a-second rate past it
            assert code == 0 and throttle_ms(answer) > 0
        with login(stack, "bolt") as bolt:
            answer, code = create(bolt, "quiet", 1)
            assert (code, throttle_ms(answer)) == (0, 0.0), "another tenant is not slowed"
        with login(stack, "acme") as fresh:  # not muted, but paced: under 30 s past the burst
            answer, codes = delete(fresh, "a")
            assert codes == [0] and throttle_ms(answer) > 0
        with login(stack, "acme") as fresh:  # still under 30 s past it: taken, throttled
            answer, code = create(fresh, "more", 60)
            assert code == 0 and throttle_ms(answer) > 30_000
        with login(stack, "acme") as fresh:  # 70 s or more past it: refused, any version
            answer, code = create(fresh, "refused", 1)
            assert code == THROTTLING_QUOTA_EXCEEDED and throttle_ms(answer) > 30_000
        with login(stack, "acme") as fresh:  # (a throttled answer mutes its connection)
            _answer, codes = delete(fresh, "more")
            assert codes == [THROTTLING_QUOTA_EXCEEDED]


def http_create(
    stack: GatewayStack, base: str, tenant: str, name: str, partitions: int
) -> tuple[int, dict[str, str]]:
    """POST /v3/clusters/{cluster}/topics as `tenant`: the HTTP status and headers. The answer
    must come within 20 s (a request is never held for its throttle)."""
    creds = stack.credentials[tenant]
    auth = base64.b64encode(f"{creds.key_id}:{creds.secret}".encode()).decode()
    headers = {"Authorization": f"Basic {auth}", "Content-Type": "application/json"}
    with urllib.request.urlopen(
        urllib.request.Request(base + "/v3/clusters", headers=headers), timeout=30
    ) as response:
        cluster = json.load(response)["data"][0]["cluster_id"]
    body = json.dumps({"topic_name": name, "partitions_count": partitions}).encode()
    request = urllib.request.Request(
        f"{base}/v3/clusters/{cluster}/topics", data=body, headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=ANSWERED_WITHIN_S) as response:
            return int(response.status), dict(response.headers)
    except urllib.error.HTTPError as refused:
        return refused.code, dict(refused.headers)


def test_over_http_a_topic_past_the_burst_is_refused_at_once(tmp_path: Path) -> None:
    """One pacing per tenant, whichever way it comes: past the burst over Kafka, the HTTP API
    (which holds no request waiting for a throttle to pass) answers 429 at once, saying when to
    come back; the HTTP request that spends the burst far past it is answered, not held for its
    throttle (it was held 40 s: past the client's 20 s)."""
    with http_gateway_stack(tmp_path, SLOW) as stack:
        wait_http(stack)
        base = http_url(stack)
        with login(stack, "acme") as acme:
            answer, code = create(acme, "a", 40)  # the burst, and 20 s past it
            assert code == 0 and throttle_ms(answer) > 0
        status, headers = http_create(stack, base, "acme", "b", 1)
        assert status == 429 and 1 <= int(headers["Retry-After"]) <= 20, headers
        assert http_create(stack, base, "bolt", "b", 1)[0] == 201, "another tenant is not slowed"
        assert http_create(stack, base, "bolt", "wide", 60)[0] == 201  # 41 s past its burst
        status, headers = http_create(stack, base, "bolt", "c", 1)
        assert status == 429 and 30 <= int(headers["Retry-After"]) <= 41, headers
