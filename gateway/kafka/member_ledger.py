"""The bytes of group members each tenant holds at the fleet's coordinators, and whether a request
may make them more (the gateway's `tenant.max.group.member.bytes`; docs/security.md, limits).

A coordinator keeps a classic member's JoinGroup protocols, its static instance id and the
assignment its leader sent it, and a KIP-848 member's subscription, for as long as the member
lives; `member_size` bounds each member to a MiB, and this ledger bounds how many bytes of members
a tenant holds in all (Kafka bounds neither: `group.max.size` is per group and unlimited by
default, so a tenant joining members at its request rate parked a GiB in minutes).

Owns `MemberLedger`: per tenant, every member this gateway let through, keyed by (the tenant's
group, member id), with its bytes (`OVERHEAD_BYTES` plus what the coordinator holds of it), when
it was last heard of and how long its coordinator keeps it without a word. A JoinGroup or joining
ConsumerGroupHeartbeat of a member not known yet is held under a ticket until its answer names
the member id (a KIP-394 MEMBER_ID_REQUIRED answer too: the rejoin replaces it); a static member's
new id replaces its old one; the leader's SyncGroup charges each member's assignment; Heartbeat,
SyncGroup and JoinGroup refresh a member; a LeaveGroup or a KIP-848 leave the coordinator
answered NONE for, and UNKNOWN_MEMBER_ID / FENCED_MEMBER_EPOCH answers, drop it. A member not
heard of for its session plus rebalance timeout (classic; a KIP-848 one `CONSUMER_HOLD_S`) and
with no JoinGroup or SyncGroup waiting is gone at its coordinator too, and is dropped when the
tenant next reaches its limit (at most every `SWEEP_INTERVAL_S`). A request that would take the
tenant past its limit is refused (GROUP_MAX_SIZE_REACHED) before it is forwarded; one that keeps
or shrinks what a member holds always passes. Fails closed: a timeout only grows, an answer that
never comes keeps the member for its full hold. Members that joined through another gateway are
not known here (each gateway counts what it let through, like `coordinated_names`).

Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import count

from brokers.wire.errors import ErrorCode

DEFAULT_MAX_MEMBER_BYTES = 64 << 20
OVERHEAD_BYTES = 2048  # a member's ids, timers and bookkeeping at its coordinator, beyond its bytes
CONSUMER_HOLD_S = 60.0  # KIP-848: Kafka's ceiling on group.consumer.session.timeout.ms
SWEEP_INTERVAL_S = 1.0
GONE = frozenset({ErrorCode.unknown_member_id, ErrorCode.fenced_member_epoch})

Key = tuple[str, str | int]  # (the tenant's group, member id) or (group, ticket) until answered


@dataclass(slots=True)
class _Member:
    parts: dict[str, int]  # what it holds, by part: "join", or a KIP-848 subscription's fields
    assignment: int
    hold_s: float  # its coordinator keeps it this long after the last word from it
    seen: float
    instance: str | None = None
    waiting: int = 0  # JoinGroup / SyncGroup requests of it parked at the coordinator
    key: Key | None = None  # where it is filed; None once dropped

    @property
    def charge(self) -> int:
        return OVERHEAD_BYTES + sum(self.parts.values()) + self.assignment


@dataclass(slots=True)
class _Tenant:
    members: dict[Key, _Member] = field(default_factory=dict)
    statics: dict[tuple[str, str], Key] = field(default_factory=dict)  # (group, instance) -> key
    held: int = 0
    swept_at: float = float("-inf")


class Admission:
    """A request the ledger let through for one member; its answer settles the member's key."""

    __slots__ = ("_fresh", "_group", "_ledger", "_member", "_tenant")

    def __init__(
        self, ledger: MemberLedger, tenant: _Tenant, group: str, member: _Member | None, fresh: bool
    ) -> None:
        self._ledger, self._tenant, self._group = ledger, tenant, group
        self._member, self._fresh = member, fresh
        if member is not None:
            member.waiting += 1

    def answered(self, member_id: str | None, error: ErrorCode) -> None:
        """The coordinator's answer: the member id it names (empty or None: none) and its error."""
        member = self._close()
        if member is None:
            return
        if error in GONE or (not member_id and self._fresh):
            self._ledger._drop(self._tenant, member)
        elif member_id:
            self._ledger._place(self._tenant, self._group, member_id, member)

    def failed(self) -> None:
        """No answer will come: the coordinator may hold the member for its whole hold."""
        self._close()

    def _close(self) -> _Member | None:
        member, self._member = self._member, None
        if member is not None:
            member.waiting -= 1
            member.seen = self._ledger._clock()
        return member


