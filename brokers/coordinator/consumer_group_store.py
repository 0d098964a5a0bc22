"""Persistence of KIP-848 consumer groups in `__consumer_offsets`, as Kafka's coordinator does.

Owns: `ConsumerGroupStore` — each group's *record image* (record key → value, the records
`consumer_group_records` defines: group epoch, subscribed topics' metadata, target assignment,
members' metadata and current assignments) and the image last written. After any change
(a heartbeat, a session or rebalance timeout, a deletion) `flush` appends the difference as one
batch through the `GroupLog` (the path, acks and replication of offset commits): the records
whose value changed, and tombstones for the keys that went (a member, or the whole group). A
heartbeat's answer waits for that append, so a member never acts on an epoch a failover would
lose. `install` turns the records a loader read back (`loader.LoadedPartition.consumer_records`)
into live groups when this broker becomes coordinator: epochs, targets and assignments carry
over, every member gets a fresh session deadline (and one still revoking a fresh rebalance
deadline, as Kafka's onLoaded), and the members keep heartbeating with their epochs instead of
rejoining at 0.

Topic ids: records name topics by id. The image maps names to ids with the lookup the heartbeat
passes (the metadata view) and remembers each group's mapping, so timer-driven flushes need no
metadata; a loaded group maps ids back to names through its ConsumerGroupPartitionMetadata record.

Runs on the event loop; not thread-safe. Flushes of one group hold the group's lock while they
compute and append the difference, so appends of one group reach the log in order.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Iterable

from brokers.common.clock import Clock
from brokers.coordinator import consumer_group_records as rec
from brokers.coordinator.consumer_group import (
    ConsumerGroup,
    ConsumerGroups,
    ConsumerMember,
    HeartbeatResult,
    Partitions,
)
from brokers.coordinator.errors import GroupError, GroupRecordError
from brokers.coordinator.group_log import Entry, GroupLog

log = logging.getLogger("pier.coordinator.consumer")
Image = dict[bytes, bytes]
TopicIds = Callable[[str], uuid.UUID | None]
_UNKNOWN = b""  # an image value never equal to a real one: rewrite it at the next flush
# Kafka's order inside one batch: a leaving member's tombstones, then new values from the
# member's metadata to its current assignment, then the group's own tombstones.
_WRITE_ORDER = (5, 3, 4, 7, 6, 8)
_MEMBER_TOMBSTONE_ORDER = (8, 7, 5)
_GROUP_TOMBSTONE_ORDER = (4, 6, 3)


class ConsumerGroupStore:
    def __init__(self, groups: ConsumerGroups, group_log: GroupLog, clock: Clock) -> None:
        self.groups = groups
        self.log = group_log
        self.clock = clock
        self.written: dict[str, Image] = {}
        self.topic_ids: dict[str, dict[str, uuid.UUID]] = {}  # group → topic name → id
        self._locks: dict[str, asyncio.Lock] = {}
        self._shapes: dict[str, tuple[int, frozenset[str]]] = {}  # image's target epoch, members
        self._background: set[asyncio.Task[None]] = set()

    # ---- writing ----------------------------------------------------------------------------
    async def persist(
        self, result: HeartbeatResult, group_id: str, topic_id: TopicIds
    ) -> HeartbeatResult:
        """A heartbeat's changes written before it is answered; the append's error otherwise."""
        if result.error is not None:  # refused before any change (consumer_group.heartbeat)
            return result
        self._learn_ids(group_id, topic_id)
        try:
            await self.flush(group_id, result.member_id)
        except GroupError as exc:
            return HeartbeatResult(exc, result.member_id, result.member_epoch, 0)
        return result

    async def flush(self, group_id: str, member_id: str | None = None) -> None:
        """Write what changed; `member_id`: only that member's records can have changed unless
        the membership or the target epoch did (a heartbeat), which spares re-encoding the
        whole group on every heartbeat."""
        lock = self._locks.setdefault(group_id, asyncio.Lock())
        async with lock:
            group = self.groups.groups.get(group_id)
            old = self.written.get(group_id, {})
            new, keys = ({}, None) if group is None else self._next_image(group, old, member_id)
            entries = delta(old, new, keys)
            if not entries:
                return
            self.written[group_id] = new
            try:
                await self.log.append(group_id, entries)
            except GroupError:
                self.written[group_id] = dict.fromkeys(set(old) | set(new), _UNKNOWN)
                self._shapes.pop(group_id, None)
                raise
            if group is None:
                self._drop(group_id)

    def flush_later(self, group_ids: Iterable[str]) -> None:
        """Timer-driven changes (expiry, fencing): written in the background."""
        for group_id in group_ids:
            task = asyncio.get_running_loop().create_task(self._flush_logged(group_id))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _flush_logged(self, group_id: str) -> None:
        try:
            await self.flush(group_id)
        except GroupError as exc:
            log.warning("event=consumer_group_write_failed group=%s error=%r", group_id, exc)

    def expire(self) -> None:
        """`ConsumerGroups.expire`, then the changed groups written."""
        epochs = {g: group.epoch for g, group in self.groups.groups.items()}
        if self.groups.expire():
            changed = [g for g, group in self.groups.groups.items() if epochs.get(g) != group.epoch]
            self.flush_later(changed)

    async def delete(self, group_id: str) -> None:
        """DeleteGroups of an empty consumer group: its tombstones written."""
        self.groups.forget([group_id])
        await self.flush(group_id)

    async def expire_empty(
        self, has_offsets: Callable[[str], bool], owned: Callable[[str], bool]
    ) -> int:
        """Kafka's group cleanup (with offset expiry): an empty consumer group left without
        committed offsets is deleted, tombstones written. Returns how many."""
        doomed = [
            group_id
            for group_id, group in self.groups.groups.items()
            if not group.members and owned(group_id) and not has_offsets(group_id)
        ]
        for group_id in doomed:
            try:
                await self.delete(group_id)
            except GroupError as exc:
                log.warning("event=consumer_group_expiry_failed group=%s error=%r", group_id, exc)
        return len(doomed)

    async def drain(self) -> None:
        if self._background:
            await asyncio.wait(set(self._background))

    # ---- images -----------------------------------------------------------------------------
    def _learn_ids(self, group_id: str, topic_id: TopicIds) -> None:
        group = self.groups.groups.get(group_id)
        if group is None:
            return
        known = self.topic_ids.setdefault(group_id, {})
        for name in group.counts:
            found = topic_id(name)
            if found is not None:
                known[name] = found

    def _next_image(
        self, group: ConsumerGroup, old: Image, member_id: str | None
    ) -> tuple[Image, list[bytes] | None]:
        """The group's new image and the keys that may differ from `old` (None: any)."""
        shape = (group.target_epoch, frozenset(group.members))
        partial = member_id in group.members and self._shapes.get(group.group_id) == shape
        self._shapes[group.group_id] = shape
        if not partial or member_id is None:
            return self.image(group), None
        changed = {**self._group_records(group), **self._member_records(group, member_id)}
        return {**old, **changed}, list(changed)

    def image(self, group: ConsumerGroup) -> Image:
        image = self._group_records(group)
        for member_id in group.members:
            image.update(self._member_records(group, member_id))
        return image

    def _group_records(self, group: ConsumerGroup) -> Image:
        gid, ids = group.group_id, self.topic_ids.get(group.group_id, {})
        return {
            _key(3, gid): rec.encode_group_metadata(group.epoch),
            _key(4, gid): rec.encode_partition_metadata(
                [
                    rec.TopicMetadata(ids[t], t, n)
                    for t, n in sorted(group.counts.items())
                    if t in ids
                ]
            ),
            _key(6, gid): rec.encode_target_metadata(group.target_epoch),
        }

    def _member_records(self, group: ConsumerGroup, member_id: str) -> Image:
        gid, ids = group.group_id, self.topic_ids.get(group.group_id, {})
        member, target = group.members[member_id], group.target.get(member_id, {})
        return {
            _key(5, gid, member_id): rec.encode_member_metadata(_metadata(member)),
            _key(7, gid, member_id): rec.encode_target_member(_by_id(target, ids)),
            _key(8, gid, member_id): rec.encode_current_assignment(_current(member, target, ids)),
        }

    # ---- loading ----------------------------------------------------------------------------
    def install(self, loaded: dict[str, Image]) -> None:
        """Groups read back from an offsets partition this broker now coordinates."""
        for group_id, image in loaded.items():
            try:
                group, ids = self._decode(group_id, image)
            except GroupRecordError as exc:
                log.error("event=consumer_group_unreadable group=%s error=%r", group_id, exc)
                continue
            if group is None:
                continue
            self.groups.groups[group_id] = group
            self.topic_ids[group_id] = ids
            self.written[group_id] = dict(image)
            log.info(
                "event=consumer_group_loaded group=%s epoch=%d members=%d",
                group_id, group.epoch, len(group.members),
            )  # fmt: skip

    def _decode(
        self, group_id: str, image: Image
    ) -> tuple[ConsumerGroup | None, dict[str, uuid.UUID]]:
        epoch_record = image.get(_key(3, group_id))
        if epoch_record is None:
            return None, {}
        group = ConsumerGroup(group_id, epoch=rec.decode_group_metadata(epoch_record))
        topics = rec.decode_partition_metadata(image.get(_key(4, group_id)) or _EMPTY_TOPICS)
        names = {t.topic_id: t.name for t in topics}
        group.counts = {t.name: t.partitions for t in topics}
        target_epoch = image.get(_key(6, group_id))
        group.target_epoch = (
            group.epoch if target_epoch is None else rec.decode_target_metadata(target_epoch)
        )
        now, session_s = (
            self.clock.monotonic(),
            self.groups.config.consumer_session_timeout_ms / 1000,
        )
        deadline = now + session_s
        for key, value in image.items():
            parsed = rec.decode_consumer_key(key)
            if parsed is None or parsed.record_type != 5 or parsed.member_id is None:
                continue
            member = _member(parsed.member_id, rec.decode_member_metadata(value), deadline)
            current = image.get(_key(8, group_id, parsed.member_id))
            if current is not None:
                _apply_current(member, rec.decode_current_assignment(current), names)
            target = image.get(_key(7, group_id, parsed.member_id))
            group.target[member.member_id] = _by_name(
                {} if target is None else rec.decode_target_member(target), names
            )
            member.sent = _current_view(member, group.target[member.member_id])
            if member.sent != {t: p for t, p in member.assigned.items() if p}:
                # still revoking: a fresh rebalance deadline, as Kafka's onLoaded
                member.revoke_deadline = now + _rebalance_s(member, session_s)
            group.members[member.member_id] = member
        chosen = [m.assignor for m in group.members.values() if m.assignor]
        group.assignor = chosen[0] if chosen else self.groups.config.consumer_assignors[0]
        return group, {name: topic_id for topic_id, name in names.items()}

    def forget(self, group_ids: Iterable[str]) -> None:
        """No longer the coordinator of these groups (their partition moved)."""
        ids = list(group_ids)
        self.groups.forget(ids)
        for group_id in ids:
            self._drop(group_id)

    def _drop(self, group_id: str) -> None:
        self.written.pop(group_id, None)
        self._shapes.pop(group_id, None)
        self.topic_ids.pop(group_id, None)
        lock = self._locks.get(group_id)
        if lock is not None and not lock.locked():
            del self._locks[group_id]


