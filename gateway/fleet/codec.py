"""What a gateway writes in its znode under `/pier/gateways`: the rates of its quota sensors.

Owns: the sensor id (a 64-bit BLAKE2b digest of the sensor family and key, so tenant, user and
client-id names never reach ZooKeeper and every entry has the same small size), and the JSON
codec `{"v": 1, "rates": [[id, rate, saturated], ...]}`. At most `MAX_ENTRIES` sensors are written,
the fastest first (≈ 40 bytes each, so a znode stays near 400 KB, well under ZooKeeper's 1 MB
`jute.maxbuffer`); the rest are left out and counted, and their gateway is then unseen by its
peers for those sensors, which only lets the fleet give them more. A peer's znode that is not
this format is ignored whole. Pure; thread-safe.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Iterable

from gateway.quotas.fleet_share import PeerRate

VERSION = 1
MAX_ENTRIES = 10_000
MAX_ZNODE_BYTES = 1_000_000  # what a peer's data may be at most to be read at all


class RatesFormatError(ValueError):
    """A peer's znode that is not a rates document of this version."""


def sensor_id(kind: str, key: Hashable) -> str:
    """The fleet-wide id of a sensor: the same family and key give the same id on every gateway."""
    return hashlib.blake2b(f"{kind}\0{key!r}".encode(), digest_size=8).hexdigest()


def encode_rates(rates: Iterable[tuple[str, PeerRate]]) -> tuple[bytes, int]:
    """The znode data for `(sensor id, rate)` pairs, and how many were left out by the cap."""
    rows = sorted(rates, key=lambda row: row[1].rate, reverse=True)
    kept = [[sid, round(peer.rate, 3), int(peer.saturated)] for sid, peer in rows[:MAX_ENTRIES]]
    body = {"v": VERSION, "rates": kept}
    return json.dumps(body, separators=(",", ":")).encode(), max(0, len(rows) - MAX_ENTRIES)


def decode_rates(data: bytes) -> dict[str, PeerRate]:
    """A peer's rates by sensor id; RatesFormatError when the data is not a rates document."""
    if len(data) > MAX_ZNODE_BYTES:
        raise RatesFormatError(f"{len(data)} bytes is over {MAX_ZNODE_BYTES}")
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RatesFormatError("not JSON") from exc
    if not isinstance(body, dict) or body.get("v") != VERSION:
        raise RatesFormatError("not a version 1 rates document")
    rows = body.get("rates")
    if not isinstance(rows, list) or len(rows) > MAX_ENTRIES:
        raise RatesFormatError("rates is not a list of at most MAX_ENTRIES rows")
    return dict(_row(row) for row in rows)


def _row(row: object) -> tuple[str, PeerRate]:
    if not (isinstance(row, list) and len(row) == 3 and isinstance(row[0], str)):
        raise RatesFormatError(f"bad row {row!r:.80}")
    rate, saturated = row[1], row[2]
    if not isinstance(rate, int | float) or rate < 0 or saturated not in (0, 1):
        raise RatesFormatError(f"bad row {row!r:.80}")
    return row[0], PeerRate(float(rate), bool(saturated))
