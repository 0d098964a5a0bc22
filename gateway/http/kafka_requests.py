"""The Kafka requests the HTTP API sends, built in the tenant's names at fixed versions.

Owns one builder per request (kio entities; the filters of `gateway.kafka.filters` prefix the
names). Versions are ones Pier's brokers and the gateway's filters both serve, and at which every
field used here exists. Pure; thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any

from brokers.wire.entities import make, request_module

METADATA = (3, 9)
CREATE_TOPICS = (19, 5)
DELETE_TOPICS = (20, 4)
DESCRIBE_CONFIGS = (32, 4)
ALTER_CONFIGS = (44, 1)  # IncrementalAlterConfigs
LIST_GROUPS = (16, 4)
DESCRIBE_GROUPS = (15, 5)
OFFSET_FETCH = (9, 7)
OFFSET_COMMIT = (8, 8)
JOIN_GROUP = (11, 7)
SYNC_GROUP = (14, 5)
HEARTBEAT = (12, 4)
LEAVE_GROUP = (13, 4)
TOPIC_RESOURCE = 2
SET, DELETE = 0, 1  # IncrementalAlterConfigs operations


def _module(api: tuple[int, int]) -> Any:
    return request_module(*api)


def metadata(topics: Sequence[str] | None) -> Any:
    m = _module(METADATA)
    named = (
        None if topics is None else tuple(make(m, "MetadataRequestTopic", name=t) for t in topics)
    )
    return make(
        m,
        "MetadataRequest",
        topics=named,
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def create_topic(
    name: str, partitions: int, replication_factor: int, configs: Mapping[str, str | None]
) -> Any:
    m = _module(CREATE_TOPICS)
    topic = make(
        m,
        "CreatableTopic",
        name=name,
        num_partitions=partitions,
        replication_factor=replication_factor,
        assignments=(),
        configs=tuple(make(m, "CreatableTopicConfig", name=k, value=v) for k, v in configs.items()),
    )
    return make(
        m,
        "CreateTopicsRequest",
        topics=(topic,),
        timeout=timedelta(seconds=30),
        validate_only=False,
    )


def delete_topic(name: str) -> Any:
    return make(
        _module(DELETE_TOPICS),
        "DeleteTopicsRequest",
        topic_names=(name,),
        timeout=timedelta(seconds=30),
    )


def describe_configs(topic: str) -> Any:
    m = _module(DESCRIBE_CONFIGS)
    resource = make(
        m,
        "DescribeConfigsResource",
        resource_type=TOPIC_RESOURCE,
        resource_name=topic,
        configuration_keys=None,
    )
    return make(
        m,
        "DescribeConfigsRequest",
        resources=(resource,),
        include_synonyms=True,
        include_documentation=False,
    )


def alter_configs(topic: str, changes: Sequence[tuple[str, int, str | None]]) -> Any:
    m = _module(ALTER_CONFIGS)
    configs = tuple(
        make(m, "AlterableConfig", name=name, config_operation=op, value=value)
        for name, op, value in changes
    )
    resource = make(
        m,
        "AlterConfigsResource",
        resource_type=TOPIC_RESOURCE,
        resource_name=topic,
        configs=configs,
    )
    return make(m, "IncrementalAlterConfigsRequest", resources=(resource,), validate_only=False)


def list_groups() -> Any:
    return make(_module(LIST_GROUPS), "ListGroupsRequest", states_filter=())


def describe_group(group: str) -> Any:
    return make(
        _module(DESCRIBE_GROUPS),
        "DescribeGroupsRequest",
        groups=(group,),
        include_authorized_operations=False,
    )


def offset_fetch(group: str, partitions: Mapping[str, Sequence[int]] | None) -> Any:
    m = _module(OFFSET_FETCH)
    topics = None
    if partitions is not None:
        topics = tuple(
            make(m, "OffsetFetchRequestTopic", name=t, partition_indexes=tuple(ps))
            for t, ps in partitions.items()
        )
    return make(m, "OffsetFetchRequest", group_id=group, topics=topics, require_stable=False)


def offset_commit(
    group: str, generation: int, member_id: str, offsets: Mapping[tuple[str, int], int]
) -> Any:
    m = _module(OFFSET_COMMIT)
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), offset in offsets.items():
        by_topic.setdefault(topic, []).append(
            make(
                m,
                "OffsetCommitRequestPartition",
                partition_index=partition,
                committed_offset=offset,
                committed_leader_epoch=-1,
                committed_metadata="",
            )
        )
    topics = tuple(
        make(m, "OffsetCommitRequestTopic", name=t, partitions=tuple(ps))
        for t, ps in by_topic.items()
    )
    return make(
        m,
        "OffsetCommitRequest",
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        group_instance_id=None,
        topics=topics,
    )


def join_group(
    group: str, member_id: str, session_timeout_ms: int, rebalance_timeout_ms: int, metadata: bytes
) -> Any:
    m = _module(JOIN_GROUP)
    return make(
        m,
        "JoinGroupRequest",
        group_id=group,
        session_timeout=timedelta(milliseconds=session_timeout_ms),
        rebalance_timeout=timedelta(milliseconds=rebalance_timeout_ms),
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocols=(make(m, "JoinGroupRequestProtocol", name="range", metadata=metadata),),
    )


def sync_group(
    group: str, generation: int, member_id: str, assignments: Mapping[str, bytes]
) -> Any:
    m = _module(SYNC_GROUP)
    return make(
        m,
        "SyncGroupRequest",
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
        protocol_type="consumer",
        protocol_name="range",
        assignments=tuple(
            make(m, "SyncGroupRequestAssignment", member_id=k, assignment=v)
            for k, v in assignments.items()
        ),
    )


def heartbeat(group: str, generation: int, member_id: str) -> Any:
    return make(
        _module(HEARTBEAT),
        "HeartbeatRequest",
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=None,
    )


def leave_group(group: str, member_id: str) -> Any:
    m = _module(LEAVE_GROUP)
    return make(
        m,
        "LeaveGroupRequest",
        group_id=group,
        members=(make(m, "MemberIdentity", member_id=member_id, group_instance_id=None),),
    )
