"""A consumer group's committed offsets: fetch them, and commit new ones.

Owns: `fetch_offsets` (OffsetFetch v2–7 single-group shape, v8+ batched-groups shape of KIP-709)
and `commit_offsets`. Commits default to generation -1 and an empty member id: Kafka's "simple"
commit, accepted only while the group has no active members — what offset resets and tools use.
Both go through the group coordinator and are retried when it moves or is loading.
Runs on the event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from brokers.client.cluster import Cluster
from brokers.client.errors import check
from brokers.client.messages import make, request_module
from brokers.client.metadata import TopicPartition
from brokers.client.versions import ApiKey

BATCHED_GROUPS_VERSION = 8
NO_OFFSET = -1


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str | None


async def fetch_offsets(
    cluster: Cluster, group_id: str, partitions: Sequence[TopicPartition] | None = None
) -> dict[TopicPartition, CommittedOffset]:
    """Committed offsets of `partitions` (None: every partition the group committed); partitions
    without a committed offset are left out."""

    async def attempt() -> dict[TopicPartition, CommittedOffset]:
        connection = await cluster.coordinator(group_id)
        version = connection.version(ApiKey.OFFSET_FETCH)
        response = await connection.send(_fetch_request(version, group_id, partitions))
        group = response.groups[0] if version >= BATCHED_GROUPS_VERSION else response
        check(getattr(group, "error_code", 0), f"group {group_id}")
        return _committed(group.topics)

    return await cluster.call(attempt)


def _fetch_request(version: int, group_id: str, partitions: Sequence[TopicPartition] | None) -> Any:
    module = request_module(ApiKey.OFFSET_FETCH, version)
    batched = version >= BATCHED_GROUPS_VERSION
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        name = "OffsetFetchRequestTopics" if batched else "OffsetFetchRequestTopic"
        topics = tuple(
            make(module, name, name=t, partition_indexes=tuple(ps)) for t, ps in by_topic.items()
        )
    if not batched:
        return make(module, "OffsetFetchRequest", group_id=group_id, topics=topics)
    group = make(module, "OffsetFetchRequestGroup", group_id=group_id, topics=topics)
    return make(module, "OffsetFetchRequest", groups=(group,), require_stable=False)


def _committed(topics: Any) -> dict[TopicPartition, CommittedOffset]:
    committed: dict[TopicPartition, CommittedOffset] = {}
    for topic in topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, int(p.partition_index))
            check(p.error_code, str(tp))
            if p.committed_offset != NO_OFFSET:
                epoch = int(getattr(p, "committed_leader_epoch", -1))
                committed[tp] = CommittedOffset(int(p.committed_offset), epoch, p.metadata)
    return committed


async def commit_offsets(
    cluster: Cluster,
    group_id: str,
    offsets: Mapping[TopicPartition, int],
    *,
    generation_id: int = -1,
    member_id: str = "",
    metadata: str = "",
) -> None:
    """Commit `offsets`; raises the first partition's error."""

    async def attempt() -> None:
        connection = await cluster.coordinator(group_id)
        version = connection.version(ApiKey.OFFSET_COMMIT)
        request = _commit_request(version, group_id, offsets, generation_id, member_id, metadata)
        response = await connection.send(request)
        for topic in response.topics:
            for p in topic.partitions:
                check(p.error_code, f"{topic.name}-{p.partition_index}")

    await cluster.call(attempt)


def _commit_request(
    version: int,
    group_id: str,
    offsets: Mapping[TopicPartition, int],
    generation_id: int,
    member_id: str,
    metadata: str,
) -> Any:
    module = request_module(ApiKey.OFFSET_COMMIT, version)
    by_topic: dict[str, list[Any]] = {}
    for tp, offset in offsets.items():
        by_topic.setdefault(tp.topic, []).append(
            make(
                module,
                "OffsetCommitRequestPartition",
                partition_index=tp.partition,
                committed_offset=offset,
                committed_leader_epoch=-1,
                committed_metadata=metadata,
            )
        )
    return make(
        module,
        "OffsetCommitRequest",
        group_id=group_id,
        generation_id_or_member_epoch=generation_id,
        member_id=member_id,
        group_instance_id=None,
        topics=tuple(
            make(module, "OffsetCommitRequestTopic", name=t, partitions=tuple(ps))
            for t, ps in by_topic.items()
        ),
    )