class _Unheld(Admission):
    """What a filter holds when the gateway keeps no ledger: nothing to settle."""

    __slots__ = ()

    def __init__(self) -> None:
        pass

    def answered(self, member_id: str | None, error: ErrorCode) -> None:
        return None

    def failed(self) -> None:
        return None


NO_LEDGER: Admission = _Unheld()


class MemberLedger:
    def __init__(
        self, limit_bytes: int = DEFAULT_MAX_MEMBER_BYTES, clock: Callable[[], float] | None = None
    ) -> None:
        self.limit_bytes = limit_bytes
        self._clock = clock or time.monotonic
        self._tenants: dict[str, _Tenant] = {}
        self._tickets = count()

    def held(self, tenant_id: str) -> int:
        """The bytes of members the tenant holds as this gateway counts them."""
        tenant = self._tenants.get(tenant_id)
        return 0 if tenant is None else tenant.held

    def members(self, tenant_id: str) -> int:
        tenant = self._tenants.get(tenant_id)
        return 0 if tenant is None else len(tenant.members)

    def join(
        self,
        tenant_id: str,
        group: str,
        member_id: str,
        instance_id: str | None,
        parts: Mapping[str, int | None],
        hold_s: float,
    ) -> Admission | None:
        """A member joining (classic JoinGroup; KIP-848 heartbeat at epoch 0), or rejoining, with
        `parts` (a None part: unchanged); None when the tenant would pass its limit."""
        tenant = self._tenants.setdefault(tenant_id, _Tenant())
        known = self._known(tenant, group, member_id, instance_id)
        fresh = known is None
        member = known or _Member({}, 0, hold_s, self._clock(), instance_id)
        grown = {**member.parts, **{k: v for k, v in parts.items() if v is not None}}
        extra = sum(grown.values()) - sum(member.parts.values())
        if fresh:
            extra += member.charge
        if not self._room(tenant, extra):
            return None
        self._resize(tenant, member, grown, member.assignment, add=fresh)
        if fresh:
            self._file(tenant, member, (group, next(self._tickets)))
        member.hold_s = max(member.hold_s, hold_s)
        member.seen = self._clock()
        member.instance = member.instance or instance_id
        return Admission(self, tenant, group, member, fresh)

    def heartbeat(
        self,
        tenant_id: str,
        group: str,
        member_id: str,
        instance_id: str | None,
        parts: Mapping[str, int | None],
    ) -> bool:
        """A KIP-848 member's heartbeat past its join: refreshes it and replaces the parts it
        sends; False when that would take the tenant past its limit."""
        tenant = self._tenants.get(tenant_id)
        member = None if tenant is None else self._known(tenant, group, member_id, instance_id)
        if tenant is None or member is None:
            return True  # joined through another gateway, or gone: nothing known to charge
        grown = {**member.parts, **{k: v for k, v in parts.items() if v is not None}}
        if not self._room(tenant, sum(grown.values()) - sum(member.parts.values())):
            return False
        self._resize(tenant, member, grown, member.assignment)
        member.seen = self._clock()
        return True

    def sync(
        self,
        tenant_id: str,
        group: str,
        member_id: str,
        assignments: Iterable[tuple[str, int]],
    ) -> Admission | None:
        """A SyncGroup from `member_id`, with the leader's assignment sizes by member id (none
        from a follower); None when they would take the tenant past its limit. Members the
        assignments name that this gateway does not know are charged from now, held as long as
        the sender."""
        tenant = self._tenants.setdefault(tenant_id, _Tenant())
        sender = tenant.members.get((group, member_id))
        hold_s = sender.hold_s if sender is not None else 0.0
        sizes = dict(assignments)
        extra = 0
        for target, size in sizes.items():
            known = tenant.members.get((group, target))
            extra += size - known.assignment if known else OVERHEAD_BYTES + size
        if not self._room(tenant, extra):
            return None
        now = self._clock()
        for target, size in sizes.items():
            known = tenant.members.get((group, target))
            if known is None:
                known = _Member({}, 0, hold_s, now)
                self._resize(tenant, known, known.parts, size, add=True)
                self._file(tenant, known, (group, target))
            else:
                self._resize(tenant, known, known.parts, size)
        if sender is not None:
            sender.seen = now
        return Admission(self, tenant, group, sender, fresh=False)

    def seen(self, tenant_id: str, group: str, member_id: str) -> None:
        """A classic Heartbeat: the member is alive."""
        tenant = self._tenants.get(tenant_id)
        member = None if tenant is None else tenant.members.get((group, member_id))
        if member is not None:
            member.seen = self._clock()

    def left(self, tenant_id: str, group: str, member_id: str, instance_id: str | None) -> None:
        """Its coordinator removed the member (a LeaveGroup or KIP-848 leave answered NONE)."""
        tenant = self._tenants.get(tenant_id)
        if tenant is None:
            return
        member = self._known(tenant, group, member_id, instance_id)
        if member is not None:
            self._drop(tenant, member)

    def _known(
        self, tenant: _Tenant, group: str, member_id: str, instance_id: str | None
    ) -> _Member | None:
        member = tenant.members.get((group, member_id)) if member_id else None
        if member is None and instance_id:
            key = tenant.statics.get((group, instance_id))
            member = None if key is None else tenant.members.get(key)
        return member

    def _room(self, tenant: _Tenant, extra: int) -> bool:
        if extra <= 0 or tenant.held + extra <= self.limit_bytes:
            return True
        now = self._clock()
        if now - tenant.swept_at >= SWEEP_INTERVAL_S:
            tenant.swept_at = now
            for member in [m for m in tenant.members.values() if _expired(m, now)]:
                self._drop(tenant, member)
        return tenant.held + extra <= self.limit_bytes

    def _resize(
        self,
        tenant: _Tenant,
        member: _Member,
        parts: dict[str, int],
        assignment: int,
        *,
        add: bool = False,
    ) -> None:
        if not add:
            tenant.held -= member.charge
        member.parts, member.assignment = parts, assignment
        tenant.held += member.charge

    def _file(self, tenant: _Tenant, member: _Member, key: Key) -> None:
        tenant.members[key] = member
        member.key = key

    def _place(self, tenant: _Tenant, group: str, member_id: str, member: _Member) -> None:
        """File `member` under the id its coordinator gave it, replacing any other there."""
        key: Key = (group, member_id)
        if member.key != key:
            if member.key is None:
                tenant.held += member.charge  # dropped while its request waited: held again
            else:
                del tenant.members[member.key]  # its ticket, or a static member's earlier id
            other = tenant.members.get(key)
            if other is not None:
                self._drop(tenant, other)
            self._file(tenant, member, key)
        if member.instance:
            previous = tenant.statics.get((group, member.instance))
            replaced = None if previous in (None, key) else tenant.members.get(previous)
            if replaced is not None:
                self._drop(tenant, replaced)
            tenant.statics[(group, member.instance)] = key

    def _drop(self, tenant: _Tenant, member: _Member) -> None:
        key, member.key = member.key, None
        if key is None:
            return
        del tenant.members[key]
        tenant.held -= member.charge
        if member.instance and tenant.statics.get((key[0], member.instance)) == key:
            del tenant.statics[(key[0], member.instance)]


def _expired(member: _Member, now: float) -> bool:
    return member.waiting == 0 and now - member.seen > member.hold_s
