"""The follower side's fetchers: one `ReplicaFetcher` per leader broker (Kafka's
`ReplicaFetcherManager`, with one fetcher thread per source broker).

Owns: which fetcher follows which partition, the fetchers' asyncio tasks, and their leader
connections. Each fetcher has a `ChannelLeader` on its own `LeaderChannel` (records received in
place, no per-fetch buffers), opened lazily on the first request and reopened after a failure
(`ReconnectingLeader`), so `follow` never blocks and a dead leader only backs its partitions
off. Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from brokers.client.config import ClientConfig
from brokers.client.consumer import FetchPosition
from brokers.client.metadata import TopicPartition
from brokers.common.clock import Clock
from brokers.log.log import Log
from brokers.replication.fetch_answer import ReplicaFetched
from brokers.replication.fetcher import EpochAnswer, EpochQuery, LocalStartAnswer, ReplicaFetcher
from brokers.replication.leader_channel import LeaderChannel
from brokers.replication.leader_endpoint import ChannelLeader
from brokers.replication.tier_state import RemoteAuxSource


class ReconnectingLeader:
    """A `LeaderEndpoint` that (re)connects to `host:port` when it has no live connection."""

    def __init__(self, host: str, port: int, *, node_id: int, config: ClientConfig) -> None:
        self.address = (host, port)
        self._node_id = node_id
        self._config = config
        self._channel: LeaderChannel | None = None
        self._remote: ChannelLeader | None = None

    async def _leader(self) -> ChannelLeader:
        if self._channel is None or self._channel.closed or self._remote is None:
            await self.aclose()
            host, port = self.address
            config = self._config
            self._channel = await LeaderChannel.connect(
                host,
                port,
                client_id=config.client_id,
                timeout_s=config.connect_timeout_s,
                max_frame_bytes=config.max_response_bytes,
            )
            self._remote = ChannelLeader(
                self._channel, node_id=self._node_id, request_timeout_s=config.request_timeout_s
            )
        return self._remote

    async def fetch(
        self, positions: Mapping[TopicPartition, FetchPosition]
    ) -> Mapping[TopicPartition, ReplicaFetched]:
        return await (await self._leader()).fetch(positions)

    async def end_offsets(
        self, queries: Mapping[TopicPartition, EpochQuery]
    ) -> Mapping[TopicPartition, EpochAnswer]:
        return await (await self._leader()).end_offsets(queries)

    async def earliest_local(
        self, tp: TopicPartition, current_leader_epoch: int
    ) -> LocalStartAnswer:
        return await (await self._leader()).earliest_local(tp, current_leader_epoch)

    async def aclose(self) -> None:
        channel, self._channel, self._remote = self._channel, None, None
        if channel is not None:
            channel.close()


@dataclass(slots=True)
class _Running:
    fetcher: ReplicaFetcher
    endpoint: ReconnectingLeader
    task: asyncio.Task[None]
    partitions: set[TopicPartition]


class FetcherManager:
    def __init__(
        self,
        *,
        node_id: int,
        clock: Clock,
        on_high_watermark: Callable[[TopicPartition, int], None],
        client_config: ClientConfig | None = None,
        backoff_s: float = 1.0,
    ) -> None:
        self._node_id = node_id
        self._clock = clock
        self._on_high_watermark = on_high_watermark
        self._config = client_config or ClientConfig(client_id=f"pier-replica-{node_id}")
        self._backoff_s = backoff_s
        self._fetchers: dict[int, _Running] = {}
        self._remote_tier: RemoteAuxSource | None = None

    @property
    def remote_tier(self) -> RemoteAuxSource | None:
        return self._remote_tier

    @remote_tier.setter
    def remote_tier(self, source: RemoteAuxSource | None) -> None:
        """Tiered storage's wiring hands the fetchers the remote tier (`tier_state`)."""
        self._remote_tier = source
        for running in self._fetchers.values():
            running.fetcher.remote_tier = source

    def follow(
        self,
        tp: TopicPartition,
        log: Log,
        *,
        leader: int,
        address: tuple[str, int],
        leader_epoch: int,
        high_watermark: int,
    ) -> None:
        """Follow `tp` from broker `leader` (at `address`), leaving any other leader's fetcher."""
        self.unfollow(tp)
        running = self._fetchers.get(leader)
        if running is not None and running.endpoint.address != address:
            self._stop(leader)  # the broker moved: a new connection to its new address
            running = None
        if running is None:
            running = self._start(leader, address)
        running.fetcher.follow(tp, log, leader_epoch=leader_epoch, high_watermark=high_watermark)
        running.partitions.add(tp)

    def unfollow(self, tp: TopicPartition) -> None:
        for leader, running in list(self._fetchers.items()):
            if tp in running.partitions:
                running.fetcher.unfollow(tp)
                running.partitions.discard(tp)
                if not running.partitions:
                    self._stop(leader)

    def fetcher_for(self, tp: TopicPartition) -> ReplicaFetcher | None:
        return next((r.fetcher for r in self._fetchers.values() if tp in r.partitions), None)

    def _start(self, leader: int, address: tuple[str, int]) -> _Running:
        endpoint = ReconnectingLeader(*address, node_id=self._node_id, config=self._config)
        fetcher = ReplicaFetcher(
            endpoint,
            clock=self._clock,
            on_high_watermark=self._on_high_watermark,
            backoff_s=self._backoff_s,
            remote_tier=self._remote_tier,
        )
        task = asyncio.get_running_loop().create_task(fetcher.run())
        running = _Running(fetcher, endpoint, task, set())
        self._fetchers[leader] = running
        return running

    def _stop(self, leader: int) -> None:
        running = self._fetchers.pop(leader)
        running.fetcher.stop()
        running.task.add_done_callback(lambda _: asyncio.ensure_future(running.endpoint.aclose()))

    async def shutdown(self) -> None:
        """Stop every fetcher and close its connection (broker shutdown)."""
        stopping = list(self._fetchers.values())
        self._fetchers.clear()
        for running in stopping:
            running.fetcher.stop()
            running.task.cancel()  # a fetch parked on the leader may wait up to its max wait
        for running in stopping:
            with contextlib.suppress(asyncio.CancelledError):
                await running.task
            await running.endpoint.aclose()
