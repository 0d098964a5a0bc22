"""Limits counted in units that the whole fleet holds together: partitions created or deleted and
topic config changes (docs/gateway.md, "Metadata changes across gateways").

KIP-599's `controller_mutation_rate` (a token bucket per sensor) and the tenant's pacings of
partitions and config changes (`gateway.quotas.tenant_pacing`, GCRA) are kept by every gateway
process for itself. Alone, each would grant a tenant the whole limit, so a tenant's clients spread
over N gateways or workers (`--workers`: the kernel spreads one client's connections over them)
would churn N times the rate. Rate quotas are shared out by measured rates
(`gateway.quotas.fleet_share`); these limits are not rates but budgets with a large burst (a
tool creating a topic of a thousand partitions is not slowed), and a burst shared out by
traffic would be granted whole again by every gateway once the tenant had been idle a window.
So they are held by counts instead: every gateway tells the fleet how many units it charged to
each limit (`UnitCounters`, published with the rates: `gateway.fleet.codec`), and each gateway
charges its own limiters with what its peers charged (`FleetUnits.drain_units`, applied at the
time it was learnt, before the limiter is next asked). Every limiter then holds the fleet's state,
late by one exchange: over any span the fleet admits the limit's rate and burst plus what the
other gateways admitted in one interval, and what was admitted is paid back (a limiter's debt is
kept), except that units learnt from peers take a limiter at most `PEER_DEBT_MS` of its rate past
its burst (10 s past where a pacing refuses): a peer's one huge request, or a bad count, cannot
lock a tenant out of every gateway for longer. A count is published while it moved in the last `HELD_MS`; one that starts again gets a
new `since`, so a peer never takes a fresh count for more of the old one. Runs on the event loop;
not thread-safe.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Protocol

HELD_MS = 120_000  # a count is published this long after it last moved
PEER_DEBT_MS = 40_000  # the most debt (in time at the limit's rate) peers' units can make here


class FleetUnits(Protocol):
    """Units the peers charged to one limit and this gateway has not yet applied: (learnt at ms,
    units), oldest first; each is returned once."""

    def drain_units(self, kind: str, key: Hashable) -> list[tuple[int, int]]: ...


@dataclass(slots=True)
class _Count:
    units: int
    since: int
    last_ms: int


class UnitCounters:
    """The units this gateway process charged, per (limit, key), while they are recent."""

    def __init__(self, *, held_ms: int = HELD_MS) -> None:
        self._held_ms = held_ms
        self._counts: dict[tuple[str, Hashable], _Count] = {}

    def add(self, kind: str, key: Hashable, units: int, now_ms: int) -> None:
        if units <= 0:
            return
        count = self._counts.get((kind, key))
        if count is None:
            self._counts[kind, key] = _Count(units, now_ms, now_ms)
            return
        count.units += units
        count.last_ms = now_ms

    def live(self, now_ms: int) -> Iterator[tuple[str, Hashable, int, int]]:
        """(limit, key, units, since) of every count that moved in the last `HELD_MS`; older
        counts are dropped (the next unit starts a new one)."""
        stale = [k for k, c in self._counts.items() if now_ms - c.last_ms > self._held_ms]
        for gone in stale:
            del self._counts[gone]
        for (kind, key), count in self._counts.items():
            yield kind, key, count.units, count.since

    def __len__(self) -> int:
        return len(self._counts)
