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

Unit counts: each peer's counts read are handed to `PeerCounts` (`gateway.fleet.peer_counts`),
which keeps what they grew by until the limiters drain it (`drain_units`). Runs on the event
loop; not thread-safe.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

from gateway.fleet.codec import RatesFormatError, decode_report, sensor_id
from gateway.fleet.peer_counts import PeerCounts
from gateway.quotas.fleet_share import PeerRate, fleet_share

log = logging.getLogger("pier.gateway.fleet")
MAX_CACHED_IDS = 100_000  # sensor ids remembered; past it the memo starts over


@dataclass(slots=True)
class _Peer:
    version: int
    changed_ms: int
    rates: dict[str, PeerRate]


class PeerTable:
    def __init__(self, *, hold_ms: int, started_ms: int = 0) -> None:
        self.hold_ms = hold_ms
        self.counts = PeerCounts(gap_ms=hold_ms, started_ms=started_ms)
        self._peers: dict[str, _Peer] = {}
        self._by_sensor: dict[str, list[PeerRate]] = {}
        self._last_ok_ms: int | None = None
        self._falling_back = False
        self._ids: dict[tuple[str, Hashable], str] = {}

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
            self.counts.learn(name, report.units, now_ms)
            peers[name] = _Peer(version, now_ms, report.rates)
        self.counts.sweep(now_ms)
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
        return self.counts.drain(self._sensor_id(kind, key))

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