_EMPTY_TOPICS = rec.encode_partition_metadata([])


def _key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    return rec.encode_key(rec.ConsumerKey(record_type, group_id, member_id))


def delta(old: Image, new: Image, keys: list[bytes] | None = None) -> list[Entry]:
    """The records that turn `old` into `new`, in Kafka's order (`keys`: the only candidates)."""
    if keys is not None:
        return sorted(
            [(k, new[k]) for k in keys if old.get(k) != new[k]],
            key=lambda e: _WRITE_ORDER.index(_type(e)),
        )
    writes: list[Entry] = [(k, v) for k, v in new.items() if old.get(k) != v]
    gone: list[Entry] = [(k, None) for k in old if k not in new]
    member_gone = [e for e in gone if _type(e) in rec.MEMBER_KEYS]
    group_gone = [e for e in gone if _type(e) not in rec.MEMBER_KEYS]
    return [
        *sorted(member_gone, key=lambda e: _MEMBER_TOMBSTONE_ORDER.index(_type(e))),
        *sorted(writes, key=lambda e: _WRITE_ORDER.index(_type(e))),
        *sorted(group_gone, key=lambda e: _GROUP_TOMBSTONE_ORDER.index(_type(e))),
    ]


def _type(entry: Entry) -> int:
    return int.from_bytes(entry[0][:2], "big", signed=True)


