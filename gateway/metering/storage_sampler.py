"""Samples how many bytes each tenant partition holds on its leader, for billing and storage caps.

Owns: `StorageSampler`. Every `interval_s`: Metadata of all topics, then DescribeLogDirs to every
broker, then one `StorageSample` per tenant partition whose leader answered, handed to the writer.
`at_ms` is aligned down to the interval so every gateway sampling the same interval produces the
same ids and billing counts each sample once. A broker that does not answer is skipped for the
round (logged once until it answers again); its partitions keep their previous size in
`stored_bytes`, which sums the latest size of each of a tenant's partitions (deleted topics drop
out). Sample ids put the tenant next to the sampler id (`<sampler id>.<tenant>/<topic>/…`): the
topic in a sample is the tenant's own name, which two tenants may share. After each round
`on_round(started_ms, stored bytes per tenant)` is awaited: the storage ledger
(`gateway.storage_ledger`) settles the tenant store's count with it. The first round runs at
`start()` without writing samples (the interval's samples are another gateway's or the next
boundary's), so the ledger knows what tenants store before the first boundary.
Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from collections.abc import Awaitable, Callable

from brokers.client import Cluster, TopicPartition
from brokers.client.errors import ClientError
from brokers.client.idempotent_producer import wall_ms
from brokers.client.log_dirs import describe_log_dirs
from brokers.client.metadata import ClusterMetadata
from gateway.metering.writer import UsageWriter
from tenancy.usage import StorageSample, storage_id

log = logging.getLogger(__name__)
TenantTopic = Callable[[str], tuple[str, str] | None]  # fleet name → (tenant, tenant's name)
RoundDone = Callable[[int, dict[str, int]], Awaitable[None]]  # (started_ms, bytes per tenant)
_Where = tuple[str, str, int]  # (tenant, tenant's topic, partition)


class StorageSampler:
    def __init__(
        self,
        cluster: Cluster,
        writer: UsageWriter,
        *,
        tenant_topic: TenantTopic,
        interval_s: float = 60.0,
        sampler_id: str = "fleet",
        clock_ms: Callable[[], int] = wall_ms,
        on_round: RoundDone | None = None,
    ) -> None:
        self._cluster = cluster
        self._writer = writer
        self._tenant_topic = tenant_topic
        self._interval_ms = max(1, round(interval_s * 1000))
        self._sampler_id = sampler_id
        self._clock_ms = clock_ms
        self._on_round = on_round
        self._latest: dict[_Where, int] = {}
        self._by_tenant: dict[str, int] = {}
        self._silent: set[int] = set()
        self._task: asyncio.Task[None] | None = None

    def stored_bytes(self, tenant: str) -> int:
        return self._by_tenant.get(tenant, 0)

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="storage-sampler")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def sample(self, *, submit: bool = True) -> list[StorageSample]:
        """One round: sample, submit to the writer (unless not `submit`), update `stored_bytes`,
        tell `on_round`; returns the samples."""
        now = self._clock_ms()
        at_ms = now - now % self._interval_ms
        metadata = await self._cluster.metadata(refresh=True)
        sizes = await self._sizes_by_broker(metadata)
        samples = []
        for name, info in metadata.topics.items():
            owner = self._tenant_topic(name)
            if owner is None:
                continue
            tenant, topic = owner
            for index, partition in info.partitions.items():
                size = sizes.get(partition.leader, {}).get(TopicPartition(name, index))
                if size is not None:
                    sample_id = storage_id(self._sampler_id, tenant, topic, index, at_ms)
                    samples.append(StorageSample(sample_id, tenant, topic, index, size, at_ms))
        self._remember(metadata, samples)
        if submit:
            self._writer.submit(samples)
        if self._on_round is not None:
            await self._on_round(now, dict(self._by_tenant))
        return samples

    async def _sizes_by_broker(
        self, metadata: ClusterMetadata
    ) -> dict[int, dict[TopicPartition, int]]:
        nodes = sorted(metadata.brokers)
        answers = await asyncio.gather(
            *(describe_log_dirs(self._cluster, node_id=node) for node in nodes),
            return_exceptions=True,
        )
        sizes: dict[int, dict[TopicPartition, int]] = {}
        for node, answer in zip(nodes, answers, strict=True):
            if isinstance(answer, ClientError):
                if node not in self._silent:
                    log.warning("storage sample skipped broker=%d error=%s", node, answer)
                    self._silent.add(node)
            elif isinstance(answer, BaseException):
                raise answer
            else:
                self._silent.discard(node)
                sizes[node] = answer
        return sizes

    def _remember(self, metadata: ClusterMetadata, samples: list[StorageSample]) -> None:
        live = {owner for name in metadata.topics if (owner := self._tenant_topic(name))}
        self._latest = {w: size for w, size in self._latest.items() if (w[0], w[1]) in live}
        self._latest.update(((s.tenant, s.topic, s.partition), s.bytes) for s in samples)
        totals: dict[str, int] = defaultdict(int)
        for (tenant, _topic, _partition), size in self._latest.items():
            totals[tenant] += size
        self._by_tenant = dict(totals)

    async def _run(self) -> None:
        try:
            await self.sample(submit=False)
        except Exception:
            log.exception("first storage sample round failed")
        while True:
            now = self._clock_ms()
            await asyncio.sleep((self._interval_ms - now % self._interval_ms) / 1000)
            try:
                await self.sample()
            except Exception:  # the loop must outlive any one bad round
                log.exception("storage sample round failed")
