"""A tenant that changes its topic's config as fast as it can: in ZooKeeper mode each change writes
a `/config/changes` notice every broker reads and acts on, kept 15 minutes, each broker listing
all of them at every new one. Measured straight at a broker (one confluent-kafka AdminClient,
`retention.ms` alternating): 232 changes a second, 4,650 notices in 20 s. Kafka has no quota for
it (KIP-599 counts partitions).

Defended (`gateway/quotas/tenant_pacing.py`, gateway setting `tenant.config.changes.per.second`,
5 a second after a burst of 50): past the burst every AlterConfigs / IncrementalAlterConfigs
answer carries a throttle (and the connection is muted from the moment it is earned), so the
tenant's changes follow the rate; `validate_only` is free and another tenant is not slowed. Once
the tenant is 30 s past its burst (one request naming many topics) the rest of its changes are
refused THROTTLING_QUOTA_EXCEEDED, also on a fresh connection. Real broker and `pier gateway`,
raw IncrementalAlterConfigs v1 frames."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from brokers.wire.entities import make, request_module, response_module
from gateway.quotas.tenant_pacing import CONFIG_CHANGES_BURST
from tests.e2e.gateway.sasl_wire import login
from tests.e2e.raw_wire import RawConnection
from tests.gateway_stack import GatewayStack

pytestmark = pytest.mark.e2e
ALTER = 44  # IncrementalAlterConfigs
TOPIC_RESOURCE, SET = 2, 0
THROTTLING_QUOTA_EXCEEDED = 89
TOPIC = "tuned"


TOPICS = tuple(f"t{i:02d}" for i in range(CONFIG_CHANGES_BURST + 40))


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayStack]:
    with GatewayStack(Path(tmp_path_factory.mktemp("config-flood"))) as s:
        for tenant, names in (("acme", TOPICS), ("bolt", (TOPIC,))):
            admin = AdminClient(s.client_config(tenant))
            for future in admin.create_topics([NewTopic(t, 1, 1) for t in names]).values():
                future.result(30)
        yield s


def alter(
    wire: RawConnection,
    retention_ms: int,
    *,
    validate_only: bool = False,
    topics: tuple[str, ...] = (TOPIC,),
) -> Any:
    """One IncrementalAlterConfigs v1 setting `retention.ms` of `topics`."""
    module = request_module(ALTER, 1)
    config = make(
        module,
        "AlterableConfig",
        name="retention.ms",
        config_operation=SET,
        value=str(retention_ms),
    )
    resources = tuple(
        make(
            module,
            "AlterConfigsResource",
            resource_type=TOPIC_RESOURCE,
            resource_name=topic,
            configs=(config,),
        )
        for topic in topics
    )
    request = make(
        module,
        "IncrementalAlterConfigsRequest",
        resources=resources,
        validate_only=validate_only,
    )
    return wire.call(request, response_module(ALTER, 1).IncrementalAlterConfigsResponse, 30)


def made(answer: Any) -> Any:
    """`answer`, whose every resource was changed (or checked)."""
    assert {r.error_code for r in answer.responses} == {0}, answer
    return answer


def throttle_ms(answer: Any) -> float:
    return float(answer.throttle_time.total_seconds() * 1000)


def test_config_changes_past_the_burst_are_throttled_and_other_tenants_are_not(
    stack: GatewayStack,
) -> None:
    burst, past = TOPICS[:CONFIG_CHANGES_BURST], TOPICS[CONFIG_CHANGES_BURST:]
    with login(stack, "acme") as acme, login(stack, "bolt") as bolt:
        for _ in range(5):
            checked = made(alter(acme, 60_000, validate_only=True, topics=TOPICS))
            assert throttle_ms(checked) == 0.0, "validate_only changes nothing and costs nothing"
        assert throttle_ms(made(alter(acme, 60_000, topics=burst))) == 0.0, "a burst goes through"
        # 40 changes past the burst at once: 8 s of the 5-a-second rate (less the time since)
        assert throttle_ms(made(alter(acme, 60_000, topics=past))) > 0
        assert throttle_ms(made(alter(bolt, 70_000))) == 0.0, "another tenant is not slowed"


SLOW = {"tenant.config.changes.per.second": "1"}  # a burst of 50, then 30 changes of backlog
MANY = tuple(f"t{i:02d}" for i in range(90))


def test_changes_past_the_backlog_are_refused_also_on_a_fresh_connection(tmp_path: Path) -> None:
    with GatewayStack(tmp_path, gateway_settings=SLOW) as s:
        admin = AdminClient(s.client_config("acme"))
        for future in admin.create_topics([NewTopic(t, 1, 1) for t in MANY]).values():
            future.result(30)
        with login(s, "acme") as first:
            answer = alter(first, 60_000, topics=MANY)
        codes = [r.error_code for r in answer.responses]
        assert codes == [0] * 81 + [THROTTLING_QUOTA_EXCEEDED] * 9, codes
        assert throttle_ms(answer) > 30_000
        with login(s, "acme") as fresh:
            again = alter(fresh, 70_000, topics=MANY[:1])
        assert [r.error_code for r in again.responses] == [THROTTLING_QUOTA_EXCEEDED]
