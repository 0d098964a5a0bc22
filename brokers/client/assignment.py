"""Reading a consumer group member's assignment: the bytes the group leader's assignor wrote.

Owns: `decode_assignment`. The blob is Kafka's ConsumerProtocolAssignment: an int16 version, then
that version's body. Newer versions only append fields, so an unknown newer version is read with
the newest schema we know, as Kafka's `ConsumerProtocol.deserializeAssignment` does. The bytes
come from another client through the coordinator, so anything undecodable yields None rather than
an error. Pure; thread-safe.
"""

from __future__ import annotations

import struct
from types import ModuleType

from kio.schema.consumer_protocol_assignment.v0 import data as v0
from kio.schema.consumer_protocol_assignment.v1 import data as v1
from kio.schema.consumer_protocol_assignment.v2 import data as v2
from kio.schema.consumer_protocol_assignment.v3 import data as v3

from brokers.client.messages import decode_data
from brokers.client.metadata import TopicPartition
from brokers.wire.messages import encode_entity

CONSUMER_PROTOCOL = "consumer"
_MODULES: tuple[ModuleType, ...] = (v0, v1, v2, v3)
_VERSION = struct.Struct(">h")


def decode_assignment(data: bytes) -> list[TopicPartition] | None:
    """Assigned partitions, sorted; [] for an empty blob (a member not yet assigned)."""
    if not data:
        return []
    if len(data) < _VERSION.size:
        return None
    (version,) = _VERSION.unpack_from(data, 0)
    if version < 0:
        return None
    module = _MODULES[min(version, len(_MODULES) - 1)]
    assignment = decode_data(module.ConsumerProtocolAssignment, data, _VERSION.size)
    if assignment is None:
        return None
    return sorted(
        TopicPartition(t.topic, int(p))
        for t in assignment.assigned_partitions
        for p in t.partitions
    )


def encode_assignment(partitions: list[TopicPartition], version: int = 0) -> bytes:
    """The inverse, for tests and tools: a v0–v3 assignment of `partitions`."""
    module = _MODULES[version]
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    entity = module.ConsumerProtocolAssignment(
        assigned_partitions=tuple(
            module.TopicPartition(topic=t, partitions=tuple(ps)) for t, ps in by_topic.items()
        ),
    )
    return _VERSION.pack(version) + encode_entity(entity)
