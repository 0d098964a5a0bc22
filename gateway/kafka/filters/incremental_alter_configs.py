"""IncrementalAlterConfigs (key 44, v0–1, KIP-339): SET/DELETE/APPEND/SUBTRACT config overrides
of the tenant's topics (and groups); names RW.

ACL: ALTER_CONFIGS on the TOPIC or GROUP (`config_resources`); BROKER, BROKER_LOGGER and other
resource types are answered here with CLUSTER_AUTHORIZATION_FAILED and never forwarded. Every
config named must pass the tenant config allowlist (`topic_configs`); a DELETE (op 1) is checked
by name only, since it restores the default. `validate_only` passes through, uncharged; each topic change is paced per tenant
(`tenant.config.changes.per.second`: past it THROTTLING_QUOTA_EXCEEDED for the resource).
Runs on the event loop.
"""

from __future__ import annotations

from typing import Any

from gateway.kafka.filter import FilterContext, Outcome
from gateway.kafka.filters.config_resources import config_outcome, split_alters

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1
DELETE = 1


async def handle(ctx: FilterContext, request: Any) -> Outcome:
    def configs(resource: Any) -> list[tuple[str, str | None]]:
        return [
            (c.name, None if c.config_operation == DELETE else c.value) for c in resource.configs
        ]

    split = split_alters(ctx, request, configs)
    return config_outcome(ctx, request, split, "IncrementalAlterConfigsResponse", "responses")
