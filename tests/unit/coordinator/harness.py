"""Drive a GroupCoordinator without sockets: an in-memory offsets topic, a ManualClock, and helpers
that park JoinGroup/SyncGroup calls as tasks, so tests step time and watch futures complete."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from brokers.common.clock import ManualClock
from brokers.coordinator.config import GroupConfig
from brokers.coordinator.consumer_protocol import encode_subscription
from brokers.coordinator.errors import GroupError
from brokers.coordinator.group import Group, GroupState
from brokers.coordinator.group_coordinator import GroupCoordinator, SyncRequest
from brokers.coordinator.joining import JoinRequest
from brokers.coordinator.results import JoinResult, SyncResult
from brokers.records.batch import iter_headers, set_base_offset
from brokers.records.builder import read_batch

SESSION_MS = 10_000
REBALANCE_MS = 30_000


class MemoryOffsetsTopic:
    """`OffsetsTopic` over lists of batches; `fail_with` makes appends fail, `gate` holds them."""

    def __init__(self, partitions: int = 4) -> None:
        self.partitions = partitions
        self.logs: dict[int, list[bytes]] = {p: [] for p in range(partitions)}
        self.fail_with: GroupError | None = None
        self.gate: asyncio.Event | None = None
        self.append_calls = 0

    def partition_count(self) -> int:
        return self.partitions

    async def append(self, partition: int, batch: bytes) -> int:
        last, uncommitted = self.start_append(partition, batch)
        if uncommitted is not None:
            await uncommitted
        return last

    def start_append(
        self, partition: int, batch: bytes
    ) -> tuple[int, Coroutine[Any, Any, None] | None]:
        """Stored at once; with a `gate`, committed only once it opens (replication held)."""
        if self.fail_with is not None:
            raise self.fail_with
        log = self.logs[partition]
        last = -1
        for pos, header in iter_headers(batch):  # the coordinator appends a turn's batches at once
            base = sum(read_batch(b)[0].last_offset_delta + 1 for b in log)
            stored = bytearray(batch[pos : pos + header.size])
            set_base_offset(stored, 0, base)
            log.append(bytes(stored))
            last = base + header.last_offset_delta
        self.append_calls += 1
        return last, None if self.gate is None else self._committed(self.gate)

    async def _committed(self, gate: asyncio.Event) -> None:
        await gate.wait()

    def read_batches(self, partition: int, from_offset: int) -> Iterator[bytes]:
        return iter(list(self.logs[partition]))

    def high_watermark(self, partition: int) -> int:
        return sum(read_batch(b)[0].last_offset_delta + 1 for b in self.logs[partition])

    def records(self, partition: int) -> list[tuple[bytes | None, bytes | None]]:
        return [(r.key, r.value) for b in self.logs[partition] for r in read_batch(b)[1]]


def config(**changes: Any) -> GroupConfig:
    base: dict[str, Any] = {"initial_rebalance_delay_ms": 0}
    base.update(changes)
    return GroupConfig(**base)


def subscription(*topics: str) -> bytes:
    return encode_subscription(topics or ("t",))


def protocols(*names: str, topics: Sequence[str] = ("t",)) -> tuple[tuple[str, bytes], ...]:
    return tuple((name, subscription(*topics)) for name in (names or ("range",)))


def join_request(
    member_id: str = "",
    *,
    group: str = "g",
    instance: str | None = None,
    protos: tuple[tuple[str, bytes], ...] | None = None,
    protocol_type: str = "consumer",
    session_ms: int = SESSION_MS,
    rebalance_ms: int = REBALANCE_MS,
    require_known: bool = True,
    skip_assignment: bool = True,
) -> JoinRequest:
    return JoinRequest(
        group_id=group,
        member_id=member_id,
        group_instance_id=instance,
        protocol_type=protocol_type,
        protocols=protos if protos is not None else protocols(),
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        client_id="client",
        client_host="/127.0.0.1",
        require_known_member_id=require_known,
        supports_skip_assignment=skip_assignment,
    )


async def settle() -> None:
    """Let every ready task run until it parks again."""
    for _ in range(10):
        await asyncio.sleep(0)


@dataclass
class Driver:
    coordinator: GroupCoordinator
    clock: ManualClock
    topic: MemoryOffsetsTopic
    joins: dict[str, asyncio.Task[JoinResult]] = field(default_factory=dict)

    @property
    def group(self) -> Group:
        return self.coordinator.groups["g"]

    def state(self) -> GroupState:
        return self.group.state

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.coordinator.tick()

    async def start_join(self, request: JoinRequest) -> asyncio.Task[JoinResult]:
        task = asyncio.ensure_future(self.coordinator.join_group(request))
        await settle()
        return task

    async def new_member(self, **kwargs: Any) -> str:
        """The KIP-394 round trip: the member id a dynamic member is told to rejoin with."""
        result = await self.coordinator.join_group(join_request(**kwargs))
        assert result.error is not None and type(result.error).__name__ == "MemberIdRequiredError"
        return result.member_id

    async def start_sync(
        self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
        group: str = "g", instance: str | None = None,
    ) -> asyncio.Task[SyncResult]:  # fmt: skip
        request = SyncRequest(group, generation, member_id, instance, assignments=assignments)
        task = asyncio.ensure_future(self.coordinator.sync_group(request))
        await settle()
        return task

    async def stable_group(self, count: int, **kwargs: Any) -> list[JoinResult]:
        """`count` dynamic members joined, synced (assignment b"a-<member>") and Stable."""
        ids = [await self.new_member(**kwargs) for _ in range(count)]
        tasks = [await self.start_join(join_request(i, **kwargs)) for i in ids]
        self.advance(0)  # the initial delay; joins during it extend it once more
        self.advance(0)
        await settle()
        results = [t.result() for t in tasks]
        await self.sync_all(results)
        return results

    async def sync_all(self, results: list[JoinResult]) -> dict[str, SyncResult]:
        leader = next(r for r in results if r.members)
        assignment = {m.member_id: b"a-" + m.member_id.encode() for m in leader.members}
        tasks = {
            r.member_id: await self.start_sync(
                r.member_id, r.generation_id, assignment if r is leader else None
            )
            for r in results
        }
        await settle()
        return {member: task.result() for member, task in tasks.items()}


async def driver(
    topic: MemoryOffsetsTopic | None = None, clock: ManualClock | None = None, **changes: Any
) -> Driver:
    topic = topic or MemoryOffsetsTopic()
    clock = clock or ManualClock()
    coordinator = GroupCoordinator(config(**changes), topic, clock)
    await coordinator.load_partitions(range(topic.partitions))
    return Driver(coordinator, clock, topic)
