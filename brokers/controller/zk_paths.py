"""ZooKeeper paths and znode codecs of Kafka's ZooKeeper mode (Kafka's `ZkData`), pure.

Owns: every path Pier uses in ZooKeeper and the exact JSON (or ASCII integer) Kafka writes in each
znode, so a Kafka tool pointed at our ZooKeeper reads our state and vice versa. JSON is compact
(Jackson's output: no spaces); keys Kafka writes as strings (`timestamp`, `block_start`, the
cluster-id `version`) stay strings. Decoders are strict about types and raise `ZNodeFormatError`
on anything else; they never crash on bad bytes. No I/O; thread-safe.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from brokers.controller.errors import ZNodeFormatError
from brokers.controller.state import (
    BrokerEndpoint,
    LeaderAndIsr,
    ReplicaAssignment,
    TopicPartition,
    shared,
)

BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CONFIG_TOPICS = "/config/topics"
DELETE_TOPICS = "/admin/delete_topics"
ISR_CHANGE_NOTIFICATION = "/isr_change_notification"
ISR_CHANGE_PREFIX = "isr_change_"
LATEST_PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CLIENT_LISTENER = "PLAINTEXT"
INTER_BROKER_LISTENER = "REPLICATION"
"""Kafka's `inter.broker.listener.name` as Pier fixes it: a broker with
`inter.broker.advertised.address` registers this second listener, and every controller and follower
reaches it there (the name is the same on every broker, so the registration alone says which
endpoint is inter-broker). Without it, brokers talk to each other on the client endpoint."""
CLUSTER_ID = "/cluster/id"
# Kafka's KafkaZkClient.createTopLevelPaths: made (empty) at startup so watches can be set on them.
PERSISTENT_PATHS = (
    "/consumers",
    BROKER_IDS,
    BROKER_TOPICS,
    "/config/changes",
    "/config/clients",
    CONFIG_TOPICS,
    "/config/users",
    "/config/brokers",
    DELETE_TOPICS,
    "/brokers/seqid",
    ISR_CHANGE_NOTIFICATION,
    "/latest_producer_id_block",
    "/log_dir_event_notification",
)
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def check_topic(topic: str) -> str:
    """`topic` when it is a legal Kafka topic name (so it is one path segment), else raise."""
    if not _LEGAL_TOPIC.fullmatch(topic) or topic in (".", ".."):
        raise ZNodeFormatError(f"illegal topic name {topic!r}")
    return topic


def broker_path(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{check_topic(topic)}"


def partition_state_path(tp: TopicPartition) -> str:
    return f"{topic_path(tp.topic)}/partitions/{tp.partition}/state"


def topic_config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{check_topic(topic)}"


def delete_topic_path(topic: str) -> str:
    return f"{DELETE_TOPICS}/{check_topic(topic)}"


def _dump(value: Mapping[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _load(data: bytes | None) -> dict[str, Any]:
    try:
        value = json.loads(data or b"")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ZNodeFormatError(f"not JSON: {data!r:.80}") from exc
    if not isinstance(value, dict):
        raise ZNodeFormatError(f"not a JSON object: {data!r:.80}")
    return value


def _int(obj: Mapping[str, Any], key: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ZNodeFormatError(f"{key!r} must be an integer, got {value!r:.40}")
    return value


def _str(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise ZNodeFormatError(f"{key!r} must be a string, got {value!r:.40}")
    return value


def _long_str(obj: Mapping[str, Any], key: str) -> int:
    """Kafka writes some longs as decimal strings (timestamps, producer id blocks)."""
    text = _str(obj, key)
    if not re.fullmatch(r"-?[0-9]{1,19}", text):
        raise ZNodeFormatError(f"{key!r} must be a decimal string, got {text!r:.40}")
    return int(text)


def _ids(value: object, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or any(
        isinstance(v, bool) or not isinstance(v, int) for v in value
    ):
        raise ZNodeFormatError(f"{what} must be a list of integers, got {value!r:.60}")
    return shared(tuple(value))


def _object(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    value = obj.get(key, {})
    if not isinstance(value, dict):
        raise ZNodeFormatError(f"{key!r} must be a JSON object")
    return value


# --- /brokers/ids/<id> ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """The v5 registration JSON; `epoch` is the czxid of the znode (set by the reader, -1 if unknown)."""

    broker_id: int
    endpoints: tuple[BrokerEndpoint, ...]
    rack: str | None
    timestamp_ms: int
    jmx_port: int = -1
    features: Mapping[str, Any] = field(default_factory=dict)
    epoch: int = -1

    @property
    def host(self) -> str:
        return self.endpoints[0].host if self.endpoints else ""

    @property
    def port(self) -> int:
        return self.endpoints[0].port if self.endpoints else -1

    @property
    def inter_broker(self) -> BrokerEndpoint:
        """Where the controller and followers reach this broker: its `REPLICATION` endpoint,
        else the client (first) one."""
        for endpoint in self.endpoints:
            if endpoint.listener == INTER_BROKER_LISTENER:
                return endpoint
        return self.endpoints[0] if self.endpoints else BrokerEndpoint(CLIENT_LISTENER, "", -1)


def encode_broker(reg: BrokerRegistration) -> bytes:
    # Top-level host/port are the first PLAINTEXT endpoint (old clients read only those).
    plain = next((e for e in reg.endpoints if e.listener == CLIENT_LISTENER), None)
    body: dict[str, Any] = {
        "version": 5,
        "host": plain.host if plain else None,
        "port": plain.port if plain else -1,
        "endpoints": [e.connection_string for e in reg.endpoints],
        # Every Pier listener speaks plaintext: the map names the protocol, not the listener.
        "listener_security_protocol_map": {e.listener: "PLAINTEXT" for e in reg.endpoints},
        "jmx_port": reg.jmx_port,
        "timestamp": str(reg.timestamp_ms),
        "features": dict(reg.features),
    }
    if reg.rack is not None:
        body["rack"] = reg.rack
    return _dump(body)


def _endpoint(text: object) -> BrokerEndpoint:
    match = re.fullmatch(r"([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:\[\]]*):([0-9]{1,5})", str(text))
    if not isinstance(text, str) or match is None:
        raise ZNodeFormatError(f"bad endpoint {text!r:.60}")
    return BrokerEndpoint(match.group(1), match.group(2), int(match.group(3)))


def decode_broker(broker_id: int, data: bytes | None, epoch: int = -1) -> BrokerRegistration:
    obj = _load(data)
    if _int(obj, "version") < 2:
        raise ZNodeFormatError("broker registrations before version 2 are not supported")
    raw_endpoints = obj.get("endpoints")
    if not isinstance(raw_endpoints, list):
        raise ZNodeFormatError("'endpoints' must be a list")
    rack = obj.get("rack")
    if rack is not None and not isinstance(rack, str):
        raise ZNodeFormatError("'rack' must be a string")
    return BrokerRegistration(
        broker_id=broker_id,
        endpoints=tuple(_endpoint(e) for e in raw_endpoints),
        rack=rack,
        timestamp_ms=_long_str(obj, "timestamp"),
        jmx_port=_int(obj, "jmx_port"),
        features=_object(obj, "features"),
        epoch=epoch,
    )


# --- /controller and /controller_epoch ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ControllerRegistration:
    broker_id: int
    timestamp_ms: int
    kraft_controller_epoch: int = -1


def encode_controller(reg: ControllerRegistration) -> bytes:
    return _dump(
        {
            "version": 2,
            "brokerid": reg.broker_id,
            "timestamp": str(reg.timestamp_ms),
            "kraftControllerEpoch": reg.kraft_controller_epoch,
        }
    )


def decode_controller(data: bytes | None) -> ControllerRegistration:
    obj = _load(data)
    timestamp = _long_str(obj, "timestamp") if "timestamp" in obj else -1
    kraft = _int(obj, "kraftControllerEpoch") if "kraftControllerEpoch" in obj else -1
    return ControllerRegistration(_int(obj, "brokerid"), timestamp, kraft)


def encode_epoch(epoch: int) -> bytes:
    return str(epoch).encode()


def decode_epoch(data: bytes | None) -> int:
    text = (data or b"").decode("ascii", "replace")
    if not re.fullmatch(r"-?[0-9]{1,10}", text):
        raise ZNodeFormatError(f"controller epoch must be an integer, got {data!r:.40}")
    return int(text)


# --- /brokers/topics/<t> and its partition states -------------------------------------------


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    topic_id: uuid.UUID | None
    partitions: Mapping[int, ReplicaAssignment]


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """Kafka's `Uuid.toString`: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_str(text: str) -> uuid.UUID:
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError as exc:
        raise ZNodeFormatError(f"bad topic id {text!r:.40}") from exc
    if len(raw) != 16:
        raise ZNodeFormatError(f"topic id must be 16 bytes, got {len(raw)}")
    return uuid.UUID(bytes=raw)


