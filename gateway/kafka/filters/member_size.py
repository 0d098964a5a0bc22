"""The bytes one group member makes its coordinator hold, bounded (docs/security.md, limits).

A member's JoinGroup protocols (names and metadata), its static instance id, the assignment its
leader sends it in SyncGroup, and a KIP-848 member's subscription (topic names, regex, rack,
assignor) stay in the coordinator for as long as the member lives: up to
`group.max.session.timeout.ms` (30 min) without a heartbeat. Kafka bounds them only by the frame
(here the tenant's 32 MiB `queued.max.request.bytes`), so one request could park 32 MiB. A real
member holds a few kilobytes (a consumer subscribed to a thousand topics ~50 KB per assignor;
Kafka Streams' task lags and host info tens of kilobytes), so each is held to
`MAX_MEMBER_BYTES` and a JoinGroup to `MAX_PROTOCOLS` protocols (clients offer one to three).
A request past them is INVALID_REQUEST, never forwarded. Counted in characters of the strings
as decoded and bytes of the opaque fields, before the gateway prefixes the tenant's topics.
Pure; thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from gateway.kafka.filters.consumer_protocol import subscription_topic_count
from gateway.kafka.filters.groups_common import CONSUMER

MAX_MEMBER_BYTES = 1 << 20
MAX_PROTOCOLS = 32
# What a coordinator keeps per subscribed topic beyond its name (a str in the group's set of
# subscribed topics: object header, hash slot), charged by the member ledger.
TOPIC_OVERHEAD_BYTES = 128


def _length(value: str | bytes | None) -> int:
    return 0 if value is None else len(value)


def _total(values: Iterable[str | bytes | None]) -> int:
    return sum(_length(v) for v in values)


def join_group_bytes(request: Any) -> int:
    """What a JoinGroup's member holds at its coordinator: its instance id and protocols."""
    return _length(getattr(request, "group_instance_id", None)) + _total(
        v for p in request.protocols for v in (p.name, p.metadata)
    )


def join_group_charge(forwarded: Any, client_id: str) -> dict[str, int | None]:
    """What a forwarded JoinGroup's member costs its coordinator, by part (the member ledger's):
    its protocols and instance id, each subscribed topic's overhead, and its ids."""
    topics = 0
    if forwarded.protocol_type == CONSUMER:
        topics = sum(subscription_topic_count(p.metadata) for p in forwarded.protocols)
    return {
        "join": join_group_bytes(forwarded) + topics * TOPIC_OVERHEAD_BYTES,
        "ids": ids_bytes(forwarded.member_id, client_id),
    }


def ids_bytes(member_id: str, client_id: str) -> int:
    """A member's ids at its coordinator: its client id, kept and (classic) in its member id."""
    return len(member_id) + 3 * len(client_id)


def assignment_sizes(request: Any) -> list[tuple[str, int]]:
    """A leader's SyncGroup assignments: (member id, bytes) each."""
    return [(a.member_id, _length(a.assignment)) for a in request.assignments]


HEARTBEAT_FIELDS = (
    "subscribed_topic_names",
    "subscribed_topic_regex",
    "instance_id",
    "rack_id",
    "server_assignor",
)


def heartbeat_parts(request: Any) -> dict[str, int | None]:
    """What a ConsumerGroupHeartbeat's subscription holds, by field; None for a field it leaves
    as it was (null)."""
    parts: dict[str, int | None] = {}
    for name in HEARTBEAT_FIELDS:
        value = getattr(request, name, None)
        if value is None:
            parts[name] = None
        elif name == "subscribed_topic_names":
            parts[name] = _total(value)
        else:
            parts[name] = _length(value)
    return parts


def heartbeat_charge(forwarded: Any, client_id: str) -> dict[str, int | None]:
    """What a forwarded ConsumerGroupHeartbeat's member costs its coordinator, by field (None:
    unchanged): its subscription, each subscribed name's overhead, and its ids."""
    parts = heartbeat_parts(forwarded)
    names = forwarded.subscribed_topic_names
    if names is not None:
        parts["subscribed_topic_names"] = _total(names) + len(names) * TOPIC_OVERHEAD_BYTES
    parts["ids"] = ids_bytes(forwarded.member_id, client_id)
    return parts


def join_group_refusal(request: Any) -> str | None:
    """Why a JoinGroup's member would hold too much, or None."""
    protocols = request.protocols
    if len(protocols) > MAX_PROTOCOLS:
        return f"{len(protocols)} protocols, more than {MAX_PROTOCOLS}"
    return _over(join_group_bytes(request))


def sync_group_refusal(request: Any) -> str | None:
    """Why a SyncGroup's assignment for some member would be too large, or None."""
    return _over(max((size for _, size in assignment_sizes(request)), default=0))


def heartbeat_refusal(request: Any) -> str | None:
    """Why a ConsumerGroupHeartbeat's member subscription would hold too much, or None."""
    return _over(sum(v for v in heartbeat_parts(request).values() if v is not None))


def _over(held: int) -> str | None:
    if held <= MAX_MEMBER_BYTES:
        return None
    return f"a member's group state of {held} bytes, more than {MAX_MEMBER_BYTES}"


def described_charge(member: Any, assignor: str) -> dict[str, int]:
    """What a KIP-848 member its coordinator described (ConsumerGroupDescribe) holds there, by the
    parts `heartbeat_charge` names; its server assignor is one the coordinator serves, counted at
    the length of the group's (`assignor`)."""
    names = member.subscribed_topic_names or ()
    return {
        "subscribed_topic_names": _total(names) + len(names) * TOPIC_OVERHEAD_BYTES,
        "subscribed_topic_regex": _length(member.subscribed_topic_regex),
        "instance_id": _length(member.instance_id),
        "rack_id": _length(member.rack_id),
        "server_assignor": len(assignor),
        "ids": ids_bytes(member.member_id, member.client_id),
    }
