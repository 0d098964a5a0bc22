"""The billing ledger: rollups, storage state and the next `__usage` offsets, written in ONE transaction of the tenancy database, fenced on the offsets the run started from.

The fence is a conditional update of `billing_cursor` (`WHERE generation = g AND offsets = start`;
the first run inserts the row, and the primary key refuses a second insert): of two runs that
started from the same offsets, exactly one commits; the other gets `FencedError` and writes
nothing. Rollups are sums: a run adds to existing rows (late usage lands in its hour), never
overwrites. The ids of counted records live beside it in Parquet (`billing.rollup.ids`, named
after the generation this commit writes), except traffic ids kept as sequence ranges per writer
(`billing.rollup.ranges`), which this transaction merges into `billing_counted_ranges`; ids earlier versions kept in `billing_record_ids` are
still read (`counted_ids`) until `__usage`'s retention ages them out. Thread-safe (each call opens its own session).
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from billing.rollup.seq_ranges import Range, merge
from billing.rollup.sums import Cursor, PendingSample, RollupKey, RunOutput, Sums
from billing.source.offsets import offsets_from_json, offsets_to_json
from tenancy.database import Database
from tenancy.models import (
    BillingCountedRangeRow,
    BillingCursorRow,
    BillingRecordIdRow,
    BillingRunHourRow,
    BillingRunRow,
    StoragePendingRow,
    UsageRollupRow,
)
from tenancy.usage import RETENTION_MS

_ID_CHUNK = 5000


class FencedError(Exception):
    """Another run committed from the same starting offsets first; this one wrote nothing."""


def read_cursor(db: Database, topic: str) -> Cursor | None:
    with db.read() as session:
        row = session.get(BillingCursorRow, topic)
        return None if row is None else Cursor(row.generation, offsets_from_json(row.offsets))


def pending_samples(db: Database) -> list[PendingSample]:
    with db.read() as session:
        return [
            PendingSample(r.tenant_id, r.topic, r.partition, r.at_ms, r.bytes, r.settled)
            for r in session.scalars(select(StoragePendingRow))
        ]


def counted_ids(db: Database, hours: list[int]) -> list[str]:
    """Ids earlier versions counted (in the database) for records of the given UTC hours."""
    found: list[str] = []
    with db.read() as session:
        for start in range(0, len(hours), 500):
            chunk = hours[start : start + 500]
            query = select(BillingRecordIdRow.id).where(BillingRecordIdRow.hour_ms.in_(chunk))
            found.extend(session.scalars(query))
    return found


def counted_ranges(db: Database, topic: str) -> list[Range]:
    """The sequence ranges counted so far (few: a handful per gateway incarnation)."""
    with db.read() as session:
        query = select(BillingCountedRangeRow).where(BillingCountedRangeRow.topic == topic)
        return [Range(r.writer, r.lo, r.hi, r.hour_ms) for r in session.scalars(query)]


def commit(db: Database, out: RunOutput, now: datetime | None = None) -> int:
    """Write the run; returns its id. FencedError if another run moved the cursor first."""
    now = now or datetime.now(UTC)
    with db.write() as session:
        generation = _advance(session, out, now)
        run = BillingRunRow(
            topic=out.topic,
            generation=generation,
            start_offsets=offsets_to_json(out.start_offsets),
            end_offsets=offsets_to_json(out.end_offsets),
            until_ms=out.until_ms,
            records=out.records,
            duplicates=out.duplicates,
            rejected=out.rejected,
            late_samples=out.late_samples,
            committed_at=now,
        )
        session.add(run)
        session.flush()
        _add_rollups(session, out, run.id)
        _expire_legacy_ids(session, out)
        _store_ranges(session, out)
        _store_pending(session, out.pending)
        return run.id


def _advance(session: Session, out: RunOutput, now: datetime) -> int:
    end = offsets_to_json(out.end_offsets)
    if out.start is None:
        session.add(BillingCursorRow(topic=out.topic, generation=1, offsets=end, updated_at=now))
        try:
            session.flush()
        except IntegrityError:
            raise FencedError(_fenced_message(out.topic)) from None
        return 1
    start = out.start
    result = session.execute(
        update(BillingCursorRow)
        .where(
            BillingCursorRow.topic == out.topic,
            BillingCursorRow.generation == start.generation,
            BillingCursorRow.offsets == offsets_to_json(start.offsets),
        )
        .values(generation=start.generation + 1, offsets=end, updated_at=now)
    )
    if result.rowcount != 1:  # type: ignore[attr-defined]
        raise FencedError(_fenced_message(out.topic))
    return start.generation + 1


def _fenced_message(topic: str) -> str:
    return (
        f"another billing run committed {topic} offsets first; nothing was written "
        "(run again to continue from its offsets)"
    )


def _add_rollups(session: Session, out: RunOutput, run_id: int) -> None:
    """Adds to the rows that exist (late usage), inserts the others in bulk."""
    existing = _existing_rollups(session, out)
    fresh = []
    for key, sums in sorted(out.rollups.items()):
        row = existing.get(key)
        if row is None:
            fresh.append(_new_row(key, sums, run_id))
            continue
        for name in ("bytes_in", "bytes_out", "requests", "throttle_ms", "connection_ms"):
            setattr(row, name, getattr(row, name) + getattr(sums, name))
        row.partition_ms += sums.partition_ms
        row.storage_byte_ms = Decimal(row.storage_byte_ms) + sums.storage_byte_ms
        row.records += sums.records
        row.version += 1
        row.last_run = run_id
    for start in range(0, len(fresh), _ID_CHUNK):
        session.execute(insert(UsageRollupRow), fresh[start : start + _ID_CHUNK])
    hours = sorted({(key.tenant, key.hour_ms) for key in out.rollups})
    for start in range(0, len(hours), _ID_CHUNK):
        session.execute(
            insert(BillingRunHourRow),
            [
                {"run_id": run_id, "tenant_id": t, "hour_ms": h}
                for t, h in hours[start : start + _ID_CHUNK]
            ],
        )


def _existing_rollups(session: Session, out: RunOutput) -> dict[RollupKey, UsageRollupRow]:
    hours = sorted({key.hour_ms for key in out.rollups})
    found: dict[RollupKey, UsageRollupRow] = {}
    for start in range(0, len(hours), 500):
        query = select(UsageRollupRow).where(UsageRollupRow.hour_ms.in_(hours[start : start + 500]))
        for row in session.scalars(query):
            key = RollupKey(row.tenant_id, row.principal, row.client_id, row.topic, row.hour_ms)
            if key in out.rollups:
                found[key] = row
    return found


def _new_row(key: RollupKey, sums: Sums, run_id: int) -> dict[str, object]:
    return {
        "tenant_id": key.tenant, "principal": key.principal, "client_id": key.client_id,
        "topic": key.topic, "hour_ms": key.hour_ms, "bytes_in": sums.bytes_in,
        "bytes_out": sums.bytes_out, "requests": sums.requests, "throttle_ms": sums.throttle_ms,
        "connection_ms": sums.connection_ms, "partition_ms": sums.partition_ms,
        "storage_byte_ms": sums.storage_byte_ms, "records": sums.records, "version": 1,
        "last_run": run_id,
    }  # fmt: skip


def _expire_legacy_ids(session: Session, out: RunOutput) -> None:
    horizon = out.until_ms - RETENTION_MS
    session.execute(delete(BillingRecordIdRow).where(BillingRecordIdRow.hour_ms < horizon))


def _store_ranges(session: Session, out: RunOutput) -> None:
    """Merge the run's ranges into its writers' stored ones; drop ranges past retention."""
    table = BillingCountedRangeRow
    horizon = out.until_ms - RETENTION_MS
    session.execute(delete(table).where(table.topic == out.topic, table.hour_ms < horizon))
    writers = sorted({r.writer for r in out.ranges})
    for start in range(0, len(writers), 500):
        chunk = writers[start : start + 500]
        mine = (table.topic == out.topic) & table.writer.in_(chunk)
        held = [
            Range(r.writer, r.lo, r.hi, r.hour_ms)
            for r in session.scalars(select(table).where(mine))
        ]
        fresh = [r for r in out.ranges if r.writer in set(chunk)]
        session.execute(delete(table).where(mine))
        rows = [
            {"topic": out.topic, "writer": r.writer, "lo": r.lo, "hi": r.hi, "hour_ms": r.hour_ms}
            for r in merge([*held, *fresh])
        ]
        session.execute(insert(table), rows)


def _store_pending(session: Session, pending: list[PendingSample]) -> None:
    """Each partition's newest sample: one query for the keys stored already (by tenant, in
    chunks), then the changed rows updated and the new ones inserted in bulk (a micro-batch of
    a fleet's storage samples holds thousands; a statement per sample was most of its commit)."""
    table = StoragePendingRow
    latest = {(s.tenant, s.topic, s.partition): s for s in pending}  # the last one of a key wins
    tenants = sorted({tenant for tenant, _, _ in latest})
    stored: set[tuple[str, str, int]] = set()
    for start in range(0, len(tenants), 500):
        keys = select(table.tenant_id, table.topic, table.partition)
        chunk = keys.where(table.tenant_id.in_(tenants[start : start + 500]))
        stored.update((t, topic, p) for t, topic, p in session.execute(chunk))
    rows = {key: _pending_row(s) for key, s in latest.items()}
    changed = [row for key, row in rows.items() if key in stored]
    fresh = [row for key, row in rows.items() if key not in stored]
    if changed:  # an ORM bulk UPDATE by primary key
        session.execute(update(table), changed)
    for start in range(0, len(fresh), _ID_CHUNK):
        session.execute(insert(table), fresh[start : start + _ID_CHUNK])


def _pending_row(sample: PendingSample) -> dict[str, object]:
    return {
        "tenant_id": sample.tenant, "topic": sample.topic, "partition": sample.partition,
        "at_ms": sample.at_ms, "bytes": sample.bytes, "settled": sample.settled,
    }  # fmt: skip
