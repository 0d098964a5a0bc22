"""One member of a classic group (Kafka's MemberMetadata / ClassicGroupMember).

Owns: a member's identity (member id, KIP-345 group instance id, client id and host), its
timeouts, the protocols it supports in preference order, its assignment, the futures of its parked
JoinGroup/SyncGroup requests, and its heartbeat deadline (monotonic seconds). Runs on the event
loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Iterable
from dataclasses import dataclass

from brokers.coordinator.results import JoinResult, SyncResult

Protocols = tuple[tuple[str, bytes], ...]


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_future: asyncio.Future[JoinResult] | None = None
    sync_future: asyncio.Future[SyncResult] | None = None
    is_new: bool = False
    heartbeat_deadline: float = math.inf

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_future is not None

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_future is not None

    @property
    def protocol_names(self) -> list[str]:
        """Each protocol name once, in preference order (Kafka keeps them as a set)."""
        return list(dict.fromkeys(name for name, _ in self.protocols))

    def matches(self, protocols: Protocols) -> bool:
        """Same protocols with the same metadata in the same order: a rejoin that changes nothing."""
        return protocols == self.protocols

    def metadata(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol!r}")

    def vote(self, candidates: Iterable[str]) -> str:
        """The member's most preferred protocol among `candidates` (Kafka's protocol vote)."""
        allowed = set(candidates)
        for name, _ in self.protocols:
            if name in allowed:
                return name
        raise ValueError(f"member {self.member_id} supports none of {sorted(allowed)}")

    def has_satisfied_heartbeat(self) -> bool:
        """At its deadline: members parked in a rebalance are alive; new ones (KIP-394) are not."""
        if self.is_new:
            return False
        return self.is_awaiting_join or self.is_awaiting_sync

    def complete_join(self, result: JoinResult) -> bool:
        future, self.join_future = self.join_future, None
        if future is None:
            return False
        if not future.done():
            future.set_result(result)
        return True

    def complete_sync(self, result: SyncResult) -> bool:
        future, self.sync_future = self.sync_future, None
        if future is None:
            return False
        if not future.done():
            future.set_result(result)
        return True
