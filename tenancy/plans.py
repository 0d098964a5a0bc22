"""Plans in the store: read, list and replace whole plans (billing reads them when invoicing;
tenants take their limits and default quotas from them when created on or moved to one).

A plan is stored as rows (plan with its limits and quotas, its dimensions, their tiers) with money
in NUMERIC columns, and is always replaced whole: `put_plan` deletes the old dimensions and writes
the new ones in one transaction, so a reader sees either plan, never a mix. Replacing a plan does
not change the tenants already on it. A plan's `authorization` ("acls" or "open", revision 0007)
is what a tenant created on it, or moved to it, gets. Migration 0005 adds the default plans (free, standard,
enterprise; docs/plans.md). Mixin of `TenantStore`; thread-safe.
"""

from __future__ import annotations

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from tenancy.domain import Plan, PlanDimension, PlanTier
from tenancy.errors import NotFoundError, ValidationError
from tenancy.limits import LIMIT_NAMES, limits_from
from tenancy.models import PlanDimensionRow, PlanRow, PlanTierRow
from tenancy.plan_rules import check_plan, plan_to_json
from tenancy.quota_chain import QUOTA_NAMES, stored_value
from tenancy.store_base import StoreCore


def _quotas(row: PlanRow) -> dict[str, float]:
    values = {name: getattr(row, name) for name in QUOTA_NAMES}
    return {name: stored_value(name, value) for name, value in values.items() if value is not None}


def _write_terms(row: PlanRow, plan: Plan) -> None:
    for name in LIMIT_NAMES:
        setattr(row, name, getattr(plan.limits, name))
    for name in QUOTA_NAMES:
        setattr(row, name, plan.quotas.get(name))
    row.authorization = plan.authorization


def known_plan(session: Session, name: str, field: str = "plan") -> Plan:
    """The plan named `name`; ValidationError naming the known plans when there is none."""
    row = session.get(PlanRow, name)
    if row is None:
        known = ", ".join(session.scalars(select(PlanRow.name).order_by(PlanRow.name))) or "none"
        raise ValidationError(
            field,
            f"unknown plan {name!r}; the plans are: {known} "
            "(`pier admin plans list` shows them, `pier admin plans put` defines one)",
        )
    return _load(session, row)


def _load(session: Session, row: PlanRow) -> Plan:
    dimensions: dict[str, PlanDimension] = {}
    dimension_rows = session.scalars(
        select(PlanDimensionRow)
        .where(PlanDimensionRow.plan_name == row.name)
        .order_by(PlanDimensionRow.dimension)
    )
    tiers: dict[str, list[PlanTier]] = {}
    tier_rows = session.scalars(
        select(PlanTierRow).where(PlanTierRow.plan_name == row.name).order_by(PlanTierRow.position)
    )
    for tier in tier_rows:
        tiers.setdefault(tier.dimension, []).append(PlanTier(tier.up_to, tier.unit_price))
    for dimension in dimension_rows:
        dimensions[dimension.dimension] = PlanDimension(
            dimension.included, tuple(tiers.get(dimension.dimension, ()))
        )
    return Plan(
        row.name, row.currency, dimensions, limits_from(row), _quotas(row), row.authorization
    )


class PlanCommands(StoreCore):
    def get_plan(self, name: str) -> Plan:
        with self._db.read() as session:
            row = session.get(PlanRow, name) if isinstance(name, str) else None
            if row is None:
                raise NotFoundError(f"plan {name!r} not found")
            return _load(session, row)

    def list_plans(self) -> list[Plan]:
        with self._db.read() as session:
            rows = session.scalars(select(PlanRow).order_by(PlanRow.name))
            return [_load(session, row) for row in rows]

    def put_plan(self, plan: Plan, *, actor: str) -> Plan:
        """Create or replace the plan named `plan.name`; returns it as stored."""
        plan = check_plan(plan)
        with self._db.write() as session:
            now = self._now()
            row = session.get(PlanRow, plan.name)
            if row is None:
                row = PlanRow(name=plan.name, currency=plan.currency, updated_at=now)
                _write_terms(row, plan)
                session.add(row)
            else:
                _write_terms(row, plan)
                row.currency, row.updated_at = plan.currency, now
                session.execute(delete(PlanTierRow).where(PlanTierRow.plan_name == plan.name))
                session.execute(
                    delete(PlanDimensionRow).where(PlanDimensionRow.plan_name == plan.name)
                )
            session.flush()
            for name, dimension in plan.dimensions.items():
                session.add(
                    PlanDimensionRow(
                        plan_name=plan.name, dimension=name, included=dimension.included
                    )
                )
                session.flush()
                session.add_all(
                    PlanTierRow(
                        plan_name=plan.name,
                        dimension=name,
                        position=position,
                        up_to=tier.up_to,
                        unit_price=tier.unit_price,
                    )
                    for position, tier in enumerate(dimension.tiers)
                )
            self._journal(
                session,
                actor=actor,
                action="plan.put",
                tenant_id=None,
                subject=plan.name,
                details=plan_to_json(plan),
                at=now,
            )
            session.flush()
            return _load(session, row)
