"""Tenants on both stores: create, read, list with cursors, update, the status lifecycle, errors."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from tenancy.domain import DEFAULT_LIMITS, TenantLimits
from tenancy.errors import ConflictError, NotFoundError, TenantDeletedError, ValidationError
from tenancy.ids import TENANT_ID
from tenancy.store import TenantStore
from tests.integration.tenancy.helpers import OPERATOR, tenant
from tests.tenancy_fixtures import TenancyClock

pytestmark = pytest.mark.integration
FRACTION: Any = 1.5  # not an integer: Kafka's byte rates are whole bytes/s here


def test_create_generates_an_id_and_defaults(
    store: TenantStore, tenancy_clock: TenancyClock
) -> None:
    created = store.create_tenant(display_name="Acme", plan="free", actor=OPERATOR)
    assert TENANT_ID.fullmatch(created.id)
    assert created.status == "active"
    assert created.limits == DEFAULT_LIMITS
    assert created.created_at == created.updated_at == tenancy_clock.now
    assert store.get_tenant(created.id) == created


def test_chosen_id_and_limits_are_kept(store: TenantStore) -> None:
    limits = TenantLimits(10, 2**30, 5, 65536)
    created = store.create_tenant(
        display_name="Acme", plan="free", limits=limits, tenant_id="acme", actor=OPERATOR
    )
    assert (created.id, created.limits) == ("acme", limits)
    assert store.get_tenant("acme").limits == limits


def test_tenant_rate_caps_are_kept_changed_and_removed(store: TenantStore) -> None:
    capped = TenantLimits(
        10, 2**30, 5, 65536, max_producer_byte_rate=2**62, max_consumer_byte_rate=1
    )
    created = store.create_tenant(
        display_name="Acme", plan="free", limits=capped, tenant_id="acme", actor=OPERATOR
    )
    assert created.limits == store.get_tenant("acme").limits == capped
    uncapped = replace(capped, max_producer_byte_rate=None)
    assert store.update_tenant("acme", limits=uncapped, actor=OPERATOR).limits == uncapped
    assert store.get_tenant("acme").limits == uncapped
    assert store.list_tenants().items[0].limits == uncapped
    entry = store.audit_log(tenant_id="acme").items[0]  # newest first
    assert entry.action == "tenant.updated"
    assert entry.details["limits"]["max_producer_byte_rate"] is None
    assert entry.details["limits"]["max_consumer_byte_rate"] == 1


def test_a_plan_s_group_and_transactional_id_limits_reach_its_new_tenants(
    store: TenantStore,
) -> None:
    """A plan's `max_groups` / `max_transactional_ids` go to a tenant created on it, with or
    without explicit limits (explicit counts win; None in both: the gateway's setting)."""
    standard = store.get_plan("standard")
    counted = replace(standard.limits, max_groups=100, max_transactional_ids=40)
    store.put_plan(replace(standard, name="pro", limits=counted), actor=OPERATOR)
    plain = store.create_tenant(display_name="A", plan="pro", tenant_id="aaa", actor=OPERATOR)
    assert plain.limits == counted
    four = TenantLimits(10, 2**30, 5, 65536)
    explicit = store.create_tenant(
        display_name="B", plan="pro", limits=four, tenant_id="bbb", actor=OPERATOR
    )
    assert explicit.limits == replace(four, max_groups=100, max_transactional_ids=40)
    own = store.create_tenant(
        display_name="C", plan="pro", limits=replace(four, max_groups=3), tenant_id="ccc",
        actor=OPERATOR,
    )  # fmt: skip
    assert store.get_tenant("ccc").limits == replace(four, max_groups=3, max_transactional_ids=40)
    assert own.limits.max_groups == 3
    uncounted = store.create_tenant(
        display_name="D", plan="free", limits=four, tenant_id="ddd", actor=OPERATOR
    )
    assert uncounted.limits == four  # the free plan sets none: the gateway's


def test_duplicate_id_conflicts(store: TenantStore) -> None:
    tenant(store, "acme")
    with pytest.raises(ConflictError):
        tenant(store, "acme")


@pytest.mark.parametrize("bad", ["ab", "Acme", "1acme", "acme_x", "a" * 17, "acme-", "ac--me"])
def test_bad_tenant_ids_are_refused(store: TenantStore, bad: str) -> None:
    with pytest.raises(ValidationError) as error:
        tenant(store, bad)
    assert error.value.field == "tenant_id"


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        (TenantLimits(0, 1, 1, 1), "limits.max_partitions"),
        (TenantLimits(1, -5, 1, 1), "limits.max_storage_bytes"),
        (TenantLimits(1, 1, 1, 200 * 2**20), "limits.max_request_bytes"),
        (TenantLimits(1, 1, 1, 1, max_producer_byte_rate=0), "limits.max_producer_byte_rate"),
        (TenantLimits(1, 1, 1, 1, max_consumer_byte_rate=-1), "limits.max_consumer_byte_rate"),
        (TenantLimits(1, 1, 1, 1, max_producer_byte_rate=2**63), "limits.max_producer_byte_rate"),
        (
            TenantLimits(1, 1, 1, 1, max_consumer_byte_rate=FRACTION),
            "limits.max_consumer_byte_rate",
        ),
        (TenantLimits(1, 1, 1, 1, max_producer_byte_rate=True), "limits.max_producer_byte_rate"),
    ],
)
def test_bad_limits_are_refused(store: TenantStore, limits: TenantLimits, field: str) -> None:
    with pytest.raises(ValidationError) as error:
        store.create_tenant(display_name="x", plan="free", limits=limits, actor=OPERATOR)
    assert error.value.field == field