def _metadata(member: ConsumerMember) -> rec.MemberMetadata:
    return rec.MemberMetadata(
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(member.subscribed)),
        subscribed_topic_regex=getattr(member, "regex", "") or None,
        rebalance_timeout_ms=getattr(member, "rebalance_timeout_ms", -1),
        server_assignor=member.assignor,
    )


def _member(member_id: str, meta: rec.MemberMetadata, deadline: float) -> ConsumerMember:
    member = ConsumerMember(
        member_id, meta.client_id, meta.client_host, meta.instance_id, meta.rack_id,
        subscribed=frozenset(meta.subscribed_topic_names), assignor=meta.server_assignor,
    )  # fmt: skip
    if meta.subscribed_topic_regex and hasattr(member, "regex"):
        member.regex = meta.subscribed_topic_regex
    if hasattr(member, "rebalance_timeout_ms"):
        member.rebalance_timeout_ms = meta.rebalance_timeout_ms
    member.deadline = deadline
    return member


def _current(
    member: ConsumerMember, target: Partitions, ids: dict[str, uuid.UUID]
) -> rec.CurrentAssignment:
    kept = {t: p & target.get(t, set()) for t, p in member.assigned.items()}
    pending = {t: p - target.get(t, set()) for t, p in member.assigned.items()}
    state = rec.STABLE
    if any(pending.values()):
        state = rec.UNREVOKED_PARTITIONS
    elif {t: p for t, p in kept.items() if p} != {t: p for t, p in target.items() if p}:
        state = rec.UNRELEASED_PARTITIONS
    return rec.CurrentAssignment(
        member.epoch, member.previous_epoch, state, _by_id(kept, ids), _by_id(pending, ids)
    )


