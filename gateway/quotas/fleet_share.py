"""A gateway's share of a quota that the whole fleet holds together (docs/gateway.md, "Quotas
across gateways").

Owns: the share arithmetic (`fleet_share`), what a gateway knows of one sensor on its peers
(`PeerRate`), and `FleetView`, the narrow interface the rate sensors ask for a share (the fleet's
ZooKeeper exchange, `gateway.fleet`, implements it). A quota Q is split by max-min fairness over
the gateways whose sensor for the same (tenant, user, client id) had traffic in the last window:
a gateway that is throttling on it ("saturated") wants more than it gets, one that is not wants
its measured rate plus `HEADROOM` (at least `FLOOR` × Q, so a gateway that just started seeing
the traffic is not starved). Saturated gateways split what the others do not want equally; what
nobody wants is spread over all, so a saturated gateway gets at least Q / (gateways on the
sensor) and every share at least `FLOOR` × Q / that many. Alone, a gateway gets the full quota. The shares add up to Q
when every gateway sees the same rates; between two exchanges they can differ by what changed
in one interval. Pure functions; safe from any thread.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Protocol

FLOOR = 0.1  # an active gateway's demand is at least this fraction of the quota
HEADROOM = 1.25  # an unsaturated gateway may grow this much before it throttles


@dataclass(frozen=True, slots=True)
class PeerRate:
    """One gateway's measured rate of a sensor (per second) and whether it throttles on it."""

    rate: float
    saturated: bool


class FleetView(Protocol):
    """The share of `quota` this gateway enforces on a sensor, given its own measurement."""

    def share(
        self,
        kind: str,
        key: Hashable,
        quota: float,
        local: PeerRate,
        now_ms: int,
    ) -> float: ...


def demand(peer: PeerRate, quota: float) -> float:
    """What a gateway wants of `quota`: unbounded when saturated, else its rate with headroom."""
    if peer.saturated:
        return math.inf
    rate = peer.rate * HEADROOM
    floor = quota * FLOOR
    return rate if rate > floor else floor


def water_level(quota: float, demands: Sequence[float]) -> float:
    """The level L at which Σ min(d, L) = quota (∞ when every demand fits)."""
    remaining, left = quota, len(demands)
    for wanted in sorted(demands):
        if wanted * left >= remaining:
            return remaining / left
        remaining -= wanted
        left -= 1
    return math.inf


def fleet_share(quota: float, local: PeerRate, peers: Sequence[PeerRate]) -> float:
    """This gateway's share of `quota` when `peers` (the other gateways with traffic on the same
    sensor) measure what they measure; the full quota when there are none. Runs once per charged
    request while peers share the sensor: kept to a few arithmetic steps per gateway."""
    if not peers or quota <= 0:
        return quota
    mine = demand(local, quota)
    demands = [demand(peer, quota) for peer in peers]
    demands.append(mine)
    level = water_level(quota, demands)
    if level == math.inf:  # everybody fits: what nobody wants is spread over all
        return mine + (quota - sum(demands)) / len(demands)
    return mine if mine < level else level  # ≥ quota / gateways when saturated
