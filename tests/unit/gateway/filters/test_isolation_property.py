"""Isolation property of the topic/config/cluster filters: whatever the tenant asks and whatever
the fleet answers (names of this tenant, of another tenant `bolt`, internal topics, messages
naming them), the client sees none of another tenant's names, no internal topic, and no prefix."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers.wire.entities import known_fields, request_module, response_module
from brokers.wire.errors import ErrorCode
from gateway.kafka.filter import Forward
from gateway.kafka.filters import (
    alter_configs,
    create_partitions,
    create_topics,
    delete_records,
    delete_topics,
    describe_cluster,
    describe_configs,
    find_coordinator,
    incremental_alter_configs,
    list_offsets,
    metadata,
    offset_for_leader_epoch,
)
from tests.unit.gateway.filters.harness import FakeAccess, FakeFleet, context, request, response

pytestmark = pytest.mark.unit
FORBIDDEN = ("bolt_", "__consumer_offsets", "acme_")
local_names = st.lists(st.from_regex(r"[a-z0-9.-]{1,8}", fullmatch=True), min_size=1, max_size=4)
fleet_names = st.lists(
    st.one_of(
        local_names.map(lambda names: "acme_" + names[0]),
        local_names.map(lambda names: "bolt_" + names[0]),
        st.sampled_from(["__consumer_offsets", "__transaction_state", "plain"]),
    ),
    max_size=6,
)
messages = st.sampled_from([None, "Topic 'bolt_x' already exists.", "see __consumer_offsets", "ok"])
Build = Callable[[ModuleType, int, list[str], list[str], str | None], tuple[Any, Any]]


def _r(m: ModuleType, v: int, name: str, /, **f: Any) -> Any:
    """A request entity from a bag of fields shared by several APIs: those it has are used."""
    known = known_fields(request_module(m.API_KEY, v), name)
    return request(m, v, name, **{k: x for k, x in f.items() if k in known})


def _a(m: ModuleType, v: int, name: str, /, **f: Any) -> Any:
    defaults = dict(
        error_code=ErrorCode.none,
        error_message=None,
        partitions=(),
        timestamp=-1,
        offset=-1,
        leader_epoch=-1,
        end_offset=-1,
        low_watermark=0,
        partition=0,
        partition_index=0,
        topic_id=None,
        is_internal=False,
        topic_config_error_code=0,
        num_partitions=1,
        replication_factor=1,
        configs=(),
        node_id=1,
        host="h",
        port=1,
        topic_authorized_operations=-(2**31),
        read_only=False,
        config_source=4,
        is_sensitive=False,
        synonyms=(),
        config_type=0,
        documentation=None,
    )
    known = known_fields(response_module(m.API_KEY, v), name)  # a default only where it fits
    fitting = {k: x for k, x in defaults.items() if k in known}
    return response(m, v, name, **{**fitting, **f})


def _per_topic(
    req: str, topic: str, part: str, resp: str, topic_resp: str, part_resp: str, field: str
) -> Build:
    def build(
        m: ModuleType, v: int, names: list[str], fleet: list[str], msg: str | None
    ) -> tuple[Any, Any]:
        p = _r(
            m,
            v,
            part,
            partition_index=0,
            partition=0,
            timestamp=-1,
            offset=1,
            current_leader_epoch=-1,
            leader_epoch=0,
        )
        topics = tuple(_r(m, v, topic, **{field: n}, partitions=(p,)) for n in names)
        request_ = _r(m, v, req, topics=topics, replica_id=-1, isolation_level=0, timeout=0)
        answered = tuple(
            _a(m, v, topic_resp, **{field: n}, partitions=(_a(m, v, part_resp),)) for n in fleet
        )
        return request_, _a(m, v, resp, topics=answered)

    return build


def _metadata(
    m: ModuleType, v: int, names: list[str], fleet: list[str], msg: str | None
) -> tuple[Any, Any]:
    topics = tuple(_r(m, v, "MetadataRequestTopic", name=n, topic_id=None) for n in names)
    req = _r(
        m,
        v,
        "MetadataRequest",
        topics=topics,
        allow_auto_topic_creation=True,
        include_cluster_authorized_operations=True,
        include_topic_authorized_operations=True,
    )
    brokers = (_a(m, v, "MetadataResponseBroker", node_id=1, host="bolt_host", port=1, rack="r"),)
    answer = _a(
        m,
        v,
        "MetadataResponse",
        brokers=brokers,
        cluster_id="bolt_cluster",
        controller_id=1,
        topics=tuple(_a(m, v, "MetadataResponseTopic", name=n) for n in fleet),
        cluster_authorized_operations=0,
    )
    return req, answer


def _coordinator(
    m: ModuleType, v: int, names: list[str], fleet: list[str], msg: str | None
) -> tuple[Any, Any]:
    req = _r(
        m, v, "FindCoordinatorRequest", key=names[0], key_type=0, coordinator_keys=tuple(names)
    )
    if v < 4:
        return req, _a(m, v, "FindCoordinatorResponse", error_message=msg, host="bolt_host")
    found = tuple(_a(m, v, "Coordinator", key=n, error_message=msg, host="bolt_h") for n in fleet)
    return req, _a(m, v, "FindCoordinatorResponse", coordinators=found)


def _cluster(
    m: ModuleType, v: int, names: list[str], fleet: list[str], msg: str | None
) -> tuple[Any, Any]:
    req = _r(
        m, v, "DescribeClusterRequest", include_cluster_authorized_operations=True, endpoint_type=1
    )
    brokers = (
        _a(m, v, "DescribeClusterBroker", broker_id=2, host="bolt_h", port=1, rack="bolt_r"),
    )
    return req, _a(
        m,
        v,
        "DescribeClusterResponse",
        error_message=msg,
        endpoint_type=1,
        cluster_id="bolt_c",
        controller_id=2,
        brokers=brokers,
        cluster_authorized_operations=0,
    )


def _create(
    m: ModuleType, v: int, names: list[str], fleet: list[str], msg: str | None
) -> tuple[Any, Any]:
    topics = tuple(
        _r(
            m,
            v,
            "CreatableTopic",
            name=n,
            num_partitions=1,
            replication_factor=-1,
            assignments=(),
            configs=(),
        )
        for n in names
    )
    req = _r(m, v, "CreateTopicsRequest", topics=topics, timeout=0, validate_only=False)
    code = ErrorCode.invalid_topic_exception
    answered = tuple(
        _a(m, v, "CreatableTopicResult", name=n, error_code=code, error_message=msg) for n in fleet
    )
    return req, _a(m, v, "CreateTopicsResponse", topics=answered)


def _delete(
    m: ModuleType, v: int, names: list[str], fleet: list[str], msg: str | None
) -> tuple[Any, Any]:
    if v >= 6:  # by name or id (KIP-516)
        states = tuple(_r(m, v, "DeleteTopicState", name=n, topic_id=None) for n in names)
        req = _r(m, v, "DeleteTopicsRequest", topics=states, timeout=0)
    else:
        req = _r(m, v, "DeleteTopicsRequest", topic_names=tuple(names), timeout=0)
    done = tuple(
        _a(m, v, "DeletableTopicResult", name=n, topic_id=None, error_message=msg) for n in fleet
    )
    return req, _a(m, v, "DeleteTopicsResponse", responses=done)


def _partitions(
    m: ModuleType, v: int, names: list[str], fleet: list[str], msg: str | None
) -> tuple[Any, Any]:
    topics = tuple(
        _r(m, v, "CreatePartitionsTopic", name=n, count=2, assignments=None) for n in names
    )
    req = _r(m, v, "CreatePartitionsRequest", topics=topics, timeout=0, validate_only=False)
    done = tuple(_a(m, v, "CreatePartitionsTopicResult", name=n, error_message=msg) for n in fleet)
    return req, _a(m, v, "CreatePartitionsResponse", results=done)


def _describe(
    m: ModuleType, v: int, names: list[str], fleet: list[str], msg: str | None
) -> tuple[Any, Any]:
    res = tuple(
        _r(
            m,
            v,
            "DescribeConfigsResource",
            resource_type=2,
            resource_name=n,
            configuration_keys=None,
        )
        for n in names
    )
    req = _r(
        m,
        v,
        "DescribeConfigsRequest",
        resources=res,
        include_synonyms=True,
        include_documentation=False,
    )
    syn = (_a(m, v, "DescribeConfigsSynonym", name="log.retention.ms", value="1", source=4),)
    cfg = (_a(m, v, "DescribeConfigsResourceResult", name="retention.ms", value="1", synonyms=syn),)
    results = tuple(
        _a(
            m,
            v,
            "DescribeConfigsResult",
            resource_type=2,
            resource_name=n,
            error_message=msg,
            configs=cfg,
        )
        for n in fleet
    )
    return req, _a(m, v, "DescribeConfigsResponse", results=results)


def _alter(
    m: ModuleType, v: int, names: list[str], fleet: list[str], msg: str | None
) -> tuple[Any, Any]:
    cfg = (_r(m, v, "AlterableConfig", name="retention.ms", value="1000", config_operation=0),)
    res = tuple(
        _r(m, v, "AlterConfigsResource", resource_type=2, resource_name=n, configs=cfg)
        for n in names
    )
    name = "AlterConfigsRequest" if m is alter_configs else "IncrementalAlterConfigsRequest"
    req = _r(m, v, name, resources=res, validate_only=False)
    done = tuple(
        _a(
            m,
            v,
            "AlterConfigsResourceResponse",
            resource_type=2,
            resource_name=n,
            error_message=msg,
        )
        for n in fleet
    )
    return req, _a(m, v, name.replace("Request", "Response"), responses=done)


BUILDERS: dict[ModuleType, Build] = {
    metadata: _metadata,
    find_coordinator: _coordinator,
    describe_cluster: _cluster,
    list_offsets: _per_topic(
        "ListOffsetsRequest",
        "ListOffsetsTopic",
        "ListOffsetsPartition",
        "ListOffsetsResponse",
        "ListOffsetsTopicResponse",
        "ListOffsetsPartitionResponse",
        "name",
    ),
    offset_for_leader_epoch: _per_topic(
        "OffsetForLeaderEpochRequest",
        "OffsetForLeaderTopic",
        "OffsetForLeaderPartition",
        "OffsetForLeaderEpochResponse",
        "OffsetForLeaderTopicResult",
        "EpochEndOffset",
        "topic",
    ),
    delete_records: _per_topic(
        "DeleteRecordsRequest",
        "DeleteRecordsTopic",
        "DeleteRecordsPartition",
        "DeleteRecordsResponse",
        "DeleteRecordsTopicResult",
        "DeleteRecordsPartitionResult",
        "name",
    ),
    create_topics: _create,
    delete_topics: _delete,
    create_partitions: _partitions,
    describe_configs: _describe,
    alter_configs: _alter,
    incremental_alter_configs: _alter,
}
CASES = [(m, v) for m in BUILDERS for v in range(m.MIN_VERSION, m.MAX_VERSION + 1)]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, tuple):
        return [s for item in value for s in _strings(item)]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [s for f in dataclasses.fields(value) for s in _strings(getattr(value, f.name))]
    return []


@pytest.mark.parametrize(("module", "version"), CASES, ids=lambda c: getattr(c, "__name__", str(c)))
@settings(max_examples=15, deadline=None)
@given(names=local_names, fleet=fleet_names, msg=messages, denied=st.booleans())
def test_client_sees_only_the_tenants_names(
    module: ModuleType,
    version: int,
    names: list[str],
    fleet: list[str],
    msg: str | None,
    denied: bool,
) -> None:
    refusals = {
        (op, "TOPIC", names[0])
        for op in ("DESCRIBE", "DELETE", "ALTER", "CREATE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS")
    }
    access = FakeAccess(denied=refusals if denied else set())
    ctx = context(
        module, version, access=access, fleet=FakeFleet(endpoints={1: ("gw", 1), 2: ("gw", 2)})
    )
    req, answer = BUILDERS[module](module, version, names, fleet, msg)
    outcome = asyncio.run(module.handle(ctx, req))
    seen = outcome.on_response(answer) if isinstance(outcome, Forward) else outcome.response
    leaked = [s for s in _strings(seen) if any(bad in s for bad in FORBIDDEN)]
    assert not leaked
