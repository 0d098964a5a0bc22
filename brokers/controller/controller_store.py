"""The controller's reads and writes of ZooKeeper (Kafka's `KafkaZkClient` as the controller uses it).

Owns: creating the top-level paths and `/cluster/id`; loading a `ControllerContext` (topics with
ids, assignments, configs, partition states with their znode versions); reading topics, partition
states and ISR-change notifications again when watches fire; writing a decision's partition
states in multi-ops of at most `MAX_OPS_PER_MULTI` partitions, each fenced by the controller
epoch (`election.fence()`): states that exist are set conditionally on the version the context
holds, new ones are created with their parent znodes in the same multi (10,000 new partitions
are 500 round trips, not a kazoo `ensure_path` chain each). One unbounded multi would exceed ZooKeeper's jute.maxbuffer for a
few thousand partitions (Kafka pipelines one fenced request per partition instead). If a
condition fails in the first chunk nothing is written and `ZNodeVersionError` is raised: the
caller re-reads and decides again, or finds that it was deposed; in a later chunk the chunks
written are recorded in the context first and `PartialWriteError` names them.
Rewrites partitions' replica assignments in `/brokers/topics/<t>` (KIP-455 reassignments:
replicas, adding, removing) fenced the same way, conditional on the topic znode's version
(re-read and retried when a topic admin wrote in between).
Also deletes a topic's znodes once its deletion is done.
Runs on the controller's event loop; not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence

from brokers.controller import zk_paths
from brokers.controller.context import ControllerContext
from brokers.controller.errors import (
    ControllerError,
    ControllerMovedError,
    ZNodeExistsError,
    ZNodeFormatError,
    ZNodeMissingError,
    ZNodeVersionError,
)
from brokers.controller.state import LeaderAndIsr, ReplicaAssignment, TopicPartition, shared
from brokers.controller.zk_client import CheckOp, CreateOp, Op, SetOp, ZkClient

Watch = Callable[[str], None]
ASSIGNMENT_WRITE_ATTEMPTS = 5
# Partition-state writes per multi-op (~165 B each, a new one's two parent creates ~150 B more,
# plus the fence): far below ZooKeeper's default jute.maxbuffer (1 MiB), past which the server
# drops the connection. Small, because ZooKeeper keeps its last 500 proposals in memory for
# followers to sync from (`zookeeper.commitLogCount`, which it never lets below 500), each with
# its ops and their serialized copy: with 500 per multi that was every one of 10,000 new
# partitions' 20,000 creates (ZooKeeper +4 MiB resident against 20 per multi, issue 25); 20 per
# multi keeps at most 10,000 ops there, for 500 round trips per 10,000 partitions instead of 20.
MAX_OPS_PER_MULTI = 20


class PartialWriteError(ControllerError):
    """A later chunk of a decision's writes failed; `written` (already recorded in the context)
    went to ZooKeeper and must still be announced to the brokers. `conflict`: the failure was a
    version conflict (decide again), not a lost connection."""

    def __init__(
        self, message: str, written: dict[TopicPartition, LeaderAndIsr], *, conflict: bool
    ) -> None:
        super().__init__(message)
        self.written = written
        self.conflict = conflict


class ControllerStore:
    def __init__(self, zk: ZkClient, *, max_ops_per_multi: int = MAX_OPS_PER_MULTI) -> None:
        self._zk = zk
        self._max_ops = max_ops_per_multi

    async def create_top_level_paths(self) -> str:
        """Make `PERSISTENT_PATHS` and `/cluster/id` (kept if present); returns the cluster id."""
        for path in zk_paths.PERSISTENT_PATHS:
            await self._zk.ensure_path(path)
        with contextlib.suppress(ZNodeExistsError):
            cluster_id = uuid.uuid4().hex[:22]
            await self._zk.create(zk_paths.CLUSTER_ID, zk_paths.encode_cluster_id(cluster_id))
        return zk_paths.decode_cluster_id((await self._zk.get(zk_paths.CLUSTER_ID)).data)

    async def topic_names(self, watch: Watch | None = None) -> list[str]:
        return await self._zk.children(zk_paths.BROKER_TOPICS, watch)

    async def read_topic(
        self, topic: str, watch: Watch | None = None
    ) -> zk_paths.TopicAssignment | None:
        """The topic's assignment (None if gone); `watch` fires on partition growth."""
        try:
            node = await self._zk.get(zk_paths.topic_path(topic), watch)
        except (ZNodeMissingError, ZNodeFormatError):
            return None
        return zk_paths.decode_topic(node.data)

    async def read_config(self, topic: str) -> dict[str, str]:
        try:
            node = await self._zk.get(zk_paths.topic_config_path(topic))
        except ZNodeMissingError:
            return {}
        return zk_paths.decode_topic_config(node.data)

    async def read_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        try:
            node = await self._zk.get(zk_paths.partition_state_path(tp))
        except ZNodeMissingError:
            return None
        return zk_paths.decode_partition_state(node.data, node.version)

    async def load_topic(
        self, context: ControllerContext, topic: str, watch: Watch | None = None
    ) -> list[TopicPartition]:
        """Read one topic into the context; returns its partitions that have no state yet."""
        assignment = await self.read_topic(topic, watch)
        if assignment is None:
            return []
        # The context's own keys: leadership then shares them with assignments.
        tps = context.add_topic(topic, assignment.topic_id or uuid.uuid4(), assignment.partitions)
        context.topic_configs[topic] = await self.read_config(topic)
        # A new topic has no `partitions` znode: one round trip rather than one per partition.
        try:
            with_znode = set(await self._zk.children(f"{zk_paths.topic_path(topic)}/partitions"))
        except ZNodeMissingError:
            with_znode = set()
        known = [tp for tp in tps if str(tp.partition) in with_znode]
        states = await asyncio.gather(*(self.read_state(tp) for tp in known))
        found = {tp: state for tp, state in zip(known, states, strict=True) if state is not None}
        context.leadership.update(found)
        return [tp for tp in tps if tp not in found]

    async def topics_to_delete(self, watch: Watch | None = None) -> list[str]:
        return await self._zk.children(zk_paths.DELETE_TOPICS, watch)

    async def isr_changes(
        self, watch: Watch | None = None
    ) -> tuple[list[str], set[TopicPartition]]:
        """Notification znode names and the partitions they name (bad ones are skipped)."""
        names = await self._zk.children(zk_paths.ISR_CHANGE_NOTIFICATION, watch)
        changed: set[TopicPartition] = set()
        for name in names:
            with contextlib.suppress(ZNodeMissingError, ZNodeFormatError):
                node = await self._zk.get(f"{zk_paths.ISR_CHANGE_NOTIFICATION}/{name}")
                changed.update(zk_paths.decode_isr_change(node.data))
        return names, changed

    async def delete_isr_changes(self, names: Iterable[str]) -> None:
        for name in names:
            with contextlib.suppress(ZNodeMissingError):
                await self._zk.delete(f"{zk_paths.ISR_CHANGE_NOTIFICATION}/{name}")

    async def write_states(
        self,
        fence: CheckOp,
        context: ControllerContext,
        changes: Mapping[TopicPartition, LeaderAndIsr],
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """Write `changes` under the fence, in chunks; the states with their new znode versions.

        One chunk is all-or-nothing. If a later chunk fails, the chunks already written are
        recorded in `context` and `PartialWriteError` names them, so the context never holds a
        stale znode version and the caller can still announce them."""
        if not changes:
            return {}
        order = sorted(changes)
        # Topics with a state znode already have their `partitions` znode.
        with_parent = {tp.topic for tp in context.leadership}
        written: dict[TopicPartition, LeaderAndIsr] = {}
        for first in range(0, len(order), self._max_ops):
            chunk = order[first : first + self._max_ops]
            try:
                written.update(await self._write_chunk_making_parents(
                    fence, context, chunk, changes, with_parent
                ))  # fmt: skip
            except ControllerError as exc:
                if not written:
                    raise
                context.apply(written)
                conflict = isinstance(exc, ZNodeVersionError)
                raise PartialWriteError(str(exc), written, conflict=conflict) from exc
        return written

    async def _write_chunk_making_parents(
        self,
        fence: CheckOp,
        context: ControllerContext,
        chunk: Sequence[TopicPartition],
        changes: Mapping[TopicPartition, LeaderAndIsr],
        with_parent: set[str],
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """`_write_chunk` with a new state's parent znodes created in the same multi (the
        `partitions` znode once per topic not in `with_parent`, which is updated): a chunk of
        new partitions is one round trip. A parent that exists after all (a write that failed
        half way before, partitions added to a topic whose states the context lacks), or a
        `partitions` znode assumed that is not there, fails the multi, which wrote nothing: then
        the parents are made with `ensure_path` (all requests in flight at once) and the chunk
        written without them, as before this fast path."""
        new = [tp for tp in chunk if tp not in context.leadership]
        parents: list[str] = []
        for tp in new:
            partitions_path = f"{zk_paths.topic_path(tp.topic)}/partitions"
            if tp.topic not in with_parent:
                parents.append(partitions_path)
                with_parent.add(tp.topic)
            parents.append(f"{partitions_path}/{tp.partition}")
        try:
            return await self._write_chunk(fence, context, chunk, changes, parents)
        except (ZNodeExistsError, ZNodeMissingError):  # a parent was there, or was not
            await asyncio.gather(*(self._zk.ensure_path(path) for path in parents))
            return await self._write_chunk(fence, context, chunk, changes, [])

    async def _write_chunk(
        self,
        fence: CheckOp,
        context: ControllerContext,
        chunk: Sequence[TopicPartition],
        changes: Mapping[TopicPartition, LeaderAndIsr],
        parents: Sequence[str] = (),
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """One fenced multi: `parents` created (in order), existing states set on the
        context's version, new ones created."""
        ops: list[Op] = [fence, *(CreateOp(path, b"") for path in parents)]
        for tp in chunk:
            data = zk_paths.encode_partition_state(changes[tp])
            current = context.leadership.get(tp)
            path = zk_paths.partition_state_path(tp)
            ops.append(SetOp(path, data, current.zk_version) if current else CreateOp(path, data))
        results = await self._zk.multi(ops)
        first_state = 1 + len(parents)
        written: dict[TopicPartition, LeaderAndIsr] = {}
        for tp, op, result in zip(chunk, ops[first_state:], results[first_state:], strict=True):
            version = int(result.version) if isinstance(op, SetOp) else 0
            state = changes[tp]
            written[tp] = shared(
                LeaderAndIsr(
                    state.leader,
                    state.leader_epoch,
                    shared(state.isr),
                    state.controller_epoch,
                    version,
                )
            )
        return written

    async def write_assignments(
        self, fence: CheckOp, topic: str, changes: Mapping[int, ReplicaAssignment]
    ) -> None:
        """Replace some partitions' assignments in `/brokers/topics/<topic>`, keeping the rest."""
        path = zk_paths.topic_path(topic)
        for _ in range(ASSIGNMENT_WRITE_ATTEMPTS):
            node = await self._zk.get(path)
            current = zk_paths.decode_topic(node.data)
            updated = zk_paths.TopicAssignment(current.topic_id, {**current.partitions, **changes})
            data = zk_paths.encode_topic(updated)
            try:
                await self._zk.multi([fence, SetOp(path, data, node.version)])
                return
            except ZNodeVersionError:
                if not await self._fence_holds(fence):
                    raise ControllerMovedError("the controller epoch moved on") from None
        raise ZNodeVersionError(f"{path} kept changing under the controller")

    async def _fence_holds(self, fence: CheckOp) -> bool:
        return (await self._zk.get(fence.path)).version == fence.version

    async def delete_topic(self, topic: str) -> None:
        """Remove the topic's znodes, its config and its deletion request (children first)."""
        base = zk_paths.topic_path(topic)
        paths = []
        with contextlib.suppress(ZNodeMissingError):
            for p in await self._zk.children(f"{base}/partitions"):
                paths += [f"{base}/partitions/{p}/state", f"{base}/partitions/{p}"]
        paths += [f"{base}/partitions", base, zk_paths.topic_config_path(topic)]
        paths.append(zk_paths.delete_topic_path(topic))
        for path in paths:
            with contextlib.suppress(ZNodeMissingError):
                await self._zk.delete(path)
