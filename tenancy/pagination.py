"""Opaque cursors and keyset pages: lists resume after the last (created_at, id) seen.

A cursor is base64url JSON of the last row's sort key; callers must treat it as opaque. Keyset
paging (not OFFSET) stays correct while rows are inserted and costs one index range scan per page.
Stateless; safe from any thread.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Select, and_, or_
from sqlalchemy.orm import InstrumentedAttribute, Session

from tenancy.domain import Page
from tenancy.errors import ValidationError

T = TypeVar("T")
R = TypeVar("R")
MAX_LIMIT = 1000


def check_limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationError("limit", f"must be an integer from 1 to {MAX_LIMIT}")
    return limit


def encode_cursor(*key: str | int) -> str:
    raw = json.dumps(list(key), separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: str, types: Sequence[type]) -> list[Any]:
    """The sort key in `cursor`, checked against `types`; ValidationError for anything else."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = json.loads(raw)
    except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
        raise ValidationError("cursor", "not a cursor returned by this API") from None
    if not isinstance(key, list) or len(key) != len(types):
        raise ValidationError("cursor", "not a cursor returned by this API")
    if not all(type(part) is kind for part, kind in zip(key, types, strict=True)):
        raise ValidationError("cursor", "not a cursor returned by this API")
    return key


def keyset_page(
    session: Session,
    query: Select[R],
    created: InstrumentedAttribute[datetime],
    ident: InstrumentedAttribute[str],
    cursor: str | None,
    limit: int,
    convert: Callable[[R], T],
) -> Page[T]:
    """One page of `query` ordered by (created, ident) ascending, after `cursor`."""
    limit = check_limit(limit)
    if cursor is not None:
        at_text, last_id = decode_cursor(cursor, (str, str))
        try:
            at = datetime.fromisoformat(at_text)
        except ValueError:
            at = None
        if at is None or at.tzinfo is None:
            raise ValidationError("cursor", "not a cursor returned by this API")
        query = query.where(or_(created > at, and_(created == at, ident > last_id)))
    rows = list(session.scalars(query.order_by(created, ident).limit(limit + 1)))
    items = rows[:limit]
    next_cursor = None
    if len(rows) > limit:
        last = items[-1]
        next_cursor = encode_cursor(
            getattr(last, created.key).isoformat(), getattr(last, ident.key)
        )
    return Page([convert(row) for row in items], next_cursor)
