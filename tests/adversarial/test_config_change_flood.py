"""A tenant that changes its topic's config as fast as it can: in ZooKeeper mode each change writes
a `/config/changes` notice every broker reads and acts on, kept 15 minutes, each broker listing
all of them at every new one. Measured straight at a broker (one confluent-kafka AdminClient,
`retention.ms` alternating): 232 changes a second, 4,650 notices in 20 s. Kafka has no quota for
it (KIP-599 counts partitions).

Defended (`gateway/quotas/config_changes.py`, gateway setting `tenant.config.changes.per.second`,
5 a second after a burst of 50): past the burst every AlterConfigs / IncrementalAlterConfigs
answer carries a throttle (and the connection is muted that long), so the tenant's changes follow
the rate; nothing is refused, `validate_only` is free, and another tenant is not slowed. Real
broker and `pier gateway`, raw IncrementalAlterConfigs v1 frames."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from brokers.wire.entities import make, request_module, response_module
from gateway.quotas.config_changes import DEFAULT_BURST
from tests.e2e.gateway.sasl_wire import login
from tests.e2e.raw_wire import RawConnection
from tests.gateway_stack import GatewayStack

pytestmark = pytest.mark.e2e
ALTER = 44  # IncrementalAlterConfigs
TOPIC_RESOURCE, SET = 2, 0
TOPIC = "tuned"
PAST_BURST = 8


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with GatewayStack(Path(tmp_path_factory.mktemp("config-flood"))) as s:
        for tenant in ("acme", "bolt"):
            admin = AdminClient(s.client_config(tenant))
            for future in admin.create_topics([NewTopic(TOPIC, 1, 1)]).values():
                future.result(30)
        yield s


def alter(wire: RawConnection, retention_ms: int, *, validate_only: bool = False) -> Any:
    """One IncrementalAlterConfigs v1 setting the topic's `retention.ms`."""
    module = request_module(ALTER, 1)
    config = make(
        module,
        "AlterableConfig",
        name="retention.ms",
        config_operation=SET,
        value=str(retention_ms),
    )
    resource = make(
        module, "AlterConfigsResource", resource_type=TOPIC_RESOURCE, resource_name=TOPIC,
        configs=(config,),
    )  # fmt: skip
    request = make(
        module,
        "IncrementalAlterConfigsRequest",
        resources=(resource,),
        validate_only=validate_only,
    )
    answer = wire.call(request, response_module(ALTER, 1).IncrementalAlterConfigsResponse, 30)
    assert [r.error_code for r in answer.responses] == [0], answer
    return answer


def throttle_ms(answer: Any) -> float:
    return float(answer.throttle_time.total_seconds() * 1000)


def test_config_changes_past_the_burst_are_throttled_and_other_tenants_are_not(
    stack: GatewayStack,
) -> None:
    with login(stack, "acme") as acme, login(stack, "bolt") as bolt:
        checks = [throttle_ms(alter(acme, 60_000, validate_only=True)) for _ in range(60)]
        assert checks == [0.0] * 60, "validate_only changes nothing and costs nothing"
        burst = [throttle_ms(alter(acme, 60_000 + i % 2)) for i in range(DEFAULT_BURST)]
        assert burst == [0.0] * DEFAULT_BURST, "a burst goes through unslowed"
        past = [throttle_ms(alter(acme, 60_000 + i % 2)) for i in range(PAST_BURST)]
        assert all(t > 0 for t in past), past
        assert throttle_ms(alter(bolt, 70_000)) == 0.0, "another tenant is not slowed"
