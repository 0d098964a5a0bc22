"""Wire schemas of the controller→broker APIs Kafka's ZooKeeper mode uses, in kio's entity style.

Owns: LeaderAndIsr v5 (key 4), StopReplica v3 (key 5), UpdateMetadata v7 (key 6) and
ControlledShutdown v3 (key 7) requests and responses, and their byte codecs. kio 0.6.5 is generated
from Kafka 4's message definitions, from which these ZooKeeper-era APIs were removed, so Pier
declares the four schemas itself, field for field as Kafka 3.x's JSON message definitions give
them, and lets kio's generic `entity_reader`/`entity_writer` do the (flexible, KIP-482) encoding.
Only these versions are spoken: Pier's controller talks only to Pier brokers. Frozen values and
pure codecs; thread-safe.
"""

# No `from __future__ import annotations`: kio introspects real (not string) field types.
# Integer fields are plain `int` (kio's phantom int types only add checks; `kafka_type` decides
# the encoding), so callers need no casts.
import io
import uuid
from dataclasses import dataclass, field
from typing import Any, TypeVar, dataclass_transform

from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType
from kio.static.primitive import i16

from brokers.controller.errors import ControllerError
from brokers.wire.guard import check_request_bounds

LEADER_AND_ISR, STOP_REPLICA, UPDATE_METADATA, CONTROLLED_SHUTDOWN = 4, 5, 6, 7
VERSIONS = {LEADER_AND_ISR: 5, STOP_REPLICA: 3, UPDATE_METADATA: 7, CONTROLLED_SHUTDOWN: 3}


class MalformedControlRequestError(ControllerError):
    """Bytes that do not decode as the schema (truncated, trailing data, bad lengths)."""


def _i32() -> Any:
    return field(metadata={"kafka_type": "int32"})


def _i32s() -> Any:
    return field(metadata={"kafka_type": "int32"}, default=())


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(field,))
def _entity(api_key: int, version: int, kind: EntityType) -> Any:
    """Class decorator adding kio's class-level schema markers."""

    def wrap(cls: type[Any]) -> type[Any]:
        cls.__type__ = kind
        cls.__version__ = i16(version)
        cls.__flexible__ = True
        cls.__api_key__ = i16(api_key)
        return dataclass(frozen=True, slots=True, kw_only=True)(cls)

    return wrap


_NESTED = EntityType.nested
_REQUEST = EntityType.request
_RESPONSE = EntityType.response


# --- LeaderAndIsr v5 -------------------------------------------------------------------------


@_entity(LEADER_AND_ISR, 5, _NESTED)
class LeaderAndIsrPartitionState:
    partition_index: int = _i32()
    controller_epoch: int = _i32()
    leader: int = _i32()
    leader_epoch: int = _i32()
    isr: tuple[int, ...] = _i32s()
    partition_epoch: int = _i32()  # the state znode's version (ZkVersion)
    replicas: tuple[int, ...] = _i32s()
    adding_replicas: tuple[int, ...] = _i32s()
    removing_replicas: tuple[int, ...] = _i32s()
    is_new: bool = field(metadata={"kafka_type": "bool"}, default=False)


@_entity(LEADER_AND_ISR, 5, _NESTED)
class LeaderAndIsrTopicState:
    topic_name: str = field(metadata={"kafka_type": "string"})
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    partition_states: tuple[LeaderAndIsrPartitionState, ...]


@_entity(LEADER_AND_ISR, 5, _NESTED)
class LeaderAndIsrLiveLeader:
    broker_id: int = _i32()
    host_name: str = field(metadata={"kafka_type": "string"})
    port: int = _i32()


@_entity(LEADER_AND_ISR, 5, _REQUEST)
class LeaderAndIsrRequest:
    controller_id: int = _i32()
    controller_epoch: int = _i32()
    broker_epoch: int = field(metadata={"kafka_type": "int64"}, default=-1)
    type: int = field(metadata={"kafka_type": "int8"}, default=0)
    topic_states: tuple[LeaderAndIsrTopicState, ...]
    live_leaders: tuple[LeaderAndIsrLiveLeader, ...]


@_entity(LEADER_AND_ISR, 5, _NESTED)
class LeaderAndIsrPartitionError:
    partition_index: int = _i32()
    error_code: int = field(metadata={"kafka_type": "int16"})


@_entity(LEADER_AND_ISR, 5, _NESTED)
class LeaderAndIsrTopicError:
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    partition_errors: tuple[LeaderAndIsrPartitionError, ...]


@_entity(LEADER_AND_ISR, 5, _RESPONSE)
class LeaderAndIsrResponse:
    error_code: int = field(metadata={"kafka_type": "int16"})
    topics: tuple[LeaderAndIsrTopicError, ...] = ()


# --- StopReplica v3 --------------------------------------------------------------------------


@_entity(STOP_REPLICA, 3, _NESTED)
class StopReplicaPartitionState:
    partition_index: int = _i32()
    leader_epoch: int = field(metadata={"kafka_type": "int32"}, default=-1)
    delete_partition: bool = field(metadata={"kafka_type": "bool"}, default=False)


@_entity(STOP_REPLICA, 3, _NESTED)
class StopReplicaTopicState:
    topic_name: str = field(metadata={"kafka_type": "string"})
    partition_states: tuple[StopReplicaPartitionState, ...]


