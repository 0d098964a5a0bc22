"""DescribeConfigs (key 32, v1–4): the configs of the tenant's topics (and groups); names RW.

ACL: DESCRIBE_CONFIGS on the TOPIC or GROUP (`config_resources`); BROKER, BROKER_LOGGER and other
resource types are answered here with CLUSTER_AUTHORIZATION_FAILED (fleet settings are not a
tenant's business). The fleet's broker settings never show by name: a value that comes from a
broker setting is reported as a default (DEFAULT_CONFIG), and synonyms other than the
resource's own override (the broker properties feeding it) are dropped. `include_synonyms` and
`include_documentation` (v3+) pass through. Runs on the event loop.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import FilterContext, Outcome
from gateway.kafka.filters.common import entity
from gateway.kafka.filters.config_resources import config_outcome, split_resources
from gateway.kafka.filters.topic_configs import TENANT_SOURCES, shown_source

API_KEY = 32
MIN_VERSION = 1
MAX_VERSION = 4


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    def refused(resource: Any, error: ErrorCode, message: str | None) -> Any:
        return entity(
            ctx,
            "DescribeConfigsResult",
            error_code=error,
            error_message=message,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
            configs=(),
        )

    split = split_resources(ctx, request.resources, "DESCRIBE_CONFIGS", refused)
    return config_outcome(ctx, request, split, "DescribeConfigsResponse", "results", _shown)


def _shown(result: Any) -> Any:
    return dataclasses.replace(result, configs=tuple(_entry(c) for c in result.configs))


def _entry(config: Any) -> Any:
    synonyms = tuple(
        s for s in config.synonyms if s.source in TENANT_SOURCES and s.name == config.name
    )
    return dataclasses.replace(
        config, config_source=shown_source(config.config_source), synonyms=synonyms
    )
