"""Client quotas of a tenant, stored as Kafka quota entities, and their effective values.

An entity's user is one of the tenant's service accounts or `<default>`; its client id any name or
`<default>`. Entities are per tenant: `<default>` means the tenant's default, never another
tenant's. `set_quotas` upserts the given names and removes those given as None (an entity left
without quotas disappears); the journal subject is the entity's ZooKeeper-style path. Values are
Kafka's types: byte rates whole bytes/s (int), the other two floats. A tenant's plan writes its
`/config/users/<default>` entity (`write_plan_quotas`). Mixin of `TenantStore`; thread-safe.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import delete, select, tuple_
from sqlalchemy.orm import Session

from tenancy.domain import DEFAULT_ENTITY, EffectiveQuota, QuotaEntity
from tenancy.errors import NotFoundError
from tenancy.models import QuotaRow
from tenancy.quota_chain import (
    check_entity,
    check_lookup,
    check_quotas,
    entity_path,
    precedence,
    resolve,
    stored_value,
)
from tenancy.service_accounts import tenant_account
from tenancy.store_base import StoreCore

_ABSENT = ""  # column value for "not part of the entity" (NULL would defeat the primary key)


def _columns(entity: QuotaEntity) -> tuple[str, str]:
    return entity.user or _ABSENT, entity.client_id or _ABSENT


def _entity(row: QuotaRow) -> QuotaEntity:
    return QuotaEntity(row.entity_user or None, row.entity_client or None)


def _entity_json(entity: QuotaEntity) -> dict[str, str | None]:
    return {"user": entity.user, "client_id": entity.client_id}


PLAN_ENTITY = QuotaEntity(DEFAULT_ENTITY, None)  # /config/users/<default>: where a plan's go


def write_plan_quotas(session: Session, tenant_id: str, quotas: Mapping[str, float]) -> None:
    """Make the tenant's `/config/users/<default>` quotas exactly `quotas` (a plan's)."""
    user, client = _columns(PLAN_ENTITY)
    session.execute(
        delete(QuotaRow).where(
            QuotaRow.tenant_id == tenant_id,
            QuotaRow.entity_user == user,
            QuotaRow.entity_client == client,
        )
    )
    session.flush()
    session.add_all(
        QuotaRow(tenant_id=tenant_id, entity_user=user, entity_client=client, name=n, value=v)
        for n, v in quotas.items()
    )


class QuotaCommands(StoreCore):
    def set_quotas(
        self,
        tenant_id: str,
        entity: QuotaEntity,
        quotas: Mapping[str, float | None],
        *,
        actor: str,
    ) -> None:
        entity, values = check_entity(entity), check_quotas(quotas)
        user, client = _columns(entity)
        with self._db.write() as session:
            self._live_tenant(session, tenant_id)
            if entity.user is not None and entity.user != DEFAULT_ENTITY:
                tenant_account(session, tenant_id, entity.user, "entity.user")
            for name, value in values.items():
                row = session.get(QuotaRow, (tenant_id, user, client, name))
                if value is None:
                    if row is not None:
                        session.delete(row)
                elif row is None:
                    session.add(
                        QuotaRow(
                            tenant_id=tenant_id,
                            entity_user=user,
                            entity_client=client,
                            name=name,
                            value=value,
                        )
                    )
                else:
                    row.value = value
            self._journal(
                session,
                actor=actor,
                action="quota.set",
                tenant_id=tenant_id,
                subject=entity_path(entity),
                details={"entity": _entity_json(entity), "quotas": dict(values)},
            )

    def list_quotas(self, tenant_id: str) -> list[tuple[QuotaEntity, dict[str, float]]]:
        """Every configured entity of the tenant with its quotas, ordered by entity path."""
        with self._db.read() as session:
            self._tenant(session, tenant_id)
            rows = session.scalars(select(QuotaRow).where(QuotaRow.tenant_id == tenant_id))
            grouped: dict[QuotaEntity, dict[str, float]] = {}
            for row in rows:
                grouped.setdefault(_entity(row), {})[row.name] = stored_value(row.name, row.value)
        return sorted(grouped.items(), key=lambda item: entity_path(item[0]))

    def delete_quotas(self, tenant_id: str, entity: QuotaEntity, *, actor: str) -> None:
        """Remove every quota of `entity`; NotFoundError when it has none."""
        entity = check_entity(entity)
        user, client = _columns(entity)
        with self._db.write() as session:
            self._live_tenant(session, tenant_id)
            removed = session.execute(
                delete(QuotaRow).where(
                    QuotaRow.tenant_id == tenant_id,
                    QuotaRow.entity_user == user,
                    QuotaRow.entity_client == client,
                )
            )
            if not removed.rowcount:  # type: ignore[attr-defined]
                raise NotFoundError(f"no quotas for {entity_path(entity)}")
            self._journal(
                session,
                actor=actor,
                action="quota.deleted",
                tenant_id=tenant_id,
                subject=entity_path(entity),
                details={"entity": _entity_json(entity)},
            )

    def effective_quotas(
        self, tenant_id: str, *, user: str, client_id: str
    ) -> dict[str, EffectiveQuota]:
        """Each quota name's value for (user, client_id) and the entity path that supplied it."""
        check_lookup(user, client_id)
        candidates = [_columns(entity) for entity in precedence(user, client_id)]
        with self._db.read() as session:
            self._tenant(session, tenant_id)
            rows = session.scalars(
                select(QuotaRow).where(
                    QuotaRow.tenant_id == tenant_id,
                    tuple_(QuotaRow.entity_user, QuotaRow.entity_client).in_(candidates),
                )
            )
            configured: dict[QuotaEntity, dict[str, float]] = {}
            for row in rows:
                configured.setdefault(_entity(row), {})[row.name] = stored_value(
                    row.name, row.value
                )
        return resolve(configured, user, client_id)
