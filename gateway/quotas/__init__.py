"""Client quotas at the gateway, as Kafka enforces them per broker (docs/gateway-options.md,
"What it enforces").

Owns: Kafka's windowed rate (`SampledRate`) and throttle arithmetic, per-quota rate sensors keyed
by the matched quota entity (`ClientQuotaManager`, with a tenant-wide `TenantAggregate`), the
`controller_mutation_rate` token buckets (`ControllerMutationQuota`), the resolved quotas of
connections kept current by the change feed (`QuotaBook`), and their Prometheus metrics. Every
function takes the time as `now_ms`; nothing here reads a clock. Runs on the event loop; not
thread-safe (the pure arithmetic in `throttle` is safe anywhere).
"""

from gateway.quotas.client_quotas import (
    INACTIVE_SENSOR_EXPIRY_MS,
    RATE_QUOTAS,
    ClientQuotaManager,
    RateSensors,
    SensorKey,
    TenantAggregate,
)
from gateway.quotas.metrics import QuotaMetrics
from gateway.quotas.mutation_quota import (
    STRICT_SINCE,
    THROTTLING_QUOTA_EXCEEDED,
    ControllerMutationQuota,
    MutationBudget,
    TokenBucket,
    is_strict,
)
from gateway.quotas.quota_book import ClientQuotas, QuotaBook, QuotasNotLoaded, QuotaSource
from gateway.quotas.rate import SampledRate
from gateway.quotas.throttle import (
    max_value_in_window,
    request_percentage,
    throttle_time_ms,
    token_throttle_time_ms,
)

__all__ = [
    "INACTIVE_SENSOR_EXPIRY_MS",
    "RATE_QUOTAS",
    "STRICT_SINCE",
    "THROTTLING_QUOTA_EXCEEDED",
    "ClientQuotaManager",
    "ClientQuotas",
    "ControllerMutationQuota",
    "MutationBudget",
    "QuotaBook",
    "QuotaMetrics",
    "QuotaSource",
    "QuotasNotLoaded",
    "RateSensors",
    "SampledRate",
    "SensorKey",
    "TenantAggregate",
    "TokenBucket",
    "is_strict",
    "max_value_in_window",
    "request_percentage",
    "throttle_time_ms",
    "token_throttle_time_ms",
]
