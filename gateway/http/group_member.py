"""One v2 consumer instance's membership in its consumer group, over the Kafka path's filters.

Owns: `GroupMember` — JoinGroup (with the KIP-394 member-id round), the range assignment when this
member leads (Kafka's `RangeAssignor`: per topic, partitions split in order over the members
subscribed to it, sorted by member id), SyncGroup, a heartbeat every third of the session
timeout, rejoining on REBALANCE_IN_PROGRESS / UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION, and
LeaveGroup at `stop()`. Every request goes through `kafka_call`, so the group is the tenant's
(prefixed), READ on the group is checked, and the consumer-protocol bytes are rewritten exactly
as for a Kafka client. `on_revoke` runs before a rejoin (the instance commits there when
auto-commit is on). Runs on the event loop in one task; not thread-safe.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from brokers.client import Cluster
from brokers.client.errors import ClientError
from brokers.wire.errors import ErrorCode
from gateway.http import kafka_requests as kr
from gateway.http.context import Caller
from gateway.http.errors import ApiError, from_kafka
from gateway.http.fleet_calls import any_broker, coordinator, kafka_call
from gateway.kafka.filters.consumer_protocol import (
    Assignment,
    MalformedConsumerProtocol,
    Subscription,
    build_assignment,
    build_subscription,
    parse_assignment,
    parse_subscription,
)

log = logging.getLogger("pier.gateway.http.group")
SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 30_000
REJOIN = frozenset(
    {ErrorCode.rebalance_in_progress, ErrorCode.unknown_member_id, ErrorCode.illegal_generation}
)
TP = tuple[str, int]


def range_assign(
    subscriptions: Mapping[str, Sequence[str]], partitions: Mapping[str, int]
) -> dict[str, list[TP]]:
    """Kafka's RangeAssignor over tenant topic names: {member: [(topic, partition)]}."""
    assigned: dict[str, list[TP]] = {member: [] for member in subscriptions}
    topics = sorted({t for topics in subscriptions.values() for t in topics})
    for topic in topics:
        members = sorted(m for m, wanted in subscriptions.items() if topic in wanted)
        count = partitions.get(topic, 0)
        if not members or count <= 0:
            continue
        share, extra = divmod(count, len(members))
        start = 0
        for index, member in enumerate(members):
            size = share + (1 if index < extra else 0)
            assigned[member].extend((topic, p) for p in range(start, start + size))
            start += size
    return assigned


