"""Usage metering of the gateway: counters per request, `__usage` traffic windows and storage
samples (the record contract is `tenancy.usage`; docs/design.md, "A tenant's request").

`UsageMeter` counts on the event loop's hot path; `UsageWriter` cuts it and writes `__usage` with
an idempotent producer; `StorageSampler` sizes tenant partitions on their leaders. Everything runs
on the gateway's one event loop; nothing here is thread-safe.
"""

from gateway.metering.meter import UsageKey, UsageMeter
from gateway.metering.storage_sampler import StorageSampler
from gateway.metering.writer import UsageWriter

__all__ = ["StorageSampler", "UsageKey", "UsageMeter", "UsageWriter"]
