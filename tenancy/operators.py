"""Operators of the admin API and their bearer tokens.

A token is `pop_` + 64 random alphanumerics, returned once as a `Secret`; only its SHA-256 is
stored (see `tenancy.credentials` for why a fast hash is right for a random token). The first
operator is created by `pier tenancy init`; `has_operators` lets the API refuse to start without
one. Mixin of `TenantStore`; thread-safe.
"""

from __future__ import annotations

import hmac

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from tenancy.credentials import token_digest
from tenancy.domain import Secret
from tenancy.errors import ConflictError
from tenancy.ids import new_secret
from tenancy.models import OperatorRow
from tenancy.store_base import MAX_NAME, StoreCore, check_text

TOKEN_PREFIX = "pop_"  # "pier operator": lets secret scanners recognise a leaked token
MAX_TOKEN_LENGTH = 256


class OperatorCommands(StoreCore):
    def create_operator(self, name: str, *, actor: str) -> Secret:
        """Create operator `name`; returns its bearer token, which is not stored and not shown again."""
        check_text("name", name, max_length=MAX_NAME, allow_empty=False)
        token = TOKEN_PREFIX + new_secret()
        try:
            with self._db.write() as session:
                if session.get(OperatorRow, name) is not None:
                    raise ConflictError(f"operator {name!r} already exists")
                now = self._now()
                session.add(
                    OperatorRow(name=name, token_digest=token_digest(token), created_at=now)
                )
                self._journal(
                    session,
                    actor=actor,
                    action="operator.created",
                    tenant_id=None,
                    subject=name,
                    details={},
                    at=now,
                )
        except IntegrityError:
            raise ConflictError(f"operator {name!r} already exists") from None
        return Secret(token)

    def verify_operator(self, token: str) -> str | None:
        """The operator name for a bearer token, or None."""
        if not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
            return None
        if len(token) > MAX_TOKEN_LENGTH:
            return None
        digest = token_digest(token)
        with self._db.read() as session:
            row = session.scalars(
                select(OperatorRow).where(OperatorRow.token_digest == digest)
            ).first()
        # The equality lookup already matched; compare again in constant time all the same.
        if row is None or not hmac.compare_digest(row.token_digest, digest):
            return None
        return row.name

    def has_operators(self) -> bool:
        with self._db.read() as session:
            return session.scalar(select(OperatorRow.name).limit(1)) is not None