def test_bad_names_and_actor_are_refused(store: TenantStore) -> None:
    with pytest.raises(ValidationError):
        store.create_tenant(display_name=" ", plan="free", actor=OPERATOR)
    with pytest.raises(ValidationError):
        store.create_tenant(display_name="x", plan="Free Plan", actor=OPERATOR)
    with pytest.raises(ValidationError):
        store.create_tenant(display_name="x", plan="free", actor="")
    assert store.list_tenants().items == []


def test_unknown_tenant_is_not_found(store: TenantStore) -> None:
    with pytest.raises(NotFoundError):
        store.get_tenant("nope")
    with pytest.raises(NotFoundError):
        store.update_tenant("nope", display_name="x", actor=OPERATOR)
    with pytest.raises(NotFoundError):
        store.set_tenant_status("nope", "suspended", actor=OPERATOR)


def test_list_pages_through_every_tenant_once(
    store: TenantStore, tenancy_clock: TenancyClock
) -> None:
    ids = []
    for index in range(7):
        ids.append(tenant(store, f"tenant-{index}").id)
        if index % 3 == 0:
            tenancy_clock.advance(1)  # some share a created_at: the id breaks the tie
    seen, cursor = [], None
    while True:
        page = store.list_tenants(limit=3, cursor=cursor)
        assert len(page.items) <= 3
        seen += [item.id for item in page.items]
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == ids


def test_list_filters_by_status_and_hides_deleted(store: TenantStore) -> None:
    for name in ("aaa", "bbb", "ccc"):
        tenant(store, name)
    store.set_tenant_status("bbb", "suspended", actor=OPERATOR)
    store.set_tenant_status("ccc", "deleted", actor=OPERATOR)
    assert [t.id for t in store.list_tenants().items] == ["aaa", "bbb"]
    assert [t.id for t in store.list_tenants(status="suspended").items] == ["bbb"]
    assert [t.id for t in store.list_tenants(status="deleted").items] == ["ccc"]
    with pytest.raises(ValidationError):
        store.list_tenants(status="gone")


@pytest.mark.parametrize("limit", [0, 1001, -1])
def test_list_limit_is_bounded(store: TenantStore, limit: int) -> None:
    with pytest.raises(ValidationError) as error:
        store.list_tenants(limit=limit)
    assert error.value.field == "limit"


@pytest.mark.parametrize("cursor", ["garbage!", "WzFd", "bm90IGpzb24"])
def test_forged_cursors_are_refused(store: TenantStore, cursor: str) -> None:
    with pytest.raises(ValidationError) as error:
        store.list_tenants(cursor=cursor)
    assert error.value.field == "cursor"


def test_update_changes_only_what_is_given(store: TenantStore, tenancy_clock: TenancyClock) -> None:
    created = tenant(store, "acme")
    free = store.get_plan("free")
    store.put_plan(replace(free, name="pro"), actor=OPERATOR)  # the same terms, another name
    tenancy_clock.advance(5)
    updated = store.update_tenant("acme", plan="pro", actor=OPERATOR)
    assert (updated.plan, updated.display_name, updated.limits) == (
        "pro",
        created.display_name,
        created.limits,
    )
    assert updated.updated_at == tenancy_clock.now > created.updated_at
    assert updated.created_at == created.created_at
    assert store.get_tenant("acme") == updated


def test_status_lifecycle(store: TenantStore) -> None:
    tenant(store, "acme")
    assert store.set_tenant_status("acme", "suspended", actor=OPERATOR).status == "suspended"
    assert store.set_tenant_status("acme", "active", actor=OPERATOR).status == "active"
    version = store.current_version()
    assert store.set_tenant_status("acme", "active", actor=OPERATOR).status == "active"
    assert store.current_version() == version  # a no-op journals nothing
    assert store.set_tenant_status("acme", "deleted", actor=OPERATOR).status == "deleted"
    with pytest.raises(TenantDeletedError):
        store.set_tenant_status("acme", "active", actor=OPERATOR)
    with pytest.raises(TenantDeletedError):
        store.update_tenant("acme", display_name="again", actor=OPERATOR)
    with pytest.raises(ValidationError):
        store.set_tenant_status("acme", "paused", actor=OPERATOR)
    assert store.get_tenant("acme").status == "deleted"  # soft: still readable
