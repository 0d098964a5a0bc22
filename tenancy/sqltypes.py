"""Column types that behave the same on SQLite and PostgreSQL.

- `UtcDateTime`: timestamps go in as aware UTC and come out as aware UTC. PostgreSQL stores
  `timestamptz`; SQLite has no time zones, so the value is stored naive in UTC (SQLAlchemy's ISO text,
  which sorts chronologically, so keyset pagination on it works).
- `Money`: exact decimals. PostgreSQL stores NUMERIC(38, 12); SQLite's NUMERIC affinity would turn
  values into doubles, so there the value is stored as its exact decimal text.
Stateless; safe from any thread.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from sqlalchemy import DateTime, Dialect, Numeric, String
from sqlalchemy.types import TypeDecorator, TypeEngine


class UtcDateTime(TypeDecorator[datetime]):
    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the tenant store; use aware UTC")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


class Money(TypeDecorator[Decimal]):
    impl = Numeric(38, 12)
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "sqlite":
            return dialect.type_descriptor(String(64))
        return dialect.type_descriptor(Numeric(38, 12, asdecimal=True))

    def process_bind_param(self, value: Decimal | None, dialect: Dialect) -> Any:
        if value is None:
            return None
        return str(value) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any, dialect: Dialect) -> Decimal | None:
        if value is None:
            return None
        # normalize() drops PostgreSQL's scale padding (1.500000000000 → 1.5) so values round-trip.
        return _plain(Decimal(value))


def _plain(value: Decimal) -> Decimal:
    normal = value.normalize()
    # normalize() writes 100 as 1E+2; quantize back to an integer exponent for readable JSON.
    return normal.quantize(Decimal(1)) if normal == normal.to_integral_value() else normal
