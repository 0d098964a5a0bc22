"""The journal: every mutation's audit entry and change record, written in the mutation's transaction.

`record()` takes the next change version from the one-row `change_counter` (the UPDATE's row lock
serialises writers until commit, so versions are gapless and in commit order: a subscriber that
sees version n has seen every version below it), inserts the change and the audit entry, and on
PostgreSQL queues `pg_notify('pier_changes', version)`, which the server delivers at commit. Callers
pass details without secrets; the journal never sees one. Runs inside the caller's session and
thread.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from tenancy.domain import AuditEntry, Change, Page
from tenancy.models import AuditRow, ChangeCounterRow, ChangeRow
from tenancy.pagination import check_limit, decode_cursor, encode_cursor

NOTIFY_CHANNEL = "pier_changes"


def record(
    session: Session,
    *,
    at: datetime,
    actor: str,
    action: str,
    tenant_id: str | None,
    subject: str,
    details: dict[str, Any],
) -> Change:
    """Journal one mutation: audit entry + change record (+ NOTIFY on PostgreSQL). Returns the change."""
    bump = (
        update(ChangeCounterRow)
        .where(ChangeCounterRow.id == 1)
        .values(version=ChangeCounterRow.version + 1)
        .returning(ChangeCounterRow.version)
    )
    version = session.execute(bump).scalar_one()
    session.add(
        ChangeRow(version=version, kind=action, tenant_id=tenant_id, subject=subject, at=at)
    )
    session.add(
        AuditRow(
            at=at, actor=actor, action=action, tenant_id=tenant_id, subject=subject, details=details
        )
    )
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_notify(NOTIFY_CHANNEL, str(version))))
    session.flush()
    return Change(version, action, tenant_id, subject, at)


def current_version(session: Session) -> int:
    return int(session.execute(select(ChangeCounterRow.version)).scalar_one())


def changes_since(session: Session, version: int, limit: int) -> list[Change]:
    query = (
        select(ChangeRow)
        .where(ChangeRow.version > version)
        .order_by(ChangeRow.version)
        .limit(limit)
    )
    return [
        Change(row.version, row.kind, row.tenant_id, row.subject, row.at)
        for row in session.scalars(query)
    ]


def prune_changes(session: Session, through_version: int) -> int:
    """Delete change records up to `through_version`; subscribers behind it will see a gap."""
    result = session.execute(delete(ChangeRow).where(ChangeRow.version <= through_version))
    return int(result.rowcount)  # type: ignore[attr-defined]


def audit_page(
    session: Session, cursor: str | None, limit: int, tenant_id: str | None
) -> Page[AuditEntry]:
    """Audit entries newest first, keyset-paged on the entry id."""
    limit = check_limit(limit)
    query = select(AuditRow)
    if tenant_id is not None:
        query = query.where(AuditRow.tenant_id == tenant_id)
    if cursor is not None:
        (last_id,) = decode_cursor(cursor, (int,))
        query = query.where(AuditRow.id < last_id)
    rows = list(session.scalars(query.order_by(AuditRow.id.desc()).limit(limit + 1)))
    entries = [
        AuditEntry(row.id, row.at, row.actor, row.action, row.tenant_id, row.subject, row.details)
        for row in rows[:limit]
    ]
    next_cursor = encode_cursor(entries[-1].id) if len(rows) > limit else None
    return Page(entries, next_cursor)
