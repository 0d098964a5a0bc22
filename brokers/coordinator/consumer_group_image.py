"""A KIP-848 consumer group as its `__consumer_offsets` records (Kafka's types 3-8), and back.

Owns: the *record image* of a `consumer_group.ConsumerGroup` — record key → value for its group
epoch, subscribed topics' metadata and target assignment epoch, and each member's metadata
(a mixed group's classic members with their ClassicMemberMetadata: protocols, session timeout),
target and current assignment (`consumer_group_records` encodes them) — built whole
(`image_of`) or per part (`group_records`, `member_records`); `delta`, the records (tombstones
included) that turn one image into another in Kafka's order; and `decode_group`, a loaded image
back into a live group. Topic names map to ids through the `ids` given; a decoded group maps ids
back through its own ConsumerGroupPartitionMetadata record. Pure; thread-safe.
"""

from __future__ import annotations

import uuid

from brokers.coordinator import consumer_group_records as rec
from brokers.coordinator.config import GroupConfig
from brokers.coordinator.consumer_group import ConsumerGroup, ConsumerMember, Partitions
from brokers.coordinator.consumer_group_migration_state import ClassicMembership
from brokers.coordinator.group_log import Entry

Image = dict[bytes, bytes]
TopicIds = dict[str, uuid.UUID]
# Kafka's order inside one batch: a leaving member's tombstones, then new values from the
# member's metadata to its current assignment, then the group's own tombstones.
_WRITE_ORDER = (5, 3, 4, 7, 6, 8)
_MEMBER_TOMBSTONE_ORDER = (8, 7, 5)
_GROUP_TOMBSTONE_ORDER = (4, 6, 3)


def image_of(group: ConsumerGroup, ids: TopicIds) -> Image:
    image = group_records(group, ids)
    for member_id in group.members:
        image.update(member_records(group, member_id, ids))
    return image


def group_records(group: ConsumerGroup, ids: TopicIds) -> Image:
    gid = group.group_id
    topics = [rec.TopicMetadata(ids[t], t, n) for t, n in sorted(group.counts.items()) if t in ids]
    return {
        _key(3, gid): rec.encode_group_metadata(group.epoch),
        _key(4, gid): rec.encode_partition_metadata(topics),
        _key(6, gid): rec.encode_target_metadata(group.target_epoch),
    }


def member_records(group: ConsumerGroup, member_id: str, ids: TopicIds) -> Image:
    gid = group.group_id
    member, target = group.members[member_id], group.target.get(member_id, {})
    return {
        _key(5, gid, member_id): rec.encode_member_metadata(
            _metadata(member, group.classic.get(member_id))
        ),
        _key(7, gid, member_id): rec.encode_target_member(_by_id(target, ids)),
        _key(8, gid, member_id): rec.encode_current_assignment(_current(member, target, ids)),
    }


def decode_group(
    group_id: str, image: Image, config: GroupConfig, now: float
) -> tuple[ConsumerGroup | None, TopicIds]:
    """The live group of a loaded image (None without its group epoch record) and its topic
    ids; members get fresh session deadlines from `now`. Raises GroupRecordError."""
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
    session_s = config.consumer_session_timeout_ms / 1000
    for key, value in image.items():
        parsed = rec.decode_consumer_key(key)
        if parsed is None or parsed.record_type != 5 or parsed.member_id is None:
            continue
        meta = rec.decode_member_metadata(value)
        member = _member(parsed.member_id, meta, now + session_s)
        if meta.classic is not None:  # a classic member of a mixed group: its own session
            group.classic[member.member_id] = _classic(meta, meta.classic)
            member.deadline = now + meta.classic.session_timeout_ms / 1000
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
    group.assignor = chosen[0] if chosen else config.consumer_assignors[0]
    return group, {name: topic_id for topic_id, name in names.items()}


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


def _metadata(member: ConsumerMember, classic: ClassicMembership | None) -> rec.MemberMetadata:
    return rec.MemberMetadata(
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=tuple(sorted(member.subscribed)),
        subscribed_topic_regex=getattr(member, "regex", "") or None,
        rebalance_timeout_ms=getattr(member, "rebalance_timeout_ms", -1),
        server_assignor=member.assignor,
        classic=None
        if classic is None
        else rec.ClassicMemberMetadata(classic.session_timeout_ms, tuple(classic.protocols)),
    )


def _classic(meta: rec.MemberMetadata, classic: rec.ClassicMemberMetadata) -> ClassicMembership:
    return ClassicMembership(
        classic.supported_protocols, classic.session_timeout_ms, meta.rebalance_timeout_ms
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