def encode_topic(assignment: TopicAssignment) -> bytes:
    parts = assignment.partitions
    body: dict[str, Any] = {
        "version": 3,
        "partitions": {str(p): list(a.replicas) for p, a in sorted(parts.items())},
        "adding_replicas": {str(p): list(a.adding) for p, a in sorted(parts.items()) if a.adding},
        "removing_replicas": {
            str(p): list(a.removing) for p, a in sorted(parts.items()) if a.removing
        },
    }
    if assignment.topic_id is not None:
        body["topic_id"] = topic_id_to_str(assignment.topic_id)
    return _dump(body)


def _partition_id(text: str) -> int:
    if not re.fullmatch(r"[0-9]{1,10}", text):
        raise ZNodeFormatError(f"bad partition id {text!r:.20}")
    return int(text)


def decode_topic(data: bytes | None) -> TopicAssignment:
    obj = _load(data)
    adding, removing = _object(obj, "adding_replicas"), _object(obj, "removing_replicas")
    partitions = {
        _partition_id(p): shared(
            ReplicaAssignment(
                _ids(replicas, "replicas"),
                _ids(adding.get(p, []), "adding_replicas"),
                _ids(removing.get(p, []), "removing_replicas"),
            )
        )
        for p, replicas in _object(obj, "partitions").items()
    }
    topic_id = topic_id_from_str(_str(obj, "topic_id")) if "topic_id" in obj else None
    return TopicAssignment(topic_id, partitions)


