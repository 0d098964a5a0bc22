"""What this gateway knows of its peers' quota sensors, and the shares it enforces from it.

Owns: `PeerTable`, the `FleetView` the rate sensors ask (`gateway.quotas.fleet_share`) and the
`FleetUnits` the metadata-change limits drain (`gateway.quotas.shared_units`). The
exchange (`gateway.fleet.exchange`) hands it each successful read of the peers' znodes
(`update`) or a failed one (`failed`). A peer counts while its znode keeps changing: one whose
data version stood still for `hold_ms` (it stopped publishing; its ephemeral znode lingers until
its ZooKeeper session expires) is left out. When ZooKeeper cannot be read, the last peers' rates
are kept for `hold_ms` after the last good read, then dropped: every sensor gets the full local
quota (logged once, and again when the fleet is back), so a ZooKeeper outage can at worst give a
tenant its quota once per gateway, never starve it.

Unit counts: each read compares a peer's counts with the last it showed (remembered per peer
name until reads have not listed the peer for `PENDING_HOLD_MS`, so a peer left out for a while,
a znode written again after its session expired or a ZooKeeper outage does not count anything
twice); what grew is kept for its sensor with the time it was learnt until
the limiter drains it. A count not seen before (or started again under a new `since`) is taken
whole when it began after this gateway started (`started_ms`, on the writers' wall clocks), and
otherwise only sets where it stands: what a peer charged before this gateway was there was
enforced by the peers and cannot be placed in time here. Undrained units older than
`PENDING_HOLD_MS` are dropped (a limiter this gateway never asks has nothing to apply them to),
and a sensor keeps at most `MAX_PENDING` entries (the oldest two merge, at the later time). Runs on
the event loop; not thread-safe.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

from gateway.fleet.codec import RatesFormatError, UnitCount, decode_report, sensor_id
from gateway.quotas.fleet_share import PeerRate, fleet_share

log = logging.getLogger("pier.gateway.fleet")
MAX_CACHED_IDS = 100_000  # sensor ids remembered; past it the memo starts over
PENDING_HOLD_MS = 300_000  # peers' units not drained within this are dropped
MAX_PENDING = 16  # entries kept per sensor before the oldest merge


@dataclass(slots=True)
class _Peer:
    version: int
    changed_ms: int
    rates: dict[str, PeerRate]


class PeerTable:
    def __init__(self, *, hold_ms: int, started_ms: int = 0) -> None:
        self.hold_ms = hold_ms
        self.started_ms = started_ms
        self._peers: dict[str, _Peer] = {}
        self._by_sensor: dict[str, list[PeerRate]] = {}
        self._last_ok_ms: int | None = None
        self._falling_back = False
        self._ids: dict[tuple[str, Hashable], str] = {}
        self._pending: dict[str, list[tuple[int, int]]] = {}  # sensor id → [(learnt ms, units)]
        self._counts: dict[str, dict[str, UnitCount]] = {}  # peer → its counts last read
        self._listed_ms: dict[str, int] = {}  # peer → when a read last listed it

    @property
    def peers(self) -> int:
        """Peers counted now (publishing, and ZooKeeper read recently)."""
        return len(self._peers)

    def update(self, nodes: Mapping[str, tuple[int, bytes]], now_ms: int) -> None:
        """A successful read: each other gateway's znode name → (data version, data)."""
        peers: dict[str, _Peer] = {}
        for name, (version, data) in nodes.items():
            known = self._peers.get(name)
            if known is not None and known.version == version:
                if now_ms - known.changed_ms <= self.hold_ms:
                    peers[name] = known
                continue
            try:
                report = decode_report(data)
            except RatesFormatError as exc:
                log.warning("event=fleet_peer_ignored peer=%s reason=%r", name, str(exc))
                continue
            self._learn(self._counts.get(name, {}), report.units, now_ms)
            self._counts[name] = report.units
            peers[name] = _Peer(version, now_ms, report.rates)
        for name in nodes:
            self._listed_ms[name] = now_ms
        for gone in [n for n, at in self._listed_ms.items() if now_ms - at > PENDING_HOLD_MS]:
            self._counts.pop(gone, None)
            del self._listed_ms[gone]
        self._drop_old_pending(now_ms)
        self._peers = peers
        self._index()
        self._last_ok_ms = now_ms
        if self._falling_back:
            self._falling_back = False
            log.info("event=fleet_quota_shared peers=%d", len(peers))

    def failed(self, now_ms: int) -> None:
        """A read failed (ZooKeeper unreachable): the last rates hold until `hold_ms` passed."""
        self._expire(now_ms)

    def share(self, kind: str, key: Hashable, quota: float, local: PeerRate, now_ms: int) -> float:
        if not self._by_sensor or self._expire(now_ms):
            return quota
        peers = self._by_sensor.get(self._sensor_id(kind, key))
        return quota if peers is None else fleet_share(quota, local, peers)

    def drain_units(self, kind: str, key: Hashable) -> list[tuple[int, int]]:
        """The units peers charged to `kind`/`key` not yet applied here: (learnt ms, units)."""
        if not self._pending:
            return []
        return self._pending.pop(self._sensor_id(kind, key), [])

    def _learn(self, before: dict[str, UnitCount], now: dict[str, UnitCount], now_ms: int) -> None:
        for sid, count in now.items():
            seen = before.get(sid)
            if seen is not None and seen.since == count.since:
                grown = count.units - seen.units
            else:
                grown = count.units if count.since >= self.started_ms else 0
            if grown > 0:
                pending = self._pending.setdefault(sid, [])
                pending.append((now_ms, grown))
                if len(pending) > MAX_PENDING:
                    (_, first), (at, second) = pending[0], pending[1]
                    pending[:2] = [(at, first + second)]

    def _drop_old_pending(self, now_ms: int) -> None:
        for sid in list(self._pending):
            kept = [e for e in self._pending[sid] if now_ms - e[0] <= PENDING_HOLD_MS]
            if kept:
                self._pending[sid] = kept
            else:
                del self._pending[sid]

    def _sensor_id(self, kind: str, key: Hashable) -> str:
        """`sensor_id`, remembered (a digest per charged request would cost more than the share)."""
        sid = self._ids.get((kind, key))
        if sid is None:
            if len(self._ids) >= MAX_CACHED_IDS:
                self._ids.clear()
            sid = self._ids[kind, key] = sensor_id(kind, key)
        return sid

    def _expire(self, now_ms: int) -> bool:
        """Drop the peers once the last good read is `hold_ms` old; whether they are dropped."""
        if self._last_ok_ms is not None and now_ms - self._last_ok_ms <= self.hold_ms:
            return False
        if not self._falling_back and self._last_ok_ms is not None:
            log.warning(
                "event=fleet_quota_fallback reason=zookeeper_unreadable held_ms=%d "
                "action=full_local_quotas",
                self.hold_ms,
            )
        self._falling_back = self._last_ok_ms is not None
        self._peers.clear()
        self._by_sensor.clear()
        return True

    def _index(self) -> None:
        by_sensor: dict[str, list[PeerRate]] = {}
        for peer in self._peers.values():
            for sid, rate in peer.rates.items():
                by_sensor.setdefault(sid, []).append(rate)
        self._by_sensor = by_sensor
