"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs through the gateway: TOPIC/GROUP
names both ways, fleet resources refused locally, ACL and allowlist refusals, broker settings
hidden from synonyms."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from brokers.wire.errors import ErrorCode
from gateway.kafka.filters import alter_configs, describe_configs, incremental_alter_configs
from tests.unit.gateway.filters.harness import (
    FakeAccess,
    FakeBudget,
    context,
    forwarded,
    replied,
    request,
    response,
    run,
    versions,
)

pytestmark = pytest.mark.unit
TOPIC, BROKER, GROUP = 2, 4, 32


def _describe(version: int, *resources: tuple[int, str]) -> Any:
    return request(
        describe_configs,
        version,
        "DescribeConfigsRequest",
        include_synonyms=True,
        include_documentation=True,
        resources=tuple(
            request(
                describe_configs,
                version,
                "DescribeConfigsResource",
                resource_type=t,
                resource_name=n,
                configuration_keys=None,
            )
            for t, n in resources
        ),
    )


def _described(version: int, name: str) -> Any:
    synonyms = tuple(
        response(describe_configs, version, "DescribeConfigsSynonym", name=n, value="1", source=s)
        for n, s in (("retention.ms", 1), ("log.retention.ms", 4), ("log.retention.hours", 5))
    )
    config = response(
        describe_configs,
        version,
        "DescribeConfigsResourceResult",
        name="retention.ms",
        value="1",
        read_only=False,
        config_source=4,
        is_sensitive=False,
        synonyms=synonyms,
        config_type=5,
        documentation="doc",
    )
    return response(
        describe_configs,
        version,
        "DescribeConfigsResult",
        error_code=ErrorCode.none,
        error_message=None,
        resource_type=TOPIC,
        resource_name=name,
        configs=(config,),
    )


@pytest.mark.parametrize("version", list(versions(describe_configs)))
def test_describe_configs(version: int) -> None:
    ctx = context(
        describe_configs, version, access=FakeAccess(denied={("DESCRIBE_CONFIGS", "TOPIC", "no")})
    )
    req = _describe(version, (TOPIC, "a"), (BROKER, "1"), (TOPIC, "no"), (GROUP, "g"))
    outcome = forwarded(asyncio.run(run(describe_configs, ctx, req)))
    assert [(r.resource_type, r.resource_name) for r in outcome.request.resources] == [
        (TOPIC, "acme_a"),
        (GROUP, "acme_g"),
    ]
    answer = response(
        describe_configs,
        version,
        "DescribeConfigsResponse",
        results=(_described(version, "bolt_a"), _described(version, "acme_a")),
    )
    shown = outcome.on_response(answer).results
    assert [(r.resource_name, r.error_code) for r in shown] == [
        ("a", ErrorCode.none),
        ("1", ErrorCode.cluster_authorization_failed),
        ("no", ErrorCode.topic_authorization_failed),
    ]  # the group got no answer
    config = shown[0].configs[0]
    assert config.config_source == 5
    assert [s.name for s in config.synonyms] == ["retention.ms"]


def test_only_fleet_resources_are_answered_locally() -> None:
    ctx = context(describe_configs, 4)
    answer = replied(asyncio.run(run(describe_configs, ctx, _describe(4, (BROKER, ""), (8, "1")))))
    assert [r.error_code for r in answer.results] == [ErrorCode.cluster_authorization_failed] * 2


def _resource(
    module: Any, version: int, rtype: int, name: str, configs: list[tuple[str, int, str | None]]
) -> Any:
    return request(
        module,
        version,
        "AlterConfigsResource",
        resource_type=rtype,
        resource_name=name,
        configs=tuple(
            request(module, version, "AlterableConfig", name=n, value=v, **_operation(module, op))
            for n, op, v in configs
        ),
    )


def _operation(module: Any, op: int) -> dict[str, int]:
    """IncrementalAlterConfigs names an operation per config; AlterConfigs has none."""
    return {"config_operation": op} if module is incremental_alter_configs else {}


ALTERS = [(m, v) for m in (alter_configs, incremental_alter_configs) for v in versions(m)]


@pytest.mark.parametrize(("module", "version"), ALTERS)
def test_alters_check_acl_and_allowlist(module: Any, version: int) -> None:
    ctx = context(module, version, access=FakeAccess(denied={("ALTER_CONFIGS", "GROUP", "g")}))
    name = "AlterConfigsRequest" if module is alter_configs else "IncrementalAlterConfigsRequest"
    resources = (
        _resource(module, version, TOPIC, "a", [("retention.ms", 0, "1000")]),
        _resource(module, version, TOPIC, "p", [("log.dirs", 0, "/tmp")]),
        _resource(module, version, TOPIC, "s", [("segment.bytes", 0, "100")]),
        _resource(module, version, GROUP, "g", []),
        _resource(module, version, BROKER, "1", [("retention.ms", 0, "1")]),
        _resource(module, version, TOPIC, "d", [("segment.bytes", 1, None)]),
    )
    outcome = forwarded(
        asyncio.run(
            run(
                module,
                ctx,
                request(module, version, name, resources=resources, validate_only=False),
            )
        )
    )
    expected = ["acme_a", "acme_d"]  # a null value: the brokers refuse it on AlterConfigs
    assert [r.resource_name for r in outcome.request.resources] == expected
    answered = tuple(
        response(
            module,
            version,
            "AlterConfigsResourceResponse",
            error_code=ErrorCode.none,
            error_message=None,
            resource_type=TOPIC,
            resource_name=n,
        )
        for n in ("bolt_x", "acme_a")
    )
    shown = outcome.on_response(
        response(module, version, name.replace("Request", "Response"), responses=answered)
    )
    assert [(r.resource_name, r.error_code) for r in shown.responses][:5] == [
        ("a", ErrorCode.none),
        ("p", ErrorCode.policy_violation),
        ("s", ErrorCode.invalid_config),
        ("g", ErrorCode.group_authorization_failed),
        ("1", ErrorCode.cluster_authorization_failed),
    ]


@pytest.mark.parametrize(("module", "version"), ALTERS)
def test_topic_config_changes_are_charged_and_refused_past_the_tenant_s_pacing(
    module: Any, version: int
) -> None:
    name = "AlterConfigsRequest" if module is alter_configs else "IncrementalAlterConfigsRequest"
    resources = (
        _resource(module, version, TOPIC, "a", [("retention.ms", 0, "1000")]),
        _resource(module, version, GROUP, "g", []),
        _resource(module, version, BROKER, "1", [("retention.ms", 0, "1")]),
    )
    budget = FakeBudget()
    ctx = context(module, version, budget=budget)
    sent = forwarded(asyncio.run(run(module, ctx, request(
        module, version, name, resources=resources, validate_only=False
    ))))  # fmt: skip
    assert [r.resource_name for r in sent.request.resources] == ["acme_a", "acme_g"]
    assert budget.charged == 1, "each topic forwarded is a change; groups and refusals are not"
    checked = forwarded(asyncio.run(run(module, context(module, version, budget=budget), request(
        module, version, name, resources=resources[:1], validate_only=True
    ))))  # fmt: skip
    assert checked.request.validate_only and budget.charged == 1, "validate_only is free"
    over = context(module, version, budget=FakeBudget(over=True))
    refused = replied(asyncio.run(run(module, over, request(
        module, version, name, resources=resources[:1], validate_only=False
    ))))  # fmt: skip
    (answer,) = refused.responses
    assert answer.error_code == ErrorCode.throttling_quota_exceeded
    assert "tenant.config.changes.per.second" in answer.error_message
