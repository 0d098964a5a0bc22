"""Service accounts: a tenant's principals (`User:<id>` in ACLs, the user of quota entities).

Names are unique within a tenant; ids (`sa-…`) are global and opaque. Mixin of `TenantStore`;
thread-safe (one session per call).
"""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from tenancy.domain import Page, ServiceAccount
from tenancy.errors import ConflictError, ForbiddenError, NotFoundError, ValidationError
from tenancy.ids import new_service_account_id
from tenancy.models import ServiceAccountRow
from tenancy.pagination import keyset_page
from tenancy.store_base import MAX_NAME, MAX_TEXT, StoreCore, check_text


def account_from_row(row: ServiceAccountRow) -> ServiceAccount:
    return ServiceAccount(row.id, row.tenant_id, row.name, row.description, row.created_at)


def tenant_account(
    session: Session, tenant_id: str, account_id: str, field: str
) -> ServiceAccountRow:
    """The service account `account_id` named in a request body: ValidationError if unknown,
    ForbiddenError if it belongs to another tenant."""
    row = session.get(ServiceAccountRow, account_id) if isinstance(account_id, str) else None
    if row is None:
        raise ValidationError(field, f"no service account {account_id!r} in this tenant")
    if row.tenant_id != tenant_id:
        raise ForbiddenError(f"{field}: service account {account_id!r} belongs to another tenant")
    return row


class ServiceAccountCommands(StoreCore):
    def create_service_account(
        self, tenant_id: str, *, name: str, description: str = "", actor: str
    ) -> ServiceAccount:
        check_text("name", name, max_length=MAX_NAME, allow_empty=False)
        check_text("description", description, max_length=MAX_TEXT, allow_empty=True)
        try:
            with self._db.write() as session:
                self._live_tenant(session, tenant_id)
                taken = select(ServiceAccountRow.id).where(
                    ServiceAccountRow.tenant_id == tenant_id, ServiceAccountRow.name == name
                )
                if session.scalar(taken) is not None:
                    raise ConflictError(f"service account {name!r} already exists")
                row = ServiceAccountRow(
                    id=new_service_account_id(),
                    tenant_id=tenant_id,
                    name=name,
                    description=description,
                    created_at=self._now(),
                )
                session.add(row)
                self._journal(
                    session,
                    actor=actor,
                    action="service_account.created",
                    tenant_id=tenant_id,
                    subject=row.id,
                    details={"name": name, "description": description},
                    at=row.created_at,
                )
                return account_from_row(row)
        except IntegrityError:
            raise ConflictError(f"service account {name!r} already exists") from None

    def get_service_account(self, tenant_id: str, service_account_id: str) -> ServiceAccount:
        with self._db.read() as session:
            self._tenant(session, tenant_id)
            row = session.get(ServiceAccountRow, service_account_id)
            if row is None or row.tenant_id != tenant_id:
                raise NotFoundError(f"service account {service_account_id!r} not found")
            return account_from_row(row)

    def list_service_accounts(
        self, tenant_id: str, *, cursor: str | None = None, limit: int = 100
    ) -> Page[ServiceAccount]:
        query = select(ServiceAccountRow).where(ServiceAccountRow.tenant_id == tenant_id)
        with self._db.read() as session:
            self._tenant(session, tenant_id)
            return keyset_page(
                session,
                query,
                ServiceAccountRow.created_at,
                ServiceAccountRow.id,
                cursor,
                limit,
                account_from_row,
            )
