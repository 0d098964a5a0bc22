"""Replica assignment for new topics and partitions, rack-aware (Kafka's `AdminUtils.assignReplicasToBrokers`).

Owns: choosing which brokers hold each new partition's replicas. Goals, as in Kafka:
1. spread replicas evenly among brokers (and leaders: the first replica);
2. put a partition's replicas on distinct brokers;
3. with racks, put a partition's replicas on distinct racks when there are at least as many racks
   as replicas, otherwise use every rack before repeating one.
Without racks the leader of partition p is broker `(p + start) mod n` and the followers are shifted
by an amount that grows every n partitions (so follower sets differ). With racks the same walk runs
over a rack-alternating broker list (rack1-b0, rack2-b0, rack1-b1, ...) and skips brokers whose rack
(or broker) already holds a replica. The random start is injected (`start_index`, `rng`) so tests
are deterministic. Pure; thread-safe.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from brokers.controller.errors import (
    InconsistentRackError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
)


def assign_replicas(
    brokers: Mapping[int, str | None],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int | None = None,
    start_partition: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Replicas for partitions `start_partition .. start_partition + partitions - 1`.

    `brokers` maps broker id → rack (None when the broker has no rack). Either every broker has a
    rack or none does. `start_index` fixes the first leader (Kafka picks it at random).
    """
    if partitions <= 0:
        raise InvalidPartitionsError(
            f"number of partitions must be larger than 0, got {partitions}"
        )
    if replication_factor <= 0:
        raise InvalidReplicationFactorError("replication factor must be larger than 0")
    if replication_factor > len(brokers):
        raise InvalidReplicationFactorError(
            f"Unable to replicate the partition {replication_factor} time(s): The target "
            f"replication factor of {replication_factor} cannot be reached because only "
            f"{len(brokers)} broker(s) are registered."
        )
    racks = [rack for rack in brokers.values() if rack is not None]
    if racks and len(racks) != len(brokers):
        raise InconsistentRackError("not all brokers have rack information")
    chooser = rng or random.Random()
    start = start_index if start_index is not None else chooser.randrange(len(brokers))
    shift = start_index if start_index is not None else chooser.randrange(len(brokers))
    if racks:
        return _rack_aware(brokers, partitions, replication_factor, start, shift, start_partition)
    ordered = sorted(brokers)
    return _rack_unaware(ordered, partitions, replication_factor, start, shift, start_partition)


def _replica_index(first: int, shift: int, replica: int, n: int) -> int:
    # Never 0: a follower is never the leader's own slot.
    return (first + 1 + (shift + replica) % (n - 1)) % n


def _rack_unaware(
    ordered: list[int], partitions: int, rf: int, start: int, shift: int, first_partition: int
) -> dict[int, list[int]]:
    n = len(ordered)
    result: dict[int, list[int]] = {}
    for partition in range(max(0, first_partition), max(0, first_partition) + partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [ordered[first]]
        replicas += [ordered[_replica_index(first, shift, j, n)] for j in range(rf - 1)]
        result[partition] = replicas
    return result


def rack_alternated(brokers: Mapping[int, str | None]) -> list[int]:
    """Brokers ordered by taking one from each rack in turn (racks and brokers sorted)."""
    by_rack: dict[str, list[int]] = {}
    for broker, rack in sorted(brokers.items()):
        by_rack.setdefault(rack or "", []).append(broker)
    queues = [by_rack[rack] for rack in sorted(by_rack)]
    ordered: list[int] = []
    depth = 0
    while len(ordered) < len(brokers):
        ordered += [queue[depth] for queue in queues if depth < len(queue)]
        depth += 1
    return ordered


def _rack_aware(
    brokers: Mapping[int, str | None],
    partitions: int,
    rf: int,
    start: int,
    shift: int,
    first_partition: int,
) -> dict[int, list[int]]:
    ordered = rack_alternated(brokers)
    n, rack_count = len(ordered), len(set(brokers.values()))
    result: dict[int, list[int]] = {}
    for partition in range(max(0, first_partition), max(0, first_partition) + partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        replicas = [ordered[first]]
        used_racks = {brokers[ordered[first]]}
        k = 0
        while len(replicas) < rf:
            broker = ordered[_replica_index(first, shift * rack_count, k, n)]
            k += 1
            rack_ok = brokers[broker] not in used_racks or len(used_racks) == rack_count
            # Terminates: k walks every non-leader slot, and rf <= n leaves one to take.
            if rack_ok and broker not in replicas:
                replicas.append(broker)
                used_racks.add(brokers[broker])
        result[partition] = replicas
    return result
