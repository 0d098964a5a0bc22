"""What the peers charged to the metadata-change limits, learnt from their unit counts
(`gateway.quotas.shared_units`; docs/gateway.md, "Metadata changes across gateways").

Owns `PeerCounts`: each read of a peer's znode (`learn`) is compared with what this gateway last
read of that peer; the units a count grew by are kept for its sensor, with the time they were
learnt, until the limiter drains them (`drain`). Growth is taken only from a peer read without a
gap (its previous document read at most `gap_ms` before): across a ZooKeeper outage, or while the
peer was left out or unlisted, every gateway enforced its limits alone, and charging the whole
outage's units at once would lock the tenant out everywhere; after a gap the counts only set where
they stand. A count not seen before (new, or started again under a new `since`) is taken whole
when it began within `FRESH_MS` of the read (on the writers' wall clocks, so up to that much clock
skew is tolerated) and after this gateway started; an older one was enforced by the peers and
only sets where it stands. What was read of a peer is merged, not replaced: a count the peer left
out of its znode for a while (the entry cap) and shows again is not taken twice; entries not shown
for `REMEMBER_MS` are forgotten (a sweep every `SWEEP_MS`), at most `MAX_REMEMBERED` per peer
(the least recently shown go first). Undrained units older than `PENDING_HOLD_MS` are dropped (a
limiter this gateway never asks has nothing to apply them to), and a sensor keeps at most
`MAX_PENDING` entries (the oldest two merge, at the later time). Runs on the event loop; not
thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gateway.fleet.codec import MAX_UNIT_ENTRIES, UnitCount

FRESH_MS = 10_000  # a count first seen is taken whole if it began this recently
REMEMBER_MS = 600_000  # a peer's count not shown for this long is forgotten
SWEEP_MS = 30_000
MAX_REMEMBERED = 4 * MAX_UNIT_ENTRIES  # counts remembered per peer
PENDING_HOLD_MS = 300_000  # peers' units not drained within this are dropped
MAX_PENDING = 16  # entries kept per sensor before the oldest merge


@dataclass(slots=True)
class _Seen:
    read_ms: int
    counts: dict[str, tuple[UnitCount, int]] = field(default_factory=dict)  # → (count, shown ms)


class PeerCounts:
    def __init__(self, *, gap_ms: int, started_ms: int = 0) -> None:
        self.gap_ms = gap_ms
        self.started_ms = started_ms
        self._seen: dict[str, _Seen] = {}  # peer name → what was read of it
        self._pending: dict[str, list[tuple[int, int]]] = {}  # sensor id → [(learnt ms, units)]
        self._swept_ms = 0

    def learn(self, peer: str, counts: dict[str, UnitCount], now_ms: int) -> None:
        """One read of `peer`'s counts (sensor id → count)."""
        seen = self._seen.get(peer)
        unbroken = seen is not None and now_ms - seen.read_ms <= self.gap_ms
        if seen is None:
            seen = self._seen[peer] = _Seen(now_ms)
        for sid, count in counts.items():
            before = seen.counts.get(sid)
            if before is not None and before[0].since == count.since:
                grown = count.units - before[0].units if unbroken else 0
            else:
                grown = count.units if self._fresh(count.since, now_ms) else 0
            seen.counts[sid] = (count, now_ms)
            if grown > 0:
                self._add(sid, grown, now_ms)
        seen.read_ms = now_ms
        if len(seen.counts) > MAX_REMEMBERED:
            self._trim(seen)

    def drain(self, sid: str) -> list[tuple[int, int]]:
        """The units learnt for sensor `sid` and not yet drained: (learnt ms, units)."""
        return self._pending.pop(sid, []) if self._pending else []

    def sweep(self, now_ms: int) -> None:
        """Drop old pending units, and counts and peers not shown for `REMEMBER_MS`."""
        for sid in list(self._pending):
            kept = [e for e in self._pending[sid] if now_ms - e[0] <= PENDING_HOLD_MS]
            if kept:
                self._pending[sid] = kept
            else:
                del self._pending[sid]
        if now_ms - self._swept_ms < SWEEP_MS:
            return
        self._swept_ms = now_ms
        for peer in list(self._seen):
            seen = self._seen[peer]
            if now_ms - seen.read_ms > REMEMBER_MS:
                del self._seen[peer]
                continue
            stale = [sid for sid, (_, shown) in seen.counts.items() if now_ms - shown > REMEMBER_MS]
            for sid in stale:
                del seen.counts[sid]

    def _fresh(self, since: int, now_ms: int) -> bool:
        return since >= self.started_ms and now_ms - since <= FRESH_MS

    def _add(self, sid: str, units: int, now_ms: int) -> None:
        pending = self._pending.setdefault(sid, [])
        pending.append((now_ms, units))
        if len(pending) > MAX_PENDING:
            (_, first), (at, second) = pending[0], pending[1]
            pending[:2] = [(at, first + second)]

    @staticmethod
    def _trim(seen: _Seen) -> None:
        by_shown = sorted(seen.counts.items(), key=lambda item: item[1][1], reverse=True)
        seen.counts = dict(by_shown[:MAX_REMEMBERED])
