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

MAX_MEMBER_BYTES = 1 << 20
MAX_PROTOCOLS = 32


def _length(value: str | bytes | None) -> int:
    return 0 if value is None else len(value)


def _total(values: Iterable[str | bytes | None]) -> int:
    return sum(_length(v) for v in values)


def join_group_refusal(request: Any) -> str | None:
    """Why a JoinGroup's member would hold too much, or None."""
    protocols = request.protocols
    if len(protocols) > MAX_PROTOCOLS:
        return f"{len(protocols)} protocols, more than {MAX_PROTOCOLS}"
    held = _length(getattr(request, "group_instance_id", None)) + _total(
        v for p in protocols for v in (p.name, p.metadata)
    )
    return _over(held)


def sync_group_refusal(request: Any) -> str | None:
    """Why a SyncGroup's assignment for some member would be too large, or None."""
    largest = max((_length(a.assignment) for a in request.assignments), default=0)
    return _over(largest)


def heartbeat_refusal(request: Any) -> str | None:
    """Why a ConsumerGroupHeartbeat's member subscription would hold too much, or None."""
    names = request.subscribed_topic_names or ()
    held = _total(names) + _total(
        getattr(request, field, None)
        for field in ("instance_id", "rack_id", "server_assignor", "subscribed_topic_regex")
    )
    return _over(held)


def _over(held: int) -> str | None:
    if held <= MAX_MEMBER_BYTES:
        return None
    return f"a member's group state of {held} bytes, more than {MAX_MEMBER_BYTES}"
