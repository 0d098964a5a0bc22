"""In-memory usage counters of one gateway process, cut into `__usage` traffic windows.

Owns: `UsageKey` and `UsageMeter`. `record` is on the per-request hot path: one dict lookup and
four integer additions. Connection time is kept per key as (open connections, since when,
milliseconds accrued), so each open connection accrues for exactly the part of each window it was
open. `cut(now_ms)` closes the current window and returns its non-zero records with ids
`<gateway id>/<incarnation>/<sequence>` from a sequence that never repeats in this process.

A window never crosses a UTC hour boundary (docs/gateway.md, "Usage"): the writer cuts at every
boundary; should a cut come late, the window is closed at the boundary (connection time split
exactly there, the other counters, which carry no timestamps, stay in the earlier hour) and a new
one runs from the boundary to `now_ms`.

Every record cut satisfies the usage contract whatever a client sent: at the cut (once per key
and window, off the per-request path) each key is fitted — client id and principal through
`tenancy.usage.fitted_text`, a topic the contract would refuse (`nl\n`) metered as no topic — and
keys that fit to the same one are summed. A refused usage record is lost revenue.

A tenant names its client ids and topics, so it could make a new key per request (an HTTP
`X-Client-Id` per request, a fetch of a new topic name each time): memory, and records enough to
overflow the writer's queue, where they would be lost. So a tenant has at most
`max_keys_per_tenant` keys (default 1000) in a window; traffic past that is counted under the key
(tenant, principal, `OVERFLOW_CLIENT_ID`, no topic): still billed to the tenant and its service
account, only no longer split by client id and topic. Pure; runs on the event loop; not
thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tenancy.usage import TrafficRecord, fitted_text, is_topic_name, traffic_id, window_end_limit

_BYTES_IN, _BYTES_OUT, _REQUESTS, _THROTTLE_MS, _CONNECTION_MS = range(5)
MAX_KEYS_PER_TENANT = 1000
OVERFLOW_CLIENT_ID = "(overflow)"  # the client id of traffic past a tenant's keys in a window


@dataclass(frozen=True, slots=True)
class UsageKey:
    tenant: str
    principal: str
    client_id: str
    topic: str | None  # the tenant's topic name without prefix; None for work tied to no topic

    def fitted(self) -> UsageKey:
        """This key as the usage contract takes it (itself when it already fits)."""
        client_id, principal = fitted_text(self.client_id), fitted_text(self.principal)
        topic = self.topic if self.topic is None or is_topic_name(self.topic) else None
        if (client_id, principal, topic) == (self.client_id, self.principal, self.topic):
            return self
        return UsageKey(self.tenant, principal, client_id, topic)


class _Connections:
    """Open connections of one key: how many, since when, and time accrued in this window."""

    __slots__ = ("accrued_ms", "count", "since_ms")

    def __init__(self, now_ms: int) -> None:
        self.count = 0
        self.since_ms = now_ms
        self.accrued_ms = 0

    def change(self, now_ms: int, delta: int) -> None:
        self.accrued_ms += self.count * max(0, now_ms - self.since_ms)
        self.since_ms = max(self.since_ms, now_ms)
        self.count = max(0, self.count + delta)

    def take(self, end_ms: int) -> int:
        """Connection-milliseconds up to `end_ms`; the next window accrues from there."""
        total = self.accrued_ms + self.count * max(0, end_ms - self.since_ms)
        self.accrued_ms = 0
        self.since_ms = max(self.since_ms, end_ms)
        return total


class UsageMeter:
    def __init__(
        self,
        gateway_id: str,
        incarnation: str,
        clock_ms: Callable[[], int],
        *,
        max_keys_per_tenant: int = MAX_KEYS_PER_TENANT,
    ) -> None:
        traffic_id(gateway_id, incarnation, 0)  # refuse ids that would break the contract now
        self._max_keys = max_keys_per_tenant
        self._keys_per_tenant: dict[str, int] = {}
        self._gateway_id = gateway_id
        self._incarnation = incarnation
        self._clock_ms = clock_ms
        self._window_start = clock_ms()
        self._sequence = 0
        self._counters: dict[UsageKey, list[int]] = {}
        self._connections: dict[UsageKey, _Connections] = {}

    @property
    def window_start_ms(self) -> int:
        return self._window_start

    def record(
        self,
        key: UsageKey,
        *,
        bytes_in: int = 0,
        bytes_out: int = 0,
        requests: int = 0,
        throttle_ms: int = 0,
    ) -> None:
        counters = self._counters.get(key)
        if counters is None:
            counters = self._new_key(key)
        counters[_BYTES_IN] += bytes_in
        counters[_BYTES_OUT] += bytes_out
        counters[_REQUESTS] += requests
        counters[_THROTTLE_MS] += throttle_ms

    def _new_key(self, key: UsageKey) -> list[int]:
        """The counters of a key not yet seen in this window (the tenant's overflow key's once
        the tenant has `max_keys_per_tenant` keys)."""
        held = self._keys_per_tenant.get(key.tenant, 0)
        if held >= self._max_keys:
            key = UsageKey(key.tenant, key.principal, OVERFLOW_CLIENT_ID, None)
            counters = self._counters.get(key)
            if counters is not None:
                return counters
        self._keys_per_tenant[key.tenant] = held + 1
        counters = self._counters[key] = [0, 0, 0, 0]
        return counters

    def connection_opened(self, key: UsageKey) -> None:
        self._connection(key).change(self._clock_ms(), +1)

    def connection_closed(self, key: UsageKey) -> None:
        self._connection(key).change(self._clock_ms(), -1)

    def _connection(self, key: UsageKey) -> _Connections:
        if key.topic is not None:
            raise ValueError("connection time is tied to no topic: use a key with topic None")
        connections = self._connections.get(key)
        if connections is None:
            connections = self._connections[key] = _Connections(self._window_start)
        return connections

    def cut(self, now_ms: int) -> list[TrafficRecord]:
        """Close the current window at `now_ms` (split at any hour boundary it would cross)."""
        now_ms = max(now_ms, self._window_start)
        records: list[TrafficRecord] = []
        while now_ms > window_end_limit(self._window_start):
            records += self._close_window(window_end_limit(self._window_start))
        records += self._close_window(now_ms)
        return records

    def _close_window(self, end_ms: int) -> list[TrafficRecord]:
        start_ms, self._window_start = self._window_start, end_ms
        counters, self._counters = self._counters, {}
        self._keys_per_tenant = {}
        totals: dict[UsageKey, list[int]] = {}
        for key, values in counters.items():
            _add(totals, key.fitted(), values)
        for key, connections in self._connections.items():
            _add(totals, key.fitted(), (0, 0, 0, 0, connections.take(end_ms)))
        self._connections = {k: c for k, c in self._connections.items() if c.count > 0}
        return [
            self._record(key, start_ms, end_ms, values)
            for key, values in totals.items()
            if any(values)
        ]

    def _record(
        self, key: UsageKey, start_ms: int, end_ms: int, values: list[int]
    ) -> TrafficRecord:
        record_id = traffic_id(self._gateway_id, self._incarnation, self._sequence)
        self._sequence += 1
        return TrafficRecord(
            id=record_id,
            tenant=key.tenant,
            principal=key.principal,
            client_id=key.client_id,
            topic=key.topic,
            start_ms=start_ms,
            end_ms=end_ms,
            bytes_in=values[_BYTES_IN],
            bytes_out=values[_BYTES_OUT],
            requests=values[_REQUESTS],
            throttle_ms=values[_THROTTLE_MS],
            connection_ms=values[_CONNECTION_MS],
        )


def _add(totals: dict[UsageKey, list[int]], key: UsageKey, values: Sequence[int]) -> None:
    summed = totals.get(key)
    if summed is None:
        summed = totals[key] = [0, 0, 0, 0, 0]
    for index, value in enumerate(values):
        summed[index] += value