def _rebalance_s(member: ConsumerMember, session_s: float) -> float:
    timeout = member.rebalance_timeout_ms
    return timeout / 1000 if timeout >= 0 else session_s


def _current_view(member: ConsumerMember, target: Partitions) -> Partitions:
    """What the member was last sent: its owned partitions that are still its target's."""
    kept = {t: p & target.get(t, set()) for t, p in member.assigned.items()}
    return {t: p for t, p in kept.items() if p}


def _apply_current(
    member: ConsumerMember, current: rec.CurrentAssignment, names: dict[uuid.UUID, str]
) -> None:
    member.epoch, member.previous_epoch = current.member_epoch, current.previous_member_epoch
    owned = _by_name(current.assigned, names)
    for topic, parts in _by_name(current.pending_revocation, names).items():
        owned[topic] = owned.get(topic, set()) | parts
    member.assigned = owned


def _by_id(partitions: Partitions, ids: dict[str, uuid.UUID]) -> rec.TopicIdPartitions:
    return rec.sorted_partitions({ids[t]: p for t, p in partitions.items() if t in ids})


def _by_name(partitions: rec.TopicIdPartitions, names: dict[uuid.UUID, str]) -> Partitions:
    return {names[t]: set(p) for t, p in partitions.items() if t in names and p}
