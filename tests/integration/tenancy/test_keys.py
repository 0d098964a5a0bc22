"""Service accounts and API keys on both stores: issue, list, verify (PLAIN and SCRAM), revoke,
expiry, suspension, last use, and that secrets never leave through lists, logs or the audit log."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from tenancy.domain import Principal
from tenancy.errors import ConflictError, ForbiddenError, NotFoundError, ValidationError
from tenancy.ids import KEY_ID, SERVICE_ACCOUNT_ID
from tenancy.scram import client_proof, server_signature, verify_client_proof
from tenancy.store import TenantStore
from tests.integration.tenancy.helpers import OPERATOR, account, key_for, tenant
from tests.tenancy_fixtures import TenancyClock

pytestmark = pytest.mark.integration


def test_service_accounts_are_per_tenant_and_unique_by_name(store: TenantStore) -> None:
    tenant(store, "acme")
    tenant(store, "beta")
    first = store.create_service_account("acme", name="app", description="the app", actor=OPERATOR)
    assert SERVICE_ACCOUNT_ID.fullmatch(first.id)
    assert (first.tenant_id, first.name, first.description) == ("acme", "app", "the app")
    with pytest.raises(ConflictError):
        account(store, "acme", "app")
    other = account(store, "beta", "app")  # the same name in another tenant is fine
    assert store.list_service_accounts("acme").items == [first]
    assert store.list_service_accounts("beta").items == [other]
    assert store.get_service_account("acme", first.id) == first
    with pytest.raises(NotFoundError):
        store.get_service_account("beta", first.id)
    with pytest.raises(NotFoundError):
        account(store, "nope")


def test_service_accounts_page(store: TenantStore) -> None:
    tenant(store, "acme")
    made = [account(store, "acme", f"sa{index}").id for index in range(5)]
    first = store.list_service_accounts("acme", limit=2)
    rest = store.list_service_accounts("acme", limit=10, cursor=first.next_cursor)
    assert sorted([sa.id for sa in first.items + rest.items]) == sorted(made)
    assert rest.next_cursor is None


def test_issued_key_verifies_with_plain(store: TenantStore) -> None:
    tenant(store, "acme")
    sa, key, secret = key_for(store, "acme", description="ci")
    assert KEY_ID.fullmatch(key.key_id)
    assert len(secret) >= 43 and secret.isalnum()
    assert (key.tenant_id, key.service_account_id, key.description) == ("acme", sa.id, "ci")
    assert store.verify_api_key(key.key_id, secret) == Principal("acme", sa.id, key.key_id)
    assert (
        store.verify_api_key(key.key_id, secret[:-1] + ("a" if secret[-1] != "a" else "b")) is None
    )
    assert store.verify_api_key("AAAAAAAAAAAAAAAA", secret) is None
    assert store.verify_api_key("not a key id", secret) is None
    assert store.verify_api_key(key.key_id, "") is None
    assert store.verify_api_key(key.key_id, "x" * 100_000) is None


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_verifier_authenticates_the_secret(store: TenantStore, mechanism: str) -> None:
    tenant(store, "acme")
    sa, key, secret = key_for(store, "acme")
    found = store.scram_credential(key.key_id, mechanism)
    assert found is not None
    principal, credential = found
    assert principal == Principal("acme", sa.id, key.key_id)
    assert credential.mechanism == mechanism and credential.iterations >= 4096
    auth_message = b"n=" + key.key_id.encode() + b",r=abc,r=abcdef,s=xyz,i=8192,c=biws,r=abcdef"
    proof = client_proof(mechanism, secret, credential.salt, credential.iterations, auth_message)
    assert verify_client_proof(credential, auth_message, proof)
    wrong = client_proof(
        mechanism, secret + "x", credential.salt, credential.iterations, auth_message
    )
    assert not verify_client_proof(credential, auth_message, wrong)
    assert len(server_signature(credential, auth_message)) in (32, 64)
    with pytest.raises(ValidationError):
        store.scram_credential(key.key_id, "SCRAM-SHA-1")


def test_revoked_key_fails_and_revocation_is_idempotent(store: TenantStore) -> None:
    tenant(store, "acme")
    _, key, secret = key_for(store, "acme")
    revoked = store.revoke_api_key(key.key_id, actor=OPERATOR)
    assert revoked.revoked_at is not None
    assert store.verify_api_key(key.key_id, secret) is None
    assert store.scram_credential(key.key_id, "SCRAM-SHA-256") is None
    version = store.current_version()
    assert store.revoke_api_key(key.key_id, actor=OPERATOR) == revoked
    assert store.current_version() == version
    with pytest.raises(NotFoundError):
        store.revoke_api_key("AAAAAAAAAAAAAAAA", actor=OPERATOR)


def test_expired_key_fails(store: TenantStore, tenancy_clock: TenancyClock) -> None:
    tenant(store, "acme")
    expires = tenancy_clock.now + timedelta(hours=1)
    _, key, secret = key_for(store, "acme", expires_at=expires)
    assert key.expires_at == expires
    assert store.verify_api_key(key.key_id, secret) is not None
    tenancy_clock.advance(3600)
    assert store.verify_api_key(key.key_id, secret) is None
    assert store.scram_credential(key.key_id, "SCRAM-SHA-512") is None


def test_expiry_must_be_future_and_aware(store: TenantStore, tenancy_clock: TenancyClock) -> None:
    tenant(store, "acme")
    sa = account(store, "acme")
    for bad in (tenancy_clock.now, tenancy_clock.now.replace(tzinfo=None) + timedelta(days=1)):
        with pytest.raises(ValidationError) as error:
            store.create_api_key("acme", service_account_id=sa.id, expires_at=bad, actor=OPERATOR)
        assert error.value.field == "expires_at"


def test_keys_of_suspended_or_deleted_tenants_fail(store: TenantStore) -> None:
    tenant(store, "acme")
    _, key, secret = key_for(store, "acme")
    store.set_tenant_status("acme", "suspended", actor=OPERATOR)
    assert store.verify_api_key(key.key_id, secret) is None
    assert store.scram_credential(key.key_id, "SCRAM-SHA-256") is None
    store.set_tenant_status("acme", "active", actor=OPERATOR)
    assert store.verify_api_key(key.key_id, secret) is not None
    store.set_tenant_status("acme", "deleted", actor=OPERATOR)
    assert store.verify_api_key(key.key_id, secret) is None


def test_key_needs_an_account_of_the_same_tenant(store: TenantStore) -> None:
    tenant(store, "acme")
    tenant(store, "beta")
    theirs = account(store, "beta")
    with pytest.raises(ForbiddenError):
        store.create_api_key("acme", service_account_id=theirs.id, actor=OPERATOR)
    with pytest.raises(ValidationError):
        store.create_api_key("acme", service_account_id="sa-0000000000", actor=OPERATOR)
    with pytest.raises(NotFoundError):
        store.create_api_key("nope", service_account_id=theirs.id, actor=OPERATOR)


def test_last_used_is_recorded_at_most_once_a_minute(
    store: TenantStore, tenancy_clock: TenancyClock
) -> None:
    tenant(store, "acme")
    _, key, secret = key_for(store, "acme")
    assert store.get_api_key(key.key_id).last_used_at is None
    store.verify_api_key(key.key_id, secret)
    first = store.get_api_key(key.key_id).last_used_at
    assert first == tenancy_clock.now
    tenancy_clock.advance(30)
    store.verify_api_key(key.key_id, secret)
    assert store.get_api_key(key.key_id).last_used_at == first
    tenancy_clock.advance(31)
    store.verify_api_key(key.key_id, secret)
    assert store.get_api_key(key.key_id).last_used_at == tenancy_clock.now


def test_list_keys_shows_no_secret_material(
    store: TenantStore, tenancy_clock: TenancyClock
) -> None:
    tenant(store, "acme")
    _, key, secret = key_for(store, "acme")
    store.revoke_api_key(key.key_id, actor=OPERATOR)
    tenancy_clock.advance(1)
    _, second, second_secret = key_for(store, "acme", name="other")
    page = store.list_api_keys("acme")
    assert [item.key_id for item in page.items] == [key.key_id, second.key_id]
    assert page.items[0].revoked_at is not None and page.items[1].revoked_at is None
    dumped = repr(page)
    assert secret not in dumped and second_secret not in dumped
    assert "Secret('***')" in repr((second, second_secret))


def test_secrets_never_reach_logs_or_the_audit_log(
    store_url: str, tenancy_clock: TenancyClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="sqlalchemy")  # SQL statements and their rows too
    with TenantStore.open(store_url, clock=tenancy_clock) as store:
        tenant(store, "acme")
        _, key, secret = key_for(store, "acme")
        token = store.create_operator("root", actor="init")
        assert store.verify_api_key(key.key_id, secret) is not None
        assert store.verify_operator(token) == "root"
        store.verify_api_key(key.key_id, secret + "x")
        store.revoke_api_key(key.key_id, actor=OPERATOR)
        entries = store.audit_log(limit=1000).items
    assert any(entry.action == "api_key.created" for entry in entries)
    assert "INSERT INTO api_keys" in caplog.text  # the SQL itself was logged, and checked
    for text in (caplog.text, repr(entries)):
        assert secret not in text
        assert token not in text


def test_operators_tokens(store: TenantStore) -> None:
    assert not store.has_operators()
    token = store.create_operator("root", actor="init")
    assert token.startswith("pop_") and len(token) > 40
    assert store.has_operators()
    assert store.verify_operator(token) == "root"
    assert store.verify_operator(token + "x") is None
    assert store.verify_operator("pop_") is None
    assert store.verify_operator("") is None
    with pytest.raises(ConflictError):
        store.create_operator("root", actor="init")
    assert store.verify_operator(store.create_operator("second", actor="root")) == "second"