@_entity(STOP_REPLICA, 3, _REQUEST)
class StopReplicaRequest:
    controller_id: int = _i32()
    controller_epoch: int = _i32()
    broker_epoch: int = field(metadata={"kafka_type": "int64"}, default=-1)
    topic_states: tuple[StopReplicaTopicState, ...]


@_entity(STOP_REPLICA, 3, _NESTED)
class StopReplicaPartitionError:
    topic_name: str = field(metadata={"kafka_type": "string"})
    partition_index: int = _i32()
    error_code: int = field(metadata={"kafka_type": "int16"})


@_entity(STOP_REPLICA, 3, _RESPONSE)
class StopReplicaResponse:
    error_code: int = field(metadata={"kafka_type": "int16"})
    partition_errors: tuple[StopReplicaPartitionError, ...] = ()


# --- UpdateMetadata v7 -----------------------------------------------------------------------


@_entity(UPDATE_METADATA, 7, _NESTED)
class UpdateMetadataPartitionState:
    partition_index: int = _i32()
    controller_epoch: int = _i32()
    leader: int = _i32()
    leader_epoch: int = _i32()
    isr: tuple[int, ...] = _i32s()
    zk_version: int = _i32()
    replicas: tuple[int, ...] = _i32s()
    offline_replicas: tuple[int, ...] = _i32s()


@_entity(UPDATE_METADATA, 7, _NESTED)
class UpdateMetadataTopicState:
    topic_name: str = field(metadata={"kafka_type": "string"})
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    partition_states: tuple[UpdateMetadataPartitionState, ...]


@_entity(UPDATE_METADATA, 7, _NESTED)
class UpdateMetadataEndpoint:
    port: int = _i32()
    host: str = field(metadata={"kafka_type": "string"})
    listener: str = field(metadata={"kafka_type": "string"})
    security_protocol: int = field(metadata={"kafka_type": "int16"}, default=i16(0))


@_entity(UPDATE_METADATA, 7, _NESTED)
class UpdateMetadataBroker:
    id: int = _i32()
    endpoints: tuple[UpdateMetadataEndpoint, ...]
    rack: str | None = field(metadata={"kafka_type": "string"}, default=None)


@_entity(UPDATE_METADATA, 7, _REQUEST)
class UpdateMetadataRequest:
    controller_id: int = _i32()
    controller_epoch: int = _i32()
    broker_epoch: int = field(metadata={"kafka_type": "int64"}, default=-1)
    topic_states: tuple[UpdateMetadataTopicState, ...]
    live_brokers: tuple[UpdateMetadataBroker, ...]


@_entity(UPDATE_METADATA, 7, _RESPONSE)
class UpdateMetadataResponse:
    error_code: int = field(metadata={"kafka_type": "int16"})


# --- ControlledShutdown v3 -------------------------------------------------------------------


@_entity(CONTROLLED_SHUTDOWN, 3, _REQUEST)
class ControlledShutdownRequest:
    broker_id: int = _i32()
    broker_epoch: int = field(metadata={"kafka_type": "int64"}, default=-1)


@_entity(CONTROLLED_SHUTDOWN, 3, _NESTED)
class RemainingPartition:
    topic_name: str = field(metadata={"kafka_type": "string"})
    partition_index: int = _i32()


@_entity(CONTROLLED_SHUTDOWN, 3, _RESPONSE)
class ControlledShutdownResponse:
    error_code: int = field(metadata={"kafka_type": "int16"})
    remaining_partitions: tuple[RemainingPartition, ...] = ()


REQUESTS: dict[int, type[Any]] = {
    LEADER_AND_ISR: LeaderAndIsrRequest,
    STOP_REPLICA: StopReplicaRequest,
    UPDATE_METADATA: UpdateMetadataRequest,
    CONTROLLED_SHUTDOWN: ControlledShutdownRequest,
}
RESPONSES: dict[int, type[Any]] = {
    LEADER_AND_ISR: LeaderAndIsrResponse,
    STOP_REPLICA: StopReplicaResponse,
    UPDATE_METADATA: UpdateMetadataResponse,
    CONTROLLED_SHUTDOWN: ControlledShutdownResponse,
}

E = TypeVar("E")


_READERS: dict[type[Any], Any] = {}
_WRITERS: dict[type[Any], Any] = {}


def _reader(schema: type[Any]) -> Any:
    if schema not in _READERS:
        _READERS[schema] = entity_reader(schema)
    return _READERS[schema]


def _writer(schema: type[Any]) -> Any:
    if schema not in _WRITERS:
        _WRITERS[schema] = entity_writer(schema)
    return _WRITERS[schema]


def encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    _writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def decode(schema: type[E], data: memoryview | bytes, offset: int = 0) -> E:
    """Decode one body filling `data` from `offset` exactly; MalformedControlRequestError else."""
    view = memoryview(data)
    try:
        # kio's native reader trusts array length prefixes; the guard walks them first.
        check_request_bounds(schema, view, offset)
        entity, size = _reader(schema)(view, offset)
    except Exception as exc:  # kio raises assorted errors on bad bytes
        raise MalformedControlRequestError(f"{schema.__name__}: {exc!r:.80}") from None
    if offset + size != len(view):
        raise MalformedControlRequestError(f"{schema.__name__}: {len(view) - offset - size} extra")
    result: E = entity
    return result
