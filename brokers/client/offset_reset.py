"""Planning and applying a consumer group offset reset, as kafka-consumer-groups.sh does.

Owns: `ResetSpec`, `PartitionReset`, `plan_reset` (pure: targets from committed, earliest and
latest offsets) and `prepare_reset` / `execute_reset` (ask the cluster, commit the plan).
Kafka's rules, mirrored from its ConsumerGroupCommand:
- every target is clamped into [log start offset, log end offset];
- --to-datetime takes the first offset whose timestamp is ≥ the time, or the log end if none;
- --shift-by needs a committed offset for every partition it shifts (an error otherwise).
Resets commit with generation -1 (a "simple" commit), which a coordinator accepts only from an
inactive group; callers check the group state first. Runs on the event loop (plan_reset is pure).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from brokers.client.cluster import Cluster
from brokers.client.errors import OffsetResetError
from brokers.client.group_offsets import commit_offsets, fetch_offsets
from brokers.client.metadata import TopicPartition
from brokers.client.offsets import EARLIEST, LATEST, list_offsets


class ResetKind(enum.Enum):
    EARLIEST = "to-earliest"
    LATEST = "to-latest"
    OFFSET = "to-offset"
    DATETIME = "to-datetime"
    SHIFT = "shift-by"


@dataclass(frozen=True, slots=True)
class ResetSpec:
    kind: ResetKind
    value: int = 0  # the offset, the timestamp in ms, or the shift


@dataclass(frozen=True, slots=True)
class PartitionReset:
    tp: TopicPartition
    current: int | None  # the committed offset, None if the group has none
    target: int


def plan_reset(
    spec: ResetSpec,
    partitions: Sequence[TopicPartition],
    committed: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    by_time: Mapping[TopicPartition, int] | None = None,
) -> list[PartitionReset]:
    plan = []
    for tp in sorted(partitions):
        start, end = earliest[tp], latest[tp]
        wanted = _wanted(spec, tp, committed, start, end, by_time or {})
        plan.append(PartitionReset(tp, committed.get(tp), min(max(wanted, start), end)))
    return plan


def _wanted(
    spec: ResetSpec,
    tp: TopicPartition,
    committed: Mapping[TopicPartition, int],
    start: int,
    end: int,
    by_time: Mapping[TopicPartition, int],
) -> int:
    if spec.kind is ResetKind.EARLIEST:
        return start
    if spec.kind is ResetKind.LATEST:
        return end
    if spec.kind is ResetKind.OFFSET:
        return spec.value
    if spec.kind is ResetKind.DATETIME:
        found = by_time.get(tp, -1)
        return end if found < 0 else found
    current = committed.get(tp)
    if current is None:
        raise OffsetResetError(
            f"cannot shift offset for partition {tp}: the group has no committed offset there"
        )
    return current + spec.value


async def prepare_reset(
    cluster: Cluster, group_id: str, spec: ResetSpec, partitions: Sequence[TopicPartition]
) -> list[PartitionReset]:
    """Ask the cluster for what `plan_reset` needs and plan; nothing is committed."""
    committed = {tp: c.offset for tp, c in (await fetch_offsets(cluster, group_id)).items()}
    earliest = await list_offsets(cluster, dict.fromkeys(partitions, EARLIEST))
    latest = await list_offsets(cluster, dict.fromkeys(partitions, LATEST))
    by_time = None
    if spec.kind is ResetKind.DATETIME:
        found = await list_offsets(cluster, dict.fromkeys(partitions, spec.value))
        by_time = {tp: listed.offset for tp, listed in found.items()}
    return plan_reset(
        spec,
        partitions,
        committed,
        {tp: listed.offset for tp, listed in earliest.items()},
        {tp: listed.offset for tp, listed in latest.items()},
        by_time,
    )


async def execute_reset(cluster: Cluster, group_id: str, plan: Sequence[PartitionReset]) -> None:
    await commit_offsets(cluster, group_id, {entry.tp: entry.target for entry in plan})
