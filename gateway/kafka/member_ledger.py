"""The bytes of group members each tenant holds at the fleet's coordinators, and whether a request
may make them more (the gateway's `tenant.max.group.member.bytes`; docs/gateway.md, "Groups and
transactional ids").

A coordinator keeps a classic member's JoinGroup protocols, its static instance id, its client
id and member id and the assignment its leader sent it, and a KIP-848 member's subscription, for
as long as the member lives; `member_size` bounds each member to a MiB, and this ledger bounds
how many bytes of members a tenant holds in all (Kafka bounds neither: `group.max.size` is per
group and unlimited by default, so a tenant joining members at its request rate parked a GiB in
minutes).

Owns `MemberLedger`: per tenant, every member this gateway process let through, keyed by (the
tenant's group, member id), with what it charges (`OVERHEAD_BYTES` plus its parts, as the
filters measure them on the forwarded request) and when it was last heard of. It fails closed:
- a request charges the larger of what the member held and what it asks for; only an answer of
  NONE (MEMBER_ID_REQUIRED for a new member) makes the new sizes what the member holds, since a
  refused request leaves the coordinator's state as it was;
- a new member waits under a ticket until its answer names its id; an error answer naming an id
  keeps the ticket for the member's whole hold (the coordinator may have made it), one naming
  none drops it;
- members leave the ledger only by a LeaveGroup or KIP-848 leave the coordinator answered NONE
  for (by member id; by instance id only when no member id was given), or by expiry: a classic
  member not heard of (JoinGroup, SyncGroup, Heartbeat, OffsetCommit) for its session timeout
  plus the longest of its group's rebalance timeouts and Kafka's five minutes for a new member,
  with no JoinGroup or SyncGroup of it waiting (one whose waiting request lost its connection:
  its session plus `MAX_REBALANCE_S`, the longest rebalance the filters forward), a KIP-848
  member after `CONSUMER_HOLD_S`; expired members are dropped when the tenant next reaches its limit (at most every
  `SWEEP_INTERVAL_S`);
- only the first SyncGroup of the leader a JoinGroup answer named, in that generation, may
  shrink assignments (the coordinator ignores a follower's and a stable group's later ones);
  a static member's instance id counts once an answer of NONE confirmed it;
- a member this process did not let join (`knows`; one known only by an assignment does not
  count) may not keep itself alive here uncharged (otherwise members joined through one gateway
  process and kept alive through another would be charged nowhere): a KIP-848 member its
  coordinator describes is `adopt`ed, charged for all it holds there, when the tenant has room
  (`filters/member_adoption.py`; the look-ups a tenant causes are bounded, `look_ups`); the
  filters answer any other's Heartbeat, SyncGroup or OffsetCommit REBALANCE_IN_PROGRESS, and its
  KIP-848 heartbeat UNKNOWN_MEMBER_ID, so it rejoins through this gateway and is charged here.
A request that would take the tenant past its limit is refused GROUP_MAX_SIZE_REACHED by the
filter; one that keeps or shrinks what a member holds always passes.

Runs on the event loop; not thread-safe.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import count

from brokers.wire.errors import ErrorCode
from gateway.quotas.mutation_quota import TokenBucket

DEFAULT_MAX_MEMBER_BYTES = 64 << 20
OVERHEAD_BYTES = 2048  # a member's timers and bookkeeping at its coordinator, beyond its bytes
CONSUMER_HOLD_S = 60.0  # KIP-848: Kafka's ceiling on group.consumer.session.timeout.ms
NEW_MEMBER_JOIN_S = 300.0  # Kafka's wait for a new member's rejoin (KIP-394, KIP-345)
# The longest rebalance timeout forwarded (group.max.session.timeout.ms's default): a rebalance,
# and so a member parked in it, lasts no longer at any coordinator, whichever gateway asked.
MAX_REBALANCE_S = 1800.0
SWEEP_INTERVAL_S = 1.0
# Coordinator look-ups (`adopt`) a tenant's requests may cause per second, and in one burst; an
# answer counts one more for each `LOOKUP_BYTES` it weighs.
LOOKUPS_PER_S = 5.0
LOOKUP_BURST = 20.0
LOOKUP_BYTES = 1 << 20
STORED = frozenset({ErrorCode.none, ErrorCode.member_id_required})

Key = tuple[str, str | int]  # (the tenant's group, member id) or (group, ticket) until answered
Parts = Mapping[str, int | None]  # a part's bytes; None: the request leaves it as it was


@dataclass(slots=True)
class _Member:
    group: str
    parts: dict[str, int]  # what it is charged for, by part (at least what its coordinator holds)
    assignment: int
    session_s: float
    rebalance_s: float  # its own rebalance timeout (classic; at least NEW_MEMBER_JOIN_S), or 0
    seen: float
    instance: str | None = None  # a static member's, once an answer of NONE confirmed it
    waiting: int = 0  # JoinGroup / SyncGroup requests of it parked at the coordinator
    key: Key | None = None  # where it is filed; None once dropped
    joined: bool = True  # False: only an assignment a leader sent it is known here

    @property
    def charge(self) -> int:
        return OVERHEAD_BYTES + sum(self.parts.values()) + self.assignment


@dataclass(slots=True)
class _Tenant:
    members: dict[Key, _Member] = field(default_factory=dict)
    statics: dict[tuple[str, str], Key] = field(default_factory=dict)  # (group, instance) -> key
    # group -> (leader, generation) a JoinGroup answer named, until that leader's SyncGroup
    leaders: dict[str, tuple[str, int]] = field(default_factory=dict)
    rebalance_s: dict[str, float] = field(default_factory=dict)  # group -> longest timeout asked
    filed: dict[str, int] = field(default_factory=dict)  # group -> members filed
    held: int = 0
    swept_at: float = float("-inf")
    lookups: TokenBucket = field(default_factory=TokenBucket)  # look-ups it may still cause


class Admission:
    """A request the ledger let through; its answer settles what the member holds. `member` is
    the member it keeps waiting (a JoinGroup's, a SyncGroup's sender), or None (a KIP-848
    heartbeat: answered at once)."""

    __slots__ = ("_fresh", "_instance", "_ledger", "_member", "_open", "_settle", "_tenant")

    def __init__(
        self,
        ledger: MemberLedger,
        tenant: _Tenant,
        member: _Member | None,
        fresh: bool = False,
        settle: Callable[[], None] | None = None,
        instance: str | None = None,
    ) -> None:
        self._ledger, self._tenant, self._member = ledger, tenant, member
        self._fresh, self._settle, self._instance = fresh, settle, instance
        self._open = True
        if member is not None:
            member.waiting += 1

    def answered(
        self,
        member_id: str | None,
        error: ErrorCode,
        leader: str | None = None,
        generation: int = -1,
    ) -> None:
        """The coordinator's answer: the member id it names (empty or None: none), its error, and
        for a JoinGroup the leader and generation it names."""
        if not self._close():
            return
        ledger, tenant, member = self._ledger, self._tenant, self._member
        if error in STORED and self._settle is not None:
            self._settle()
        if member is None:
            return
        if error in STORED and member_id:
            ledger._place(tenant, member_id, member, self._instance)
            if leader == member_id and error == ErrorCode.none:
                tenant.leaders[member.group] = (leader, generation)
        elif error not in STORED and self._fresh and not member_id:
            ledger._drop(tenant, member)  # refused before the coordinator made anything

    def failed(self) -> None:
        """No answer will come: the coordinator may hold the member parked for as long as a
        rebalance lasts, then for its session."""
        if self._close() and self._member is not None:
            self._member.rebalance_s = max(self._member.rebalance_s, MAX_REBALANCE_S)

    def _close(self) -> bool:
        """Whether this is the first settlement (the member is no longer waiting)."""
        if not self._open:
            return False
        self._open = False
        if self._member is not None:
            self._member.waiting -= 1
            self._member.seen = self._ledger._clock()
        return True


class LookUps:
    """A tenant's look-ups at coordinators: a token bucket (`LOOKUPS_PER_S`, `LOOKUP_BURST`), one
    token a look-up and one more for each `LOOKUP_BYTES` of its answer (`filter.LookupBudget`)."""

    __slots__ = ("_clock", "_tenant")

    def __init__(self, tenant: _Tenant, clock: Callable[[], float]) -> None:
        self._tenant, self._clock = tenant, clock

    def take(self) -> bool:
        bucket, now_ms = self._tenant.lookups, self._now_ms()
        if bucket.measure(LOOKUPS_PER_S, LOOKUP_BURST, now_ms) < 1:
            return False
        bucket.record(1, LOOKUPS_PER_S, LOOKUP_BURST, now_ms)
        return True

    def spend(self, size: int) -> None:
        self._tenant.lookups.record(
            size / LOOKUP_BYTES, LOOKUPS_PER_S, LOOKUP_BURST, self._now_ms()
        )

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)


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

    def knows(self, tenant_id: str, group: str, member_id: str) -> bool:
        """Whether this gateway let the member join (and has not dropped it)."""
        tenant = self._tenants.get(tenant_id)
        member = None if tenant is None else tenant.members.get((group, member_id))
        return member is not None and member.joined

    def join(
        self,
        tenant_id: str,
        group: str,
        member_id: str,
        instance_id: str | None,
        parts: Parts,
        session_s: float,
        rebalance_s: float = 0.0,
    ) -> Admission | None:
        """A member joining (classic JoinGroup, with its rebalance timeout; KIP-848 heartbeat at
        epoch 0), or rejoining, with `parts`; None when the tenant would pass its limit."""
        tenant = self._tenants.setdefault(tenant_id, _Tenant())
        member = self._known(tenant, group, member_id, instance_id)
        fresh = member is None
        if member is None:
            member = _Member(group, {}, 0, session_s, rebalance_s, self._clock())
        grown = _grown(member.parts, parts)
        extra = sum(grown.values()) - sum(member.parts.values())
        if not self._room(tenant, member, extra + (OVERHEAD_BYTES if fresh else 0)):
            return None
        self._resize(tenant, member, grown, member.assignment, add=fresh)
        if fresh:
            self._file(tenant, member, (group, next(self._tickets)))
        member.session_s = max(member.session_s, session_s)
        member.rebalance_s = max(member.rebalance_s, rebalance_s)
        if rebalance_s:
            tenant.rebalance_s[group] = max(tenant.rebalance_s.get(group, 0.0), rebalance_s)
        member.seen = self._clock()
        settle = self._settler(tenant, member, parts)
        return Admission(self, tenant, member, fresh, settle, instance_id)

    def heartbeat(
        self,
        tenant_id: str,
        group: str,
        member_id: str,
        instance_id: str | None,
        parts: Parts,
    ) -> Admission | None:
        """A KIP-848 member's heartbeat past its join (the member known here): refreshes it and
        charges the parts it sends; None when that would take the tenant past its limit."""
        tenant = self._tenants.setdefault(tenant_id, _Tenant())
        member = self._known(tenant, group, member_id, instance_id)
        if member is None:
            return Admission(self, tenant, None)
        grown = _grown(member.parts, parts)
        if not self._room(tenant, member, sum(grown.values()) - sum(member.parts.values())):
            return None
        self._resize(tenant, member, grown, member.assignment)
        member.seen = self._clock()
        return Admission(self, tenant, None, settle=self._settler(tenant, member, parts))

    def sync(
        self,
        tenant_id: str,
        group: str,
        member_id: str,
        generation: int,
        assignments: Iterable[tuple[str, int]],
    ) -> Admission | None:
        """A SyncGroup from `member_id`, with the leader's assignment sizes by member id (none
        from a follower); None when they would take the tenant past its limit. Members the
        assignments name that this gateway does not know are charged from now, held as long as
        the sender."""
        tenant = self._tenants.setdefault(tenant_id, _Tenant())
        sender = tenant.members.get((group, member_id))
        sizes = dict(assignments)
        extra = 0
        for target, size in sizes.items():
            known = tenant.members.get((group, target))
            extra += max(0, size - known.assignment) if known else OVERHEAD_BYTES + size
        if not self._room(tenant, sender, extra):
            return None
        now = self._clock()
        for target, size in sizes.items():
            known = tenant.members.get((group, target))
            if known is None:
                session, rebalance = (sender.session_s, sender.rebalance_s) if sender else (0, 0)
                rebalance = max(rebalance, NEW_MEMBER_JOIN_S)
                known = _Member(group, {}, 0, session, rebalance, now, joined=False)
                self._resize(tenant, known, {}, size, add=True)
                self._file(tenant, known, (group, target))
            elif size > known.assignment:
                self._resize(tenant, known, known.parts, size)
        if sender is not None:
            sender.seen = now

        def settle() -> None:  # the coordinator took the leader's assignments: they may shrink
            if tenant.leaders.get(group) != (member_id, generation):
                return  # a follower's, or a second one (ignored by the coordinator)
            del tenant.leaders[group]
            for target, size in sizes.items():
                known = tenant.members.get((group, target))
                if known is not None:
                    self._resize(tenant, known, known.parts, size)

        return Admission(self, tenant, sender, settle=settle)

    def look_ups(self, tenant_id: str) -> LookUps:
        """The look-ups at coordinators the tenant may still cause (`adopt`)."""
        return LookUps(self._tenants.setdefault(tenant_id, _Tenant()), self._clock)

    def adopt(
        self,
        tenant_id: str,
        group: str,
        member_id: str,
        instance_id: str | None,
        parts: Mapping[str, int],
        session_s: float,
    ) -> bool:
        """A member that joined through another gateway process, as its coordinator described it
        holding `parts` (every part of it: nothing is hidden from a KIP-848 description), charged
        from now like one that joined here; False (nothing kept) when the tenant has no room."""
        tenant = self._tenants.setdefault(tenant_id, _Tenant())
        known = tenant.members.get((group, member_id))
        if known is not None and known.joined:
            return True
        static = tenant.statics.get((group, instance_id)) if instance_id else None
        if static is not None and static != (group, member_id):
            return False  # a stale description: the instance has rejoined here under a new id
        assignment = 0 if known is None else known.assignment  # known by an assignment alone
        member = _Member(group, dict(parts), assignment, session_s, 0.0, self._clock())
        extra = member.charge - (0 if known is None else known.charge)
        if not self._room(tenant, known, extra):
            return False
        if known is not None:
            self._drop(tenant, known)
        self._place(tenant, member_id, member, instance_id)
        return True

    def seen(self, tenant_id: str, group: str, member_id: str) -> None:
        """A classic Heartbeat or OffsetCommit of a member known here: it is alive."""
        tenant = self._tenants.get(tenant_id)
        member = None if tenant is None else tenant.members.get((group, member_id))
        if member is not None:
            member.seen = self._clock()

    def left(self, tenant_id: str, group: str, member_id: str, instance_id: str | None) -> None:
        """Its coordinator removed the member: a LeaveGroup or KIP-848 leave answered NONE for
        it (by member id; by instance id only when the member id was empty)."""
        tenant = self._tenants.get(tenant_id)
        if tenant is None:
            return
        key: Key | None = (group, member_id) if member_id else None
        if key is None and instance_id:
            key = tenant.statics.get((group, instance_id))
        member = None if key is None else tenant.members.get(key)
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

    def _room(self, tenant: _Tenant, admitting: _Member | None, extra: int) -> bool:
        if extra <= 0 or tenant.held + extra <= self.limit_bytes:
            return True
        now = self._clock()
        if now - tenant.swept_at >= SWEEP_INTERVAL_S:
            tenant.swept_at = now
            self._sweep(tenant, admitting, now)
        return tenant.held + extra <= self.limit_bytes

    def _sweep(self, tenant: _Tenant, admitting: _Member | None, now: float) -> None:
        """Drop the members whose coordinators have let them go (never `admitting`)."""
        for member in list(tenant.members.values()):
            if member is not admitting and self._expired(tenant, member, now):
                self._drop(tenant, member)

    def _expired(self, tenant: _Tenant, member: _Member, now: float) -> bool:
        if member.waiting:
            return False
        rebalance = max(member.rebalance_s, tenant.rebalance_s.get(member.group, 0.0))
        return now - member.seen > member.session_s + rebalance

    def _resize(
        self,
        tenant: _Tenant,
        member: _Member,
        parts: dict[str, int],
        assignment: int,
        *,
        add: bool = False,
    ) -> None:
        if not add and member.key is not None:
            tenant.held -= member.charge
        member.parts, member.assignment = parts, assignment
        if add or member.key is not None:
            tenant.held += member.charge

    def _settler(self, tenant: _Tenant, member: _Member, parts: Parts) -> Callable[[], None]:
        """What makes the parts asked for what the coordinator holds of `member` (on NONE)."""
        asked = {k: v for k, v in parts.items() if v is not None}

        def settle() -> None:
            self._resize(tenant, member, {**member.parts, **asked}, member.assignment)

        return settle

    def _file(self, tenant: _Tenant, member: _Member, key: Key) -> None:
        tenant.members[key] = member
        member.key = key
        tenant.filed[member.group] = tenant.filed.get(member.group, 0) + 1

    def _unfile(self, tenant: _Tenant, member: _Member, *, refiling: bool = False) -> None:
        key, member.key = member.key, None
        if key is None:
            return
        del tenant.members[key]
        group = member.group
        tenant.filed[group] -= 1
        if not tenant.filed[group] and not refiling:  # its last member here: forget the group
            for mapping in (tenant.filed, tenant.leaders, tenant.rebalance_s):
                mapping.pop(group, None)

    def _place(
        self, tenant: _Tenant, member_id: str, member: _Member, instance: str | None = None
    ) -> None:
        """File `member` under the id its coordinator gave it (and its confirmed instance id),
        replacing any other there."""
        group = member.group
        key: Key = (group, member_id)
        member.joined = True
        if member.key != key:
            if member.key is None:
                tenant.held += member.charge  # dropped while its request waited: held again
            else:
                self._unfile(tenant, member, refiling=True)  # its ticket, or an earlier id
            other = tenant.members.get(key)
            if other is not None:
                self._drop(tenant, other)
            self._file(tenant, member, key)
        if instance and instance != member.instance:
            if member.instance and tenant.statics.get((group, member.instance)) == key:
                del tenant.statics[(group, member.instance)]
            member.instance = instance
        if member.instance:
            previous = tenant.statics.get((group, member.instance))
            replaced = None if previous in (None, key) else tenant.members.get(previous)
            if replaced is not None:
                self._drop(tenant, replaced)
            tenant.statics[(group, member.instance)] = key

    def _drop(self, tenant: _Tenant, member: _Member) -> None:
        key = member.key
        if key is None:
            return
        self._unfile(tenant, member)
        tenant.held -= member.charge
        if member.instance and tenant.statics.get((member.group, member.instance)) == key:
            del tenant.statics[(member.group, member.instance)]


def _grown(held: Mapping[str, int], asked: Parts) -> dict[str, int]:
    """Each part at the larger of what is held and what is asked (a None part stays)."""
    grown = dict(held)
    for name, size in asked.items():
        if size is not None:
            grown[name] = max(grown.get(name, 0), size)
    return grown


NO_LEDGER = Admission(MemberLedger(), _Tenant(), None)  # what filters hold with no ledger kept