class GroupMember:
    def __init__(
        self,
        caller: Callable[[], Caller],
        cluster: Cluster,
        group: str,
        topics: Sequence[str],
        *,
        on_revoke: Callable[[], Awaitable[None]] | None = None,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
    ) -> None:
        self._caller = caller
        self._cluster = cluster
        self.group = group
        self.topics = tuple(topics)
        self._on_revoke = on_revoke
        self._session_timeout_ms = session_timeout_ms
        self.member_id = ""
        self.generation = -1
        self.assignment: list[TP] = []
        self.assigned = asyncio.Event()
        self.last_error: ApiError | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"http-group-{self.group}")

    async def stop(self) -> None:
        """Leave the group (its membership ends at once) and stop heartbeating."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self.member_id:
            try:
                await self._call(kr.LEAVE_GROUP, kr.leave_group(self.group, self.member_id))
            except (ApiError, ClientError) as exc:
                log.info("event=leave_group_failed group=%s error=%s", self.group, exc)
        self.member_id, self.generation, self.assignment = "", -1, []
        self.assigned.clear()

    async def _call(
        self, api: tuple[int, int], request: Any, timeout_s: float | None = None
    ) -> Any:
        caller = self._caller()
        route = coordinator(caller.fleet(self.group))
        return await kafka_call(
            caller, api[0], api[1], request, route, cluster=self._cluster, timeout_s=timeout_s
        )

    async def _run(self) -> None:
        backoff = 0.1
        while True:
            try:
                await self._join_and_sync()
                self.last_error = None
                backoff = 0.1
                await self._heartbeat()
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                self.last_error = exc
                log.info("event=group_member_error group=%s error=%s", self.group, exc.message)
                if exc.status == 403:  # retrying cannot help; the next poll reports it
                    self.assigned.set()
                    return
            except (ClientError, MalformedConsumerProtocol) as exc:
                log.info("event=group_member_error group=%s error=%r", self.group, exc)
            self.assigned.clear()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)

    async def _join(self) -> Any:
        metadata = build_subscription(Subscription(version=0, topics=self.topics))
        timeout_s = REBALANCE_TIMEOUT_MS / 1000 + 5
        for _ in range(3):
            request = kr.join_group(
                self.group, self.member_id, self._session_timeout_ms, REBALANCE_TIMEOUT_MS, metadata
            )
            answer = await self._call(kr.JOIN_GROUP, request, timeout_s)
            code = int(answer.error_code)
            if code == ErrorCode.member_id_required:
                self.member_id = str(answer.member_id)
                continue
            if code == ErrorCode.unknown_member_id:
                self.member_id = ""
                continue
            if code != ErrorCode.none:
                raise from_kafka(code, f"group {self.group!r}")
            return answer
        raise ApiError(503, f"group {self.group!r}: could not join", 50003, 1)

    async def _join_and_sync(self) -> None:
        self.assigned.clear()
        answer = await self._join()
        self.member_id, self.generation = str(answer.member_id), int(answer.generation_id)
        assignments: dict[str, bytes] = {}
        if answer.leader == self.member_id:
            assignments = await self._lead(answer.members)
        request = kr.sync_group(self.group, self.generation, self.member_id, assignments)
        synced = await self._call(kr.SYNC_GROUP, request, REBALANCE_TIMEOUT_MS / 1000 + 5)
        code = int(synced.error_code)
        if code in REJOIN:
            if code == ErrorCode.unknown_member_id:
                self.member_id = ""
            raise ApiError(409, f"group {self.group!r}: rebalancing", 409)
        if code != ErrorCode.none:
            raise from_kafka(code, f"group {self.group!r}")
        mine = parse_assignment(bytes(synced.assignment)) if synced.assignment else None
        self.assignment = (
            [] if mine is None else [(t, p) for t, ps in mine.assigned_partitions for p in ps]
        )
        self.assigned.set()

    async def _lead(self, members: Sequence[Any]) -> dict[str, bytes]:
        subscriptions = {
            str(m.member_id): parse_subscription(bytes(m.metadata)).topics for m in members
        }
        topics = sorted({t for ts in subscriptions.values() for t in ts})
        caller = self._caller()
        answer = await kafka_call(
            caller, *kr.METADATA, kr.metadata(topics), any_broker, cluster=self._cluster
        )
        counts = {
            str(t.name): len(t.partitions)
            for t in answer.topics
            if int(t.error_code) == ErrorCode.none
        }
        plan = range_assign(subscriptions, counts)
        out: dict[str, bytes] = {}
        for member, tps in plan.items():
            by_topic: dict[str, list[int]] = {}
            for topic, partition in tps:
                by_topic.setdefault(topic, []).append(partition)
            entries = tuple((t, tuple(ps)) for t, ps in by_topic.items())
            out[member] = build_assignment(Assignment(version=0, assigned_partitions=entries))
        return out

    async def _heartbeat(self) -> None:
        interval = self._session_timeout_ms / 3000
        while True:
            await asyncio.sleep(interval)
            answer = await self._call(
                kr.HEARTBEAT, kr.heartbeat(self.group, self.generation, self.member_id)
            )
            code = int(answer.error_code)
            if code == ErrorCode.none:
                continue
            if code in REJOIN:
                if self._on_revoke is not None and code == ErrorCode.rebalance_in_progress:
                    await self._on_revoke()
                if code == ErrorCode.unknown_member_id:
                    self.member_id = ""
                return
            raise from_kafka(code, f"group {self.group!r}")
