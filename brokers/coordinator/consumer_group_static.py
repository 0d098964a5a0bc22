"""Static membership of KIP-848 consumer groups (`InstanceId`): Kafka's replace rules.

Owns the checks and moves `consumer_group.ConsumerGroups` makes for a heartbeat that carries an
instance id, as Kafka's GroupMetadataManager does:
- a leave with epoch -2 keeps the member, its assignment and target, with epoch -2, for one
  session timeout (no group epoch bump); if nobody takes its place by then the session expiry
  removes it as any member;
- a join (epoch 0) with a new member id and the instance id of a member that left that way
  replaces it: the new member id takes over the old one's owned partitions and target, the old id
  is gone (its heartbeats are answered FENCED_INSTANCE_ID), and the group epoch stays, so the
  other members see no rebalance; a join with the instance id of a member that has not left is
  answered UNRELEASED_INSTANCE_ID (the instance is still running somewhere), and so is a join
  under the member's own id while it has not left (Kafka's throwIfInstanceIdIsUnreleased checks
  the epoch only); a join under its own id after a -2 leave is its return. When the joining or
  the existing member uses the classic protocol (a mixed group) Kafka skips that check: a new
  member id replaces the old one, the same id is an ordinary rejoin;
- any other heartbeat names the member that holds the instance id, else UNKNOWN_MEMBER_ID
  (none) or FENCED_INSTANCE_ID (another member id).
Pure functions over the group; runs on the event loop like its caller; not thread-safe.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, MutableMapping
from typing import Any, ClassVar, Protocol, TypeVar

from brokers.coordinator.errors import (
    FencedInstanceIdError,
    GroupError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
)

Partitions = dict[str, set[int]]


class StaticMember(Protocol):
    """What these rules read and change of `consumer_group.ConsumerMember` (a dataclass)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]  # copied with dataclasses.replace
    member_id: str
    instance_id: str | None
    epoch: int
    previous_epoch: int
    assigned: Partitions
    sent: Partitions | None
    revoke_deadline: float | None
    deadline: float


class StaticRequest(Protocol):
    """What they read of `consumer_group.HeartbeatRequest`."""

    @property
    def member_id(self) -> str: ...
    @property
    def instance_id(self) -> str | None: ...
    @property
    def client_id(self) -> str: ...
    @property
    def client_host(self) -> str: ...
    @property
    def rack_id(self) -> str | None: ...


M = TypeVar("M", bound=StaticMember)
log = logging.getLogger("pier.coordinator.consumer")
STATIC_LEAVE_EPOCH = -2


def static_member(members: Mapping[str, M] | None, instance_id: str) -> M | None:
    if members is None:
        return None
    return next((m for m in members.values() if m.instance_id == instance_id), None)


def check_static(members: Mapping[str, M] | None, request: StaticRequest) -> GroupError | None:
    """A heartbeat (epoch ≠ 0) or leave of a static member: is it the instance's member?"""
    if request.instance_id is None:
        return None
    member = static_member(members, request.instance_id)
    if member is None:
        return UnknownMemberIdError(f"instance id {request.instance_id} is unknown")
    if member.member_id != request.member_id:
        return FencedInstanceIdError(
            f"static member {request.member_id} with instance id {request.instance_id} "
            f"was fenced by member {member.member_id}"
        )
    return None


def replace_static(
    group_id: str,
    members: MutableMapping[str, M],
    target: MutableMapping[str, Partitions],
    request: StaticRequest,
    classic: bool = False,
) -> M | GroupError | None:
    """A join with an instance id: the replacing member, an error, or None (an ordinary join).
    `classic`: the joining or the existing member uses the classic protocol (no release check)."""
    if request.instance_id is None:
        return None
    old = static_member(members, request.instance_id)
    if old is None:
        return None
    if old.member_id == request.member_id and old.epoch == STATIC_LEAVE_EPOCH:
        old.epoch, old.sent = 0, None  # back after a -2 leave: its partitions were kept
        return old
    if old.member_id == request.member_id and classic:
        return None  # a classic member's rejoin
    if old.epoch != STATIC_LEAVE_EPOCH and not classic:
        return UnreleasedInstanceIdError(
            f"static member {request.member_id} with instance id {request.instance_id} cannot "
            f"join the group because the instance id is owned by {old.member_id} member"
        )
    new = dataclasses.replace(
        old,
        member_id=request.member_id,
        client_id=request.client_id,
        client_host=request.client_host,
        rack_id=request.rack_id,
        assigned={t: set(p) for t, p in old.assigned.items()},
        epoch=0,  # reconciles to the target epoch at once: it owns its target already
        previous_epoch=-1,
        sent=None,
        revoke_deadline=None,
    )
    del members[old.member_id]
    members[new.member_id] = new
    target[new.member_id] = target.pop(old.member_id, {})
    log.info(
        "event=consumer_static_member_replaced group=%s instance=%s old=%s new=%s",
        group_id, request.instance_id, old.member_id, new.member_id,
    )  # fmt: skip
    return new


def leave_static(member: StaticMember, deadline: float) -> None:
    """Epoch -2: away for one session timeout, its partitions kept for its return."""
    member.previous_epoch, member.epoch = member.epoch, STATIC_LEAVE_EPOCH
    member.revoke_deadline = None
    member.deadline = deadline
