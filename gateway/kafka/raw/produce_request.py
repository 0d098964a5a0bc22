"""Produce request bodies written back out with the tenant's names replaced: the gateway's half.

Owns: `build_produce_request`, the body of a `ProduceRequestView` (parsed by
`brokers.wire.produce_request`) as buffer parts with the topic names and
transactional id replaced. The records are never decoded or copied: the rebuilt body holds the
very views the parse made (docs/gateway.md, "A request's way", hot path). From v13 a topic goes
by its id, written unchanged, ids being the fleet's own. Unknown tagged fields were dropped by the
parse: a field the gateway cannot read could carry a name it cannot prefix, so it is never
forwarded (fail closed). Pure; thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable

from brokers.wire.primitives import write_uvarint
from brokers.wire.produce_request import (
    ACKS_TIMEOUT,
    CLASSIC_PARTITION_HEAD,
    PARTITION_INDEX,
    TOPIC_ID_VERSION,
    ProduceRequestView,
    ProduceTopic,
    is_flexible,
)
from brokers.wire.raw_reader import Parts, encode_length, encode_string

_NO_TAGS = b"\x00"


def build_produce_request(
    view: ProduceRequestView,
    *,
    topics: list[ProduceTopic] | None = None,
    rename: Callable[[str], str],
    transactional_id: str | None,
) -> list[bytes | memoryview]:
    """The body with `topics` (default: all of the view's) under `rename(name)` and the given
    transactional id; each record set is a part of its own, the parse's view."""
    flexible = is_flexible(view.version)
    chosen = view.topics if topics is None else topics
    out = Parts()
    out.write(encode_string(transactional_id, flexible))
    out.write(ACKS_TIMEOUT.pack(view.acks, view.timeout_ms))
    out.write(encode_length(len(chosen), flexible, wide=True))
    by_id = view.version >= TOPIC_ID_VERSION
    for topic in chosen:
        _write_topic(out, topic, None if by_id else rename(topic.name), flexible)
    if flexible:
        out.write(_NO_TAGS)
    return out.finish()


def _write_topic(out: Parts, topic: ProduceTopic, name: str | None, flexible: bool) -> None:
    """`name` None: the topic goes by its id (v13+)."""
    out.write(topic.topic_id if name is None else encode_string(name, flexible))
    out.write(encode_length(len(topic.partitions), flexible, wide=True))
    for partition in topic.partitions:
        records = partition.records
        size = -1 if records is None else len(records)
        if flexible:
            out.write(PARTITION_INDEX.pack(partition.index) + write_uvarint(size + 1))
        else:
            out.write(CLASSIC_PARTITION_HEAD.pack(partition.index, size))
        if records is not None:
            out.view(records)
        if flexible:
            out.write(_NO_TAGS)
    if flexible:
        out.write(_NO_TAGS)
