"""Persistence of KIP-848 consumer groups in `__consumer_offsets`, as Kafka's coordinator does.

Owns: `ConsumerGroupStore` — the *record image* last written for each group (record key →
value, built by `consumer_group_image` from the records `consumer_group_records` defines) and
the groups' topic ids. After any change
(a heartbeat, a session or rebalance timeout, a deletion) `flush` appends the difference as one
batch through the `GroupLog` (the path, acks and replication of offset commits): the records
whose value changed, and tombstones for the keys that went (a member, or the whole group). A
heartbeat's answer waits for that append, so a member never acts on an epoch a failover would
lose; a heartbeat re-encodes only its own member's records unless the membership or the target
epoch changed. `install` turns the records a loader read back
(`loader.LoadedPartition.consumer_records`) into live groups when this broker becomes coordinator: epochs, targets and assignments carry
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
from brokers.coordinator.consumer_group import ConsumerGroup, ConsumerGroups, HeartbeatResult
from brokers.coordinator.consumer_group_image import (
    Image,
    decode_group,
    delta,
    group_records,
    image_of,
    member_records,
)
from brokers.coordinator.errors import GroupError, GroupRecordError
from brokers.coordinator.group_log import GroupLog

log = logging.getLogger("pier.coordinator.consumer")
TopicIds = Callable[[str], uuid.UUID | None]
_UNKNOWN = b""  # an image value never equal to a real one: rewrite it at the next flush


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

    def expire(self) -> list[str]:
        """`ConsumerGroups.expire`, then the changed groups written; returns their ids."""
        changed = list(self.groups.expire_members())
        if changed:
            self.flush_later(changed)
        return changed

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
        ids = self.topic_ids.get(group.group_id, {})
        changed = {**group_records(group, ids), **member_records(group, member_id, ids)}
        return {**old, **changed}, list(changed)

    def image(self, group: ConsumerGroup) -> Image:
        return image_of(group, self.topic_ids.get(group.group_id, {}))

    # ---- loading ----------------------------------------------------------------------------
    def install(self, loaded: dict[str, Image]) -> None:
        """Groups read back from an offsets partition this broker now coordinates."""
        for group_id, image in loaded.items():
            try:
                group, ids = decode_group(
                    group_id, image, self.groups.config, self.clock.monotonic()
                )
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