def encode_partition_state(state: LeaderAndIsr) -> bytes:
    return _dump(
        {
            "controller_epoch": state.controller_epoch,
            "leader": state.leader,
            "version": 1,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
        }
    )


def decode_partition_state(data: bytes | None, zk_version: int = -1) -> LeaderAndIsr:
    obj = _load(data)
    return shared(
        LeaderAndIsr(
            leader=_int(obj, "leader"),
            leader_epoch=_int(obj, "leader_epoch"),
            isr=_ids(obj.get("isr"), "isr"),
            controller_epoch=_int(obj, "controller_epoch"),
            zk_version=zk_version,
        )
    )


# --- config, notifications, producer ids, cluster id ---------------------------------------


def encode_topic_config(config: Mapping[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(config)})


def decode_topic_config(data: bytes | None) -> dict[str, str]:
    config = _object(_load(data), "config")
    if any(not isinstance(v, str) for v in config.values()):
        raise ZNodeFormatError("config values must be strings")
    return config


def encode_isr_change(partitions: list[TopicPartition]) -> bytes:
    items = [{"topic": tp.topic, "partition": tp.partition} for tp in partitions]
    return _dump({"version": 1, "partitions": items})


def decode_isr_change(data: bytes | None) -> list[TopicPartition]:
    items = _load(data).get("partitions")
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise ZNodeFormatError("'partitions' must be a list of objects")
    return [TopicPartition(_str(i, "topic"), _int(i, "partition")) for i in items]


@dataclass(frozen=True, slots=True)
class ProducerIdBlock:
    """A claimed block of producer ids, both ends inclusive (Kafka's `ProducerIdsBlock`)."""

    broker_id: int
    first: int
    last: int


def encode_producer_id_block(block: ProducerIdBlock) -> bytes:
    return _dump(
        {
            "version": 1,
            "broker": block.broker_id,
            "block_start": str(block.first),
            "block_end": str(block.last),
        }
    )


def decode_producer_id_block(data: bytes | None) -> ProducerIdBlock:
    obj = _load(data)
    block = ProducerIdBlock(
        _int(obj, "broker"), _long_str(obj, "block_start"), _long_str(obj, "block_end")
    )
    if block.first < 0 or block.last < block.first:
        raise ZNodeFormatError(f"bad producer id block {block}")
    return block


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes | None) -> str:
    return _str(_load(data), "id")
