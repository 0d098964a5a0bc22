"""An in-memory broker for client unit tests, answering through the real wire path.

`FakeBroker.connect` is a `Cluster` connector: it returns a `LoopbackConnection`, whose `send`
frames the request with the client's real `ClientProtocol`, decodes it the way the broker does
(`brokers.wire`), answers it here, encodes the response with its header and feeds the bytes back
through the client's protocol. So every request builder and response reader is exercised at the
exact version negotiated — no sockets involved.

The group semantics follow Kafka's group coordinator (no group coordinator is in the broker yet):
DescribeGroups of an unknown group answers state Dead with no error (versions < 6); DeleteGroups
answers GROUP_ID_NOT_FOUND / NON_EMPTY_GROUP; a simple commit (generation -1) is refused with
UNKNOWN_MEMBER_ID while the group has members, and creates an Empty group otherwise. `inject`
queues error codes to answer an API with before it succeeds (to test retries).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from brokers.client.config import ClientConfig
from brokers.client.connection import BrokerConnection
from brokers.client.metadata import TopicPartition
from brokers.client.versions import CLIENT_VERSIONS, ApiKey
from brokers.handlers.build import make, response_module, throttle
from brokers.wire.errors import ErrorCode
from brokers.wire.framing import size_prefix
from brokers.wire.headers import parse_request_header, response_header
from brokers.wire.messages import (
    decode_request,
    encode_entity,
    is_flexible_request,
    response_header_is_flexible,
)

HOST, PORT, NODE = "fake-broker", 9092, 0


@dataclasses.dataclass
class FakeMember:
    member_id: str
    client_id: str = "consumer-1"
    host: str = "/10.0.0.1"
    instance_id: str | None = None
    assignment: bytes = b""


@dataclasses.dataclass
class FakeGroup:
    state: str = "Empty"
    protocol_type: str = "consumer"
    protocol: str = "range"
    members: list[FakeMember] = dataclasses.field(default_factory=list)
    offsets: dict[TopicPartition, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class FakePartition:
    start: int = 0
    end: int = 0
    timestamps: dict[int, int] = dataclasses.field(default_factory=dict)  # offset → timestamp


class FakeBroker:
    def __init__(self, versions: Mapping[int, tuple[int, int]] | None = None) -> None:
        self.versions = dict(versions or {int(k): v for k, v in CLIENT_VERSIONS.items()})
        self.topics: dict[str, list[FakePartition]] = {}
        self.groups: dict[str, FakeGroup] = {}
        self.requests: list[tuple[int, int]] = []
        self.errors: dict[int, list[ErrorCode]] = {}
        self.connections = 0

    def inject(self, api_key: int, *codes: ErrorCode) -> None:
        self.errors.setdefault(api_key, []).extend(codes)

    async def connect(self, host: str, port: int, config: ClientConfig) -> BrokerConnection:
        self.connections += 1
        connection = LoopbackConnection(f"{host}:{port}", config, self)
        await connection.negotiate()
        return connection

    def answer(self, api_key: int, version: int, request: Any) -> Any:
        self.requests.append((api_key, version))
        module = response_module(api_key, version)
        injected = self.errors.get(api_key)
        error = injected.pop(0) if injected else ErrorCode.none
        handler = getattr(self, f"_{ApiKey(api_key).name.lower()}")
        return handler(module, request, version, error)

    # -- handlers (module, request, version, injected error) -----------------------------------
    def _api_versions(self, module: Any, request: Any, version: int, error: ErrorCode) -> Any:
        keys = tuple(
            make(module, "ApiVersion", api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(self.versions.items())
        )
        return make(
            module, "ApiVersionsResponse", error_code=error, api_keys=keys, throttle_time=throttle()
        )

    def _metadata(self, module: Any, request: Any, version: int, error: ErrorCode) -> Any:
        broker = make(
            module, "MetadataResponseBroker", node_id=NODE, host=HOST, port=PORT, rack=None
        )
        topics = tuple(
            make(
                module,
                "MetadataResponseTopic",
                error_code=ErrorCode.none,
                name=name,
                topic_id=None,
                is_internal=False,
                partitions=tuple(
                    make(
                        module,
                        "MetadataResponsePartition",
                        error_code=ErrorCode.none,
                        partition_index=i,
                        leader_id=NODE,
                        leader_epoch=0,
                        replica_nodes=(NODE,),
                        isr_nodes=(NODE,),
                        offline_replicas=(),
                    )
                    for i in range(len(parts))
                ),
            )
            for name, parts in sorted(self.topics.items())
        )
        return make(
            module,
            "MetadataResponse",
            throttle_time=throttle(),
            brokers=(broker,),
            cluster_id="fake-cluster",
            controller_id=NODE,
            topics=topics,
        )

    def _find_coordinator(self, module: Any, request: Any, version: int, error: ErrorCode) -> Any:
        fields = {"node_id": NODE, "host": HOST, "port": PORT, "error_code": error}
        if version < 4:
            return make(
                module,
                "FindCoordinatorResponse",
                throttle_time=throttle(),
                error_message=None,
                **fields,
            )
        found = tuple(
            make(module, "Coordinator", key=key, error_message=None, **fields)
            for key in request.coordinator_keys
        )
        return make(module, "FindCoordinatorResponse", throttle_time=throttle(), coordinators=found)

    def _list_groups(self, module: Any, request: Any, version: int, error: ErrorCode) -> Any:
        wanted = {s.lower() for s in getattr(request, "states_filter", ())}
        listed = tuple(
            make(
                module,
                "ListedGroup",
                group_id=g,
                protocol_type=group.protocol_type,
                group_state=group.state,
                group_type="classic",
            )
            for g, group in sorted(self.groups.items())
            if not wanted or group.state.lower() in wanted
        )
        return make(
            module, "ListGroupsResponse", throttle_time=throttle(), error_code=error, groups=listed
        )

    def _describe_groups(self, module: Any, request: Any, version: int, error: ErrorCode) -> Any:
        described = []
        for group_id in request.groups:
            group = self.groups.get(group_id) or FakeGroup(
                state="Dead", protocol_type="", protocol=""
            )
            members = tuple(
                make(
                    module,
                    "DescribedGroupMember",
                    member_id=m.member_id,
                    group_instance_id=m.instance_id,
                    client_id=m.client_id,
                    client_host=m.host,
                    member_metadata=b"",
                    member_assignment=m.assignment,
                )
                for m in group.members
            )
            described.append(
                make(
                    module,
                    "DescribedGroup",
                    error_code=error,
                    group_id=group_id,
                    group_state=group.state,
                    protocol_type=group.protocol_type,
                    protocol_data=group.protocol,
                    members=members,
                    authorized_operations=-(2**31),
                )
            )
        return make(
            module, "DescribeGroupsResponse", throttle_time=throttle(), groups=tuple(described)
        )

    def _delete_groups(self, module: Any, request: Any, version: int, error: ErrorCode) -> Any:
        results = []
        for group_id in request.groups_names:
            group = self.groups.get(group_id)
            code = error
            if code == ErrorCode.none and group is None:
                code = ErrorCode.group_id_not_found
            elif code == ErrorCode.none and group is not None and group.members:
                code = ErrorCode.non_empty_group
            elif code == ErrorCode.none:
                del self.groups[group_id]
            results.append(make(module, "DeletableGroupResult", group_id=group_id, error_code=code))
        return make(
            module, "DeleteGroupsResponse", throttle_time=throttle(), results=tuple(results)
        )

    def _offset_fetch(self, module: Any, request: Any, version: int, error: ErrorCode) -> Any:
        batched = version >= 8
        asked = request.groups[0] if batched else request
        group = self.groups.get(asked.group_id, FakeGroup())
        wanted = (
            None
            if asked.topics is None
            else {(t.name, p) for t in asked.topics for p in t.partition_indexes}
        )
        by_topic: dict[str, list[Any]] = {}
        names = (
            ("OffsetFetchResponseTopics", "OffsetFetchResponsePartitions")
            if batched
            else ("OffsetFetchResponseTopic", "OffsetFetchResponsePartition")
        )
        for tp, offset in sorted(group.offsets.items()):
            if wanted is None or tuple(tp) in wanted:
                by_topic.setdefault(tp.topic, []).append(
                    make(
                        module,
                        names[1],
                        partition_index=tp.partition,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        metadata="",
                        error_code=ErrorCode.none,
                    )
                )
        topics = tuple(
            make(module, names[0], name=t, partitions=tuple(ps)) for t, ps in by_topic.items()
        )
        if batched:
            answer = make(
                module,
                "OffsetFetchResponseGroup",
                group_id=asked.group_id,
                topics=topics,
                error_code=error,
            )
            return make(module, "OffsetFetchResponse", throttle_time=throttle(), groups=(answer,))
        return make(
            module, "OffsetFetchResponse", throttle_time=throttle(), topics=topics, error_code=error
        )

    def _offset_commit(self, module: Any, request: Any, version: int, error: ErrorCode) -> Any:
        group = self.groups.get(request.group_id)
        code = error
        if (
            code == ErrorCode.none
            and request.generation_id_or_member_epoch < 0
            and group is not None
            and group.members
        ):
            code = ErrorCode.unknown_member_id
        if code == ErrorCode.none:
            group = self.groups.setdefault(request.group_id, FakeGroup())
            for topic in request.topics:
                for p in topic.partitions:
                    group.offsets[TopicPartition(topic.name, p.partition_index)] = (
                        p.committed_offset
                    )
        topics = tuple(
            make(
                module,
                "OffsetCommitResponseTopic",
                name=topic.name,
                partitions=tuple(
                    make(
                        module,
                        "OffsetCommitResponsePartition",
                        partition_index=p.partition_index,
                        error_code=code,
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        )
        return make(module, "OffsetCommitResponse", throttle_time=throttle(), topics=topics)

    def _list_offsets(self, module: Any, request: Any, version: int, error: ErrorCode) -> Any:
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                offset, timestamp, code = self._lookup(topic.name, p.partition_index, p.timestamp)
                partitions.append(
                    make(
                        module,
                        "ListOffsetsPartitionResponse",
                        partition_index=p.partition_index,
                        error_code=error if error else code,
                        timestamp=timestamp,
                        offset=offset,
                        leader_epoch=0,
                    )
                )
            topics.append(
                make(
                    module,
                    "ListOffsetsTopicResponse",
                    name=topic.name,
                    partitions=tuple(partitions),
                )
            )
        return make(module, "ListOffsetsResponse", throttle_time=throttle(), topics=tuple(topics))

    def _lookup(self, topic: str, index: int, spec: int) -> tuple[int, int, ErrorCode]:
        parts = self.topics.get(topic, [])
        if index >= len(parts):
            return -1, -1, ErrorCode.unknown_topic_or_partition
        part = parts[index]
        if spec == -2:
            return part.start, -1, ErrorCode.none
        if spec == -1:
            return part.end, -1, ErrorCode.none
        for offset, timestamp in sorted(part.timestamps.items()):
            if timestamp >= spec:
                return offset, timestamp, ErrorCode.none
        return -1, -1, ErrorCode.none


class LoopbackConnection(BrokerConnection):
    def __init__(self, address: str, config: ClientConfig, broker: FakeBroker) -> None:
        super().__init__(address, config)
        self._broker = broker

    async def send(self, request: Any, *, timeout_s: float | None = None) -> Any:
        self._raise_if_failed()
        correlation_id, parts = self._protocol.request(request)
        frame = memoryview(b"".join(parts)[4:])
        api_key, version = int(request.__api_key__), int(request.__version__)
        _header, offset = parse_request_header(frame, is_flexible_request(api_key, version))
        decoded = decode_request(api_key, version, frame, offset)
        body = encode_entity(self._broker.answer(api_key, version, decoded))
        reply = (
            response_header(correlation_id, response_header_is_flexible(api_key, version)) + body
        )
        (answer,) = self._protocol.feed(size_prefix(len(reply)) + reply)
        return answer.response
