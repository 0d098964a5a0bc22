"""Leadership administration: leader elections and partition reassignments.

Owns: `elect_leaders` (ElectLeaders, KIP-183/460), `alter_partition_reassignments` and
`list_partition_reassignments` (KIP-455), and `PartitionReassignment`. All three go to the
controller named in Metadata, as Kafka's admin client sends them; NOT_CONTROLLER (top level, or per
partition in ElectLeaders v0) is retriable: the metadata is dropped and the request goes to the
controller named next. Results are per partition (None = success); one partition failing does not
fail the others. Runs on the event loop.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from brokers.client.cluster import Cluster
from brokers.client.errors import BrokerResponseError, ClientError, check
from brokers.client.messages import make, millis, request_module
from brokers.client.metadata import TopicPartition
from brokers.client.versions import ApiKey
from brokers.wire.errors import ErrorCode

PREFERRED, UNCLEAN = 0, 1  # ElectLeaders election_type
Outcomes = dict[TopicPartition, ClientError | None]


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def _outcome(tp: TopicPartition, code: int, message: str | None) -> ClientError | None:
    if code == ErrorCode.none:
        return None
    return BrokerResponseError(ErrorCode(code), str(tp), message)


def _by_topic(partitions: Sequence[TopicPartition]) -> dict[str, list[int]]:
    grouped: dict[str, list[int]] = defaultdict(list)
    for tp in sorted(set(partitions)):
        grouped[tp.topic].append(tp.partition)
    return grouped


async def elect_leaders(
    cluster: Cluster,
    partitions: Sequence[TopicPartition] | None = None,
    *,
    unclean: bool = False,
    timeout_s: float = 30.0,
) -> Outcomes:
    """Elect preferred (or, `unclean`, any live) leaders; None = every partition that needs one."""

    async def attempt() -> Outcomes:
        connection = await cluster.controller()
        version = connection.version(ApiKey.ELECT_LEADERS)
        if unclean and version < 1:
            raise BrokerResponseError(ErrorCode.unsupported_version, "unclean election")
        module = request_module(ApiKey.ELECT_LEADERS, version)
        wanted = None
        if partitions is not None:
            wanted = tuple(
                make(module, "TopicPartitions", topic=t, partitions=tuple(ps))
                for t, ps in _by_topic(partitions).items()
            )
        request = make(
            module,
            "ElectLeadersRequest",
            election_type=UNCLEAN if unclean else PREFERRED,
            topic_partitions=wanted,
            timeout=millis(timeout_s),
        )
        response = await connection.send(request, timeout_s=timeout_s + 5.0)
        check(getattr(response, "error_code", ErrorCode.none), "ElectLeaders")
        results: Outcomes = {}
        for topic in response.replica_election_results:
            for p in topic.partition_result:
                tp = TopicPartition(topic.topic, int(p.partition_id))
                if p.error_code == ErrorCode.not_controller:  # v0 has no top-level code
                    check(p.error_code, "ElectLeaders")
                results[tp] = _outcome(tp, p.error_code, p.error_message)
        return results

    return await cluster.call(attempt)


async def alter_partition_reassignments(
    cluster: Cluster,
    targets: Mapping[TopicPartition, Sequence[int] | None],
    *,
    timeout_s: float = 30.0,
) -> Outcomes:
    """Move each partition to its target replicas, or cancel its move (None)."""

    async def attempt() -> Outcomes:
        connection = await cluster.controller()
        version = connection.version(ApiKey.ALTER_PARTITION_REASSIGNMENTS)
        module = request_module(ApiKey.ALTER_PARTITION_REASSIGNMENTS, version)
        topics = tuple(
            make(
                module,
                "ReassignableTopic",
                name=topic,
                partitions=tuple(
                    make(
                        module,
                        "ReassignablePartition",
                        partition_index=p,
                        replicas=_replicas(targets[TopicPartition(topic, p)]),
                    )
                    for p in ps
                ),
            )
            for topic, ps in _by_topic(list(targets)).items()
        )
        request = make(
            module, "AlterPartitionReassignmentsRequest", topics=topics, timeout=millis(timeout_s)
        )
        response = await connection.send(request, timeout_s=timeout_s + 5.0)
        check(response.error_code, "AlterPartitionReassignments", response.error_message)
        results: Outcomes = {}
        for topic in response.responses:
            for p in topic.partitions:
                tp = TopicPartition(topic.name, int(p.partition_index))
                results[tp] = _outcome(tp, p.error_code, p.error_message)
        return results

    return await cluster.call(attempt)


def _replicas(target: Sequence[int] | None) -> tuple[int, ...] | None:
    return None if target is None else tuple(target)


async def list_partition_reassignments(
    cluster: Cluster, partitions: Sequence[TopicPartition] | None = None
) -> dict[TopicPartition, PartitionReassignment]:
    """The partitions being reassigned (all, or among `partitions`)."""

    async def attempt() -> dict[TopicPartition, PartitionReassignment]:
        connection = await cluster.controller()
        version = connection.version(ApiKey.LIST_PARTITION_REASSIGNMENTS)
        module = request_module(ApiKey.LIST_PARTITION_REASSIGNMENTS, version)
        topics: Any = None
        if partitions is not None:
            topics = tuple(
                make(
                    module, "ListPartitionReassignmentsTopics", name=t, partition_indexes=tuple(ps)
                )
                for t, ps in _by_topic(partitions).items()
            )
        response = await connection.send(
            make(module, "ListPartitionReassignmentsRequest", topics=topics)
        )
        check(response.error_code, "ListPartitionReassignments", response.error_message)
        return {
            TopicPartition(topic.name, int(p.partition_index)): PartitionReassignment(
                tuple(p.replicas), tuple(p.adding_replicas), tuple(p.removing_replicas)
            )
            for topic in response.topics
            for p in topic.partitions
        }

    return await cluster.call(attempt)
