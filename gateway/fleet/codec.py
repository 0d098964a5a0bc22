"""What a gateway writes in its znode under `/pier/gateways`: the rates of its quota sensors and
the units it charged to its metadata-change limits.

Owns: the sensor id (a 64-bit BLAKE2b digest of the sensor family and key, so tenant, user and
client-id names never reach ZooKeeper and every entry has the same small size), and the JSON
codec `{"v": 1, "rates": [[id, rate, saturated], ...], "units": [[id, units, since], ...]}`. At
most `MAX_ENTRIES` sensors are written, the fastest first (≈ 40 bytes each, so a znode stays near
400 KB, well under ZooKeeper's 1 MB `jute.maxbuffer`); the rest are left out and counted, and
their gateway is then unseen by its peers for those sensors, which only lets the fleet give them
more. A unit count (`gateway.quotas.shared_units`) is the units charged here since `since` (an
opaque token of the writer's: a count that starts again has a new one); at most
`MAX_UNIT_ENTRIES` are written, the first given (the writer orders them, ≈ 45 bytes each), a count
at most `MAX_UNITS`, and "units" may be absent (a gateway of an earlier version). A peer's znode that is not this format is ignored whole.
Pure; thread-safe.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

from gateway.quotas.fleet_share import PeerRate

VERSION = 1
MAX_ENTRIES = 10_000
MAX_UNIT_ENTRIES = 5_000
MAX_UNITS = 2**53  # a count past it (or a `since` past ±2^63) makes the document malformed
MAX_ZNODE_BYTES = 1_000_000  # what a peer's data may be at most to be read at all


class RatesFormatError(ValueError):
    """A peer's znode that is not a rates document of this version."""


def sensor_id(kind: str, key: Hashable) -> str:
    """The fleet-wide id of a sensor: the same family and key give the same id on every gateway."""
    return hashlib.blake2b(f"{kind}\0{key!r}".encode(), digest_size=8).hexdigest()


@dataclass(frozen=True, slots=True)
class UnitCount:
    """Units a gateway charged to one limit since `since` (its token for this count)."""

    units: int
    since: int


@dataclass(frozen=True, slots=True)
class Report:
    """One gateway's znode: its sensors' rates and its unit counts, by sensor id."""

    rates: dict[str, PeerRate]
    units: dict[str, UnitCount] = field(default_factory=dict)


def encode_rates(
    rates: Iterable[tuple[str, PeerRate]], units: Iterable[tuple[str, UnitCount]] = ()
) -> tuple[bytes, int]:
    """The znode data for `(sensor id, rate)` pairs (the fastest kept) and `(sensor id, unit
    count)` pairs (the first kept), and how many of either were left out by the caps."""
    rows = sorted(rates, key=lambda row: row[1].rate, reverse=True)
    kept = [[sid, round(peer.rate, 3), int(peer.saturated)] for sid, peer in rows[:MAX_ENTRIES]]
    counts = list(units)
    body: dict[str, object] = {"v": VERSION, "rates": kept}
    if counts:
        body["units"] = [[sid, c.units, c.since] for sid, c in counts[:MAX_UNIT_ENTRIES]]
    dropped = max(0, len(rows) - MAX_ENTRIES) + max(0, len(counts) - MAX_UNIT_ENTRIES)
    return json.dumps(body, separators=(",", ":")).encode(), dropped


def decode_rates(data: bytes) -> dict[str, PeerRate]:
    """A peer's rates by sensor id; RatesFormatError when the data is not a rates document."""
    return decode_report(data).rates


def decode_report(data: bytes) -> Report:
    """A peer's rates and unit counts; RatesFormatError when the data is not a rates document."""
    if not isinstance(data, bytes | bytearray):  # an empty znode reads as None
        raise RatesFormatError("no data")
    if len(data) > MAX_ZNODE_BYTES:
        raise RatesFormatError(f"{len(data)} bytes is over {MAX_ZNODE_BYTES}")
    try:
        body = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise RatesFormatError("not JSON") from exc
    if not isinstance(body, dict) or body.get("v") != VERSION:
        raise RatesFormatError("not a version 1 rates document")
    rows = body.get("rates")
    if not isinstance(rows, list) or len(rows) > MAX_ENTRIES:
        raise RatesFormatError("rates is not a list of at most MAX_ENTRIES rows")
    counts = body.get("units", [])
    if not isinstance(counts, list) or len(counts) > MAX_UNIT_ENTRIES:
        raise RatesFormatError("units is not a list of at most MAX_UNIT_ENTRIES rows")
    return Report(dict(_row(row) for row in rows), dict(_count(row) for row in counts))


def _row(row: object) -> tuple[str, PeerRate]:
    if not (isinstance(row, list) and len(row) == 3 and isinstance(row[0], str)):
        raise RatesFormatError(f"bad row {row!r:.80}")
    rate, saturated = row[1], row[2]
    if not isinstance(rate, int | float) or rate < 0 or saturated not in (0, 1):
        raise RatesFormatError(f"bad row {row!r:.80}")
    return row[0], PeerRate(float(rate), bool(saturated))


def _count(row: object) -> tuple[str, UnitCount]:
    if not (isinstance(row, list) and len(row) == 3 and isinstance(row[0], str)):
        raise RatesFormatError(f"bad unit row {row!r:.80}")
    units, since = row[1], row[2]
    if (
        not (_is_int(units) and _is_int(since))
        or not 0 <= units <= MAX_UNITS
        or abs(since) >= 2**63
    ):
        raise RatesFormatError(f"bad unit row {row!r:.80}")
    return row[0], UnitCount(units, since)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
