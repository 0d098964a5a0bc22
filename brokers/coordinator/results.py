"""What the coordinator answers: the outcome of each group operation, errors as domain exceptions.

Owns: `JoinResult`, `SyncResult`, `MemberLeave`, `GroupSummary`/`MemberSummary`, `ListedGroup`.
Handlers turn them into version-specific responses; an `error` is a `GroupError` instance that the
handlers' mapper turns into a code. Immutable; thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass

from brokers.coordinator.errors import GroupError

UNKNOWN_MEMBER_ID = ""
NO_GENERATION = -1


@dataclass(frozen=True, slots=True)
class JoinedMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinResult:
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    skip_assignment: bool = False
    members: tuple[JoinedMember, ...] = ()
    error: GroupError | None = None

    @classmethod
    def failed(cls, member_id: str, error: GroupError) -> JoinResult:
        return cls(member_id=member_id, error=error)


@dataclass(frozen=True, slots=True)
class SyncResult:
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""
    error: GroupError | None = None


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class MemberLeave:
    member_id: str
    group_instance_id: str | None
    error: GroupError | None = None


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...]
    error: GroupError | None = None


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
